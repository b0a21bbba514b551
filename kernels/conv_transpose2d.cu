// Transposed convolution, gather formulation, one block per output phase (conv_transpose2d.cuh).
#include "kernels/conv_device.cuh"
#include "kernels/conv_transpose2d.cuh"
#include "kernels/launch.cuh"
#include "kernels/nd_index.cuh"

namespace cnnrt::kernels {
namespace {

constexpr int kThreads = 128;

// The output extent of each phase is at most ceil(extent / stride); a phase's own extent may be one less.
struct PhaseGrid {
  int64_t max_rows = 0, max_cols = 0;  // per phase, over all phases
  int64_t channel_blocks_per_group = 0;
  int64_t phases = 0;                  // rows.stride * cols.stride
};

// grid.y: phases (grid-stride), grid.x: (image, output-channel block, phase row, phase column), grid-stride.
// Thread item i = ((n * channel_blocks + cb) * max_rows + jy) * max_cols + jx computes output pixel
// (oy0 + jy * stride_h, ox0 + jx * stride_w) of phase (oy0, ox0) for output channels [m0, m0 + MT) of its group.
template <int MT, Act ACT, class Index>
__global__ void __launch_bounds__(kThreads)
    conv_transpose2d_kernel(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y,
                            const ConvTranspose2dDesc desc, const Epilogue e, const PhaseGrid grid,
                            const FixedDivisor<Index> cols_div, const FixedDivisor<Index> rows_div,
                            const FixedDivisor<Index> blocks_div, const Index count) {
  wait_for_prior_grid();  // launched with PDL (launch.cuh): nothing global before this
  const SlidingAxis& rows = desc.rows;
  const SlidingAxis& cols = desc.cols;
  const int64_t in_per_group = desc.in_channels / desc.groups;
  const int64_t out_per_group = desc.out_channels / desc.groups;
  const int64_t in_plane = rows.input * cols.input;
  const int64_t kernel_plane = rows.kernel * cols.kernel;
  const int64_t w_channel_stride = out_per_group * kernel_plane;  // from input channel c to c + 1
  for (int64_t phase = blockIdx.y; phase < grid.phases; phase += gridDim.y) {
    const int64_t oy0 = phase / cols.stride, ox0 = phase % cols.stride;
    if (oy0 >= rows.output || ox0 >= cols.output) continue;  // uniform across the block
    const int64_t phase_rows = (rows.output - oy0 + rows.stride - 1) / rows.stride;
    const int64_t phase_cols = (cols.output - ox0 + cols.stride - 1) / cols.stride;
    // Output (oy0 + jy * stride) sits at padded position py0 + jy * stride; tap ky reaches it from input row
    // (py0 - ky * dilation) / stride + jy when that division is exact.
    const int64_t py0 = oy0 + rows.pad_begin, px0 = ox0 + cols.pad_begin;
    for (Index i = global_thread_index<Index>(); i < count; i += global_thread_count<Index>()) {
      const Index row_item = cols_div.quotient(i);
      const int64_t jx = static_cast<int64_t>(i - row_item * cols_div.divisor);
      const Index block_item = rows_div.quotient(row_item);
      const int64_t jy = static_cast<int64_t>(row_item - block_item * rows_div.divisor);
      const Index n_index = blocks_div.quotient(block_item);
      const int64_t cb = static_cast<int64_t>(block_item - n_index * blocks_div.divisor);
      const int64_t n = static_cast<int64_t>(n_index);
      if (jy >= phase_rows || jx >= phase_cols) continue;
      const int64_t g = cb / grid.channel_blocks_per_group;
      const int64_t m0 = (cb % grid.channel_blocks_per_group) * MT;  // within the group
      const int valid = static_cast<int>(out_per_group - m0 < MT ? out_per_group - m0 : MT);

      float acc[MT];
#pragma unroll
      for (int t = 0; t < MT; ++t) acc[t] = 0.0f;
      const float* x_group = x + (n * desc.in_channels + g * in_per_group) * in_plane;
      const float* w_group = w + (g * in_per_group * out_per_group + m0) * kernel_plane;
      for (int64_t ky = 0; ky < rows.kernel; ++ky) {
        const int64_t ty = py0 - ky * rows.dilation;
        if (ty % rows.stride != 0) continue;  // uniform: the phase decides
        const int64_t iy = ty / rows.stride + jy;
        if (iy < 0 || iy >= rows.input) continue;
        for (int64_t kx = 0; kx < cols.kernel; ++kx) {
          const int64_t tx = px0 - kx * cols.dilation;
          if (tx % cols.stride != 0) continue;
          const int64_t ix = tx / cols.stride + jx;
          if (ix < 0 || ix >= cols.input) continue;
          const float* xp = x_group + iy * cols.input + ix;
          const float* wp = w_group + ky * cols.kernel + kx;
          for (int64_t c = 0; c < in_per_group; ++c) {
            const float v = __ldg(xp + c * in_plane);
            const float* wc = wp + c * w_channel_stride;
#pragma unroll
            for (int t = 0; t < MT; ++t) {
              // Channels past the group's last read its last one (in bounds); their sums are not stored.
              const int tc = t < valid ? t : valid - 1;
              acc[t] = fmaf(v, __ldg(wc + tc * kernel_plane), acc[t]);
            }
          }
        }
      }
      const int64_t oy = oy0 + jy * rows.stride, ox = ox0 + jx * cols.stride;
      const int64_t m_first = g * out_per_group + m0;
      float* out = y + ((n * desc.out_channels + m_first) * rows.output + oy) * cols.output + ox;
      const int64_t out_plane = rows.output * cols.output;
#pragma unroll
      for (int t = 0; t < MT; ++t) {
        if (t < valid) {
          const float b = e.bias != nullptr ? __ldg(e.bias + m_first + t) : 0.0f;
          out[t * out_plane] = activate<ACT>(acc[t] + b, e);
        }
      }
    }
  }
}

PhaseGrid phase_grid(const ConvTranspose2dDesc& d, int mt) {
  PhaseGrid g;
  g.max_rows = (d.rows.output + d.rows.stride - 1) / d.rows.stride;
  g.max_cols = (d.cols.output + d.cols.stride - 1) / d.cols.stride;
  g.channel_blocks_per_group = (d.out_channels / d.groups + mt - 1) / mt;
  g.phases = d.rows.stride * d.cols.stride;
  return g;
}

template <int MT, Act ACT, class Index>
void launch_with(const float* x, const float* w, float* y, const ConvTranspose2dDesc& d, const Epilogue& e,
                 const PhaseGrid& g, int64_t count, cudaStream_t stream) {
  const int64_t blocks = g.channel_blocks_per_group * d.groups;
  const unsigned phase_blocks = static_cast<unsigned>(g.phases < kMaxGridYZ ? g.phases : kMaxGridYZ);
  const dim3 grid_dims(blocks_for(count, kThreads), phase_blocks);
  launch_overlapped(conv_transpose2d_kernel<MT, ACT, Index>, grid_dims, dim3(kThreads), 0, stream, 1, x, w, y, d, e, g,
                    FixedDivisor<Index>::make(static_cast<Index>(g.max_cols)),
                    FixedDivisor<Index>::make(static_cast<Index>(g.max_rows)),
                    FixedDivisor<Index>::make(static_cast<Index>(blocks)), static_cast<Index>(count));
}

template <int MT, Act ACT>
void launch_conv_transpose2d(const float* x, const float* w, float* y, const ConvTranspose2dDesc& d, const Epilogue& e,
                             cudaStream_t stream) {
  const PhaseGrid g = phase_grid(d, MT);
  const int64_t count = d.batch * g.channel_blocks_per_group * d.groups * g.max_rows * g.max_cols;
  if (count <= 0) return;
  if (count < (int64_t{1} << 31)) {
    launch_with<MT, ACT, uint32_t>(x, w, y, d, e, g, count, stream);
  } else {
    launch_with<MT, ACT, uint64_t>(x, w, y, d, e, g, count, stream);
  }
}

struct Entry {
  int mt;
  Act act;
  void (*launch)(const float*, const float*, float*, const ConvTranspose2dDesc&, const Epilogue&, cudaStream_t);
};

#define CT_ENTRY(MT, ACT) Entry{MT, ACT, &launch_conv_transpose2d<MT, ACT>}
#define CT_ACTS(MT) CT_ENTRY(MT, Act::None), CT_ENTRY(MT, Act::Relu), CT_ENTRY(MT, Act::Param)
const Entry kEntries[] = {CT_ACTS(8), CT_ACTS(4), CT_ACTS(2), CT_ACTS(1)};

const char* act_token(Act act) { return act == Act::None ? "none" : act == Act::Relu ? "relu" : "act"; }

}  // namespace

std::string conv_transpose2d_unsupported(const ConvTranspose2dDesc& desc, const Epilogue& e) {
  if (e.residual != nullptr) return "a residual epilogue";
  if (e.pool.kind != FusedPool::None) return "a pooling epilogue";
  if (desc.groups < 1 || desc.in_channels % desc.groups != 0 || desc.out_channels % desc.groups != 0) {
    return "channels that do not split into the groups";
  }
  for (const SlidingAxis* a : {&desc.rows, &desc.cols}) {
    if (a->stride < 1 || a->dilation < 1 || a->kernel < 1) return "a stride, dilation or kernel below 1";
  }
  return "";
}

std::vector<ConvTransposeVariant> conv_transpose2d_variants(const ConvTranspose2dDesc& desc, const Epilogue& e,
                                                            int sm_count) {
  std::vector<ConvTransposeVariant> out;
  if (!conv_transpose2d_unsupported(desc, e).empty()) return out;
  const Act wanted = e.param_act == ParamAct::None ? Act::None : e.param_act == ParamAct::Relu ? Act::Relu : Act::Param;
  const int64_t per_group = desc.out_channels / desc.groups;
  const int64_t pixels = desc.batch * desc.rows.output * desc.cols.output;
  // Enough threads to give every SM a few blocks; below that, fewer channels a thread spread the work wider.
  const int64_t enough_threads = int64_t{4} * kThreads * (sm_count > 0 ? sm_count : 1);
  std::vector<std::pair<ConvTransposeVariant, double>> scored;
  for (const Entry& en : kEntries) {
    if (en.act != wanted || (en.mt > 1 && en.mt > per_group)) continue;
    const int64_t threads = pixels * desc.groups * ((per_group + en.mt - 1) / en.mt);
    // Lower first. A layer that fills the GPU gains from channel reuse (each input read feeds mt sums); one that
    // does not is bound by each thread's serial work, which grows with mt: those rank after, fewest first.
    const double score = threads >= enough_threads ? 1.0 / en.mt : 1.0 + en.mt;
    scored.push_back({{"conv_transpose_gather_m" + std::to_string(en.mt) + "_" + act_token(wanted), en.mt, en.launch},
                      score});
  }
  return rank_by_score(std::move(scored));
}

}  // namespace cnnrt::kernels
