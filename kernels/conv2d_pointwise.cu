// Family "pw": 1x1 convolutions at stride 1 on the CUDA cores, for the layers of few channels that memory bounds.
//
// A 1x1 layer of C/groups <= 256 input and a few dozen output channels a group does at most a few multiply-adds a
// byte it moves (MobileNet's and ShuffleNet's narrow pointwise layers: 16 -> 8 on 48x48 maps, ShuffleNet's
// grouped 120 -> 30): at batch 256 its floor is reading the input and writing the output once. The GEMM families
// pad such layers to their tiles (a group of 10 filters to 32 or 64) and gather the input through shared memory;
// here each thread reads its own 4 consecutive pixels of every channel of its group as one 16-byte load (the
// loads of a warp along 512 contiguous bytes of a plane) and keeps FT (4, 8 or 16) filters x 4 pixels of sums in
// registers, the next 64 / FT channels' loads in flight; a tap is one broadcast float4 of weights from shared
// memory per 4 filters and 16 FMAs. Planes of H*W % 4 != 0 (3x3, 7x7, 55x55 maps) take the same loop with four
// loads a channel, a thread's pixels 32 apart (a warp's loads each one contiguous run) and possibly in two images.
//
// A block is 64 quads of consecutive pixels of the batch x FY thread rows, each row FT of the block's FT*FY
// filters of one group; the rows of a block read the same input (L1 hits after the first). The block's filters of
// every channel of the group, [c][f] padded to 16 filters a group, are staged in shared memory before the PDL
// wait. Blocks that share pixels are consecutive in launch order (filter blocks are the grid's x), so a layer
// whose filters take several blocks reads its input from L2 after the first.
//
// The input may be read through a per-channel affine and activation (`pre` variants, InputPrologue: DenseNet's
// BatchNormalization + ReLU in front of its 1x1 convolutions), applied to each loaded value, the channel's scale and
// shift staged in shared memory beside the filters; and with an image stride (a block of a channel Concat's output:
// DenseNet's running stack), every variant. A 1x1 layer without padding has no padding the affine could reach.
#include "kernels/conv_common.cuh"
#include "kernels/conv_device.cuh"
#include "kernels/conv_registry.hpp"
#include "kernels/fast_div.cuh"
#include "kernels/launch.cuh"

namespace cnnrt::kernels {

namespace pw {

constexpr int kQuads = 64;           // pixel quads a block row (blockDim.x)
constexpr int kFilterPad = 16;       // a group's filters in the packed weights: a multiple of this (padded_filters)
constexpr int kMaxChannels = 256;    // C / groups the family takes
constexpr int kMaxBlockFilters = 64;
constexpr int kSmemBytes = 48 * 1024;

// A group's filters in the packed weights: fg rounded up to kFilterPad.
inline int padded_filters(int fg) { return (fg + kFilterPad - 1) / kFilterPad * kFilterPad; }

// Shared memory of a block: its filters of every channel of the group, and (pre) the channels' scale and shift.
inline size_t smem_bytes(int cg, int fb, bool pre) {
  return (size_t(cg) * fb + (pre ? 2 * size_t(cg) : 0)) * sizeof(float);
}

struct Params {
  int cg, fg, fgp;      // a group's channels and filters; its filters in the packed weights (fg rounded up)
  int hw;               // pixels a plane
  FastDiv plane;        // divides by hw
  int npix, nquads;     // N * hw, and the threads that take 4 of them
  int fb4_shift;        // log2 of the block's filters / 4
  int64_t in_image;     // floats from one input image to the next (C * hw)
  int64_t out_image;    // floats from one output image to the next
};

// The sums of FT filters x 4 pixels over the group's channels. V: the quad lies in one plane, 16-byte aligned (one
// float4 load a channel at x + xoff[0]); else four loads, each pixel at its own offset (planes of H*W % 4 != 0).
// How a loaded value is read: as is, through the affine and ReLU, or through the affine and the activation chosen
// at run time (InputPrologue::act).
enum class Pre { None, Relu, Param };

template <int FT, int U, bool V, Pre PRE>
__device__ __forceinline__ void accumulate(float (&acc)[FT][4], const float* __restrict__ x, const int64_t (&xoff)[4],
                                           const float4* wrow, const float2* affine, const InputPrologue& in,
                                           const Params& q) {
  const int fb4 = 1 << q.fb4_shift;
  auto load = [&](int c) {
    const int64_t at = static_cast<int64_t>(c) * q.hw;
    if constexpr (V) {
      return __ldg(reinterpret_cast<const float4*>(x + xoff[0] + at));
    } else {
      return make_float4(__ldg(x + xoff[0] + at), __ldg(x + xoff[1] + at), __ldg(x + xoff[2] + at),
                         __ldg(x + xoff[3] + at));
    }
  };
  auto taps = [&](const float4& v, int c) {
    float xv[4] = {v.x, v.y, v.z, v.w};
    if constexpr (PRE != Pre::None) {
      const float2 a = affine[c];  // (scale, shift)
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float t = fmaf(xv[k], a.x, a.y);
        xv[k] = PRE == Pre::Relu ? fmaxf(t, 0.0f) : param_activate(t, in.act, in.alpha, in.beta);
      }
    }
#pragma unroll
    for (int j = 0; j < FT / 4; ++j) {
      const float4 w = wrow[c * fb4 + j];
      const float wv[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int k = 0; k < 4; ++k) acc[4 * j + i][k] = fmaf(wv[i], xv[k], acc[4 * j + i][k]);
      }
    }
  };
  int c = 0;
  for (; c + U <= q.cg; c += U) {
    float4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = load(c + u);  // U loads in flight before the first FMA
#pragma unroll
    for (int u = 0; u < U; ++u) taps(v[u], c + u);
  }
  for (; c < q.cg; ++c) taps(load(c), c);
}

// Blocks an SM the registers must allow: three (80 registers) for 4 filters a thread, two (128) for 8, and for
// 16 with ReLU; one for 16 with the run-time activation (at 128 registers it spilled inside the channel loop).
// With the input prologue (PRO), four filters at 80 registers and sixteen with ReLU at 128 spilled inside the
// channel loop (ptxas): two blocks (and 8 channels ahead) and one.
template <int FT, Act ACT, bool PRO>
constexpr int kMinBlocks = FT == 4 ? (PRO ? 2 : 3) : (FT == 16 && (ACT == Act::Param || PRO)) ? 1 : 2;

template <int FT, Act ACT, bool PRO>
__global__ void __launch_bounds__(256, kMinBlocks<FT, ACT, PRO>)
    conv2d_pw_kernel(const float* __restrict__ x, float* __restrict__ y, const float* __restrict__ w,
                     const ConvGeometry g, const Epilogue e, const InputPrologue in, const Params q) {
  extern __shared__ float4 ws4[];  // [cg][fb / 4]: the block's filters, channel-major; then (pre) [cg] (scale, shift)
  // Channels loaded ahead: fewer filters a thread, more loads in flight (with the prologue four filters take 8:
  // 16 spilled).
  constexpr int U = PRO && FT == 4 ? 8 : 64 / FT;
  const int group = blockIdx.z;
  const int fb4 = 1 << q.fb4_shift;
  const int f0 = blockIdx.x * (fb4 * 4);  // the block's first filter within its group
  const int threads = blockDim.x * blockDim.y;
  const int tid = threadIdx.y * blockDim.x + threadIdx.x;
  {
    // The weights never change: staged before the wait, under the previous grid's tail.
    const int fgp4 = q.fgp / 4;
    const float4* src = reinterpret_cast<const float4*>(w) + static_cast<int64_t>(group) * q.cg * fgp4 + f0 / 4;
    for (int i = tid; i < (q.cg << q.fb4_shift); i += threads) {
      const int c = i >> q.fb4_shift, j = i & (fb4 - 1);
      ws4[i] = f0 + 4 * j < q.fgp ? __ldg(src + c * fgp4 + j) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
  }
  float2* affine = reinterpret_cast<float2*>(ws4 + (q.cg << q.fb4_shift));
  if constexpr (PRO) {
    const int c0 = group * q.cg;
    for (int c = tid; c < q.cg; c += threads) {
      affine[c] = make_float2(__ldg(in.scale + c0 + c), __ldg(in.shift + c0 + c));
    }
  }
  wait_for_prior_grid();
  __syncthreads();

  const int fl = threadIdx.y * FT;  // the thread's first filter within the block
  if (f0 + fl >= q.fg) return;      // (a row of padding filters only)
  const float4* wrow = ws4 + fl / 4;
  const bool whole_quads = q.hw % 4 == 0;  // a quad never leaves its plane
  const bool vec_in = whole_quads && aligned_16(x) && q.in_image % 4 == 0;
  const bool vec_out = whole_quads && aligned_16(y) && q.out_image % 4 == 0;
  const int64_t dense_out = static_cast<int64_t>(g.F) * q.hw;
  const int64_t group_in = static_cast<int64_t>(group) * q.cg * q.hw;
  for (int quad = blockIdx.y * blockDim.x + threadIdx.x; quad < q.nquads; quad += gridDim.y * blockDim.x) {
    // The thread's 4 pixels: consecutive where quads stay in their planes (one float4 each way); else a warp's
    // 128 pixels with the lanes on consecutive pixels (each scalar load and store one contiguous run a warp).
    // Each pixel's image and place in the plane; pixels past the last repeat it (computed, not stored).
    const int first = whole_quads ? quad * 4 : (quad & ~31) * 4 + (quad & 31);
    const int step = whole_quads ? 1 : 32;
    int64_t xoff[4];
    int img[4], pos[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int pix = min(first + k * step, q.npix - 1);
      const int n = q.plane.div(pix);
      img[k] = n;
      pos[k] = pix - n * q.hw;
      xoff[k] = n * q.in_image + group_in + pos[k];
    }
    float acc[FT][4] = {};
    if constexpr (PRO) {
      // The prologue's activation picked once a kernel, not on every value: ReLU (DenseNet's) compiled in.
      const bool relu = in.act == ParamAct::Relu;
      if (vec_in && relu) {
        accumulate<FT, U, true, Pre::Relu>(acc, x, xoff, wrow, affine, in, q);
      } else if (vec_in) {
        accumulate<FT, U, true, Pre::Param>(acc, x, xoff, wrow, affine, in, q);
      } else if (relu) {
        accumulate<FT, U, false, Pre::Relu>(acc, x, xoff, wrow, affine, in, q);
      } else {
        accumulate<FT, U, false, Pre::Param>(acc, x, xoff, wrow, affine, in, q);
      }
    } else if (vec_in) {
      accumulate<FT, U, true, Pre::None>(acc, x, xoff, wrow, affine, in, q);
    } else {
      accumulate<FT, U, false, Pre::None>(acc, x, xoff, wrow, affine, in, q);
    }
#pragma unroll
    for (int i = 0; i < FT; ++i) {
      const int f = f0 + fl + i;
      if (f >= q.fg) break;
      const int gf = group * q.fg + f;
      const int64_t plane = static_cast<int64_t>(gf) * q.hw;
      const float b = e.bias ? __ldg(e.bias + gf) : 0.0f;
      float v[4] = {acc[i][0] + b, acc[i][1] + b, acc[i][2] + b, acc[i][3] + b};
      if (e.residual) {
        if (whole_quads) {  // (a dense tensor: its quads are 16-byte aligned where its base is)
          const float* r = e.residual + int64_t(img[0]) * dense_out + plane + pos[0];
          const float4 rv = aligned_16(e.residual) ? __ldg(reinterpret_cast<const float4*>(r))
                                                   : make_float4(__ldg(r), __ldg(r + 1), __ldg(r + 2), __ldg(r + 3));
          v[0] += rv.x;
          v[1] += rv.y;
          v[2] += rv.z;
          v[3] += rv.w;
        } else {
#pragma unroll
          for (int k = 0; k < 4; ++k) v[k] += __ldg(e.residual + int64_t(img[k]) * dense_out + plane + pos[k]);
        }
      }
#pragma unroll
      for (int k = 0; k < 4; ++k) v[k] = activate<ACT>(v[k], e);
      if (vec_out) {
        float* out = y + int64_t(img[0]) * q.out_image + plane + pos[0];
        *reinterpret_cast<float4*>(out) = make_float4(v[0], v[1], v[2], v[3]);
      } else {
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          if (first + k * step < q.npix) y[int64_t(img[k]) * q.out_image + plane + pos[k]] = v[k];
        }
      }
    }
  }
}

// One launch of FT filters a thread on FY thread rows.
template <int FT, Act ACT, bool PRO>
void launch(const float* x, float* y, const float* w, const ConvGeometry& g, const Epilogue& e, int fy,
            InputPrologue in, cudaStream_t stream) {
  Params q;
  q.cg = g.C / g.groups;
  q.fg = g.F / g.groups;
  q.fgp = padded_filters(q.fg);
  q.hw = g.OH * g.OW;
  q.plane = FastDiv(q.hw);
  q.npix = g.N * q.hw;
  // Threads: a pixel quad each; where quads cross planes, whole warps of 128 pixels (pixels 32 apart a thread).
  q.nquads = q.hw % 4 == 0 ? q.npix / 4 : (q.npix + 127) / 128 * 32;
  const int fb = FT * fy;
  q.fb4_shift = 0;
  while ((4 << q.fb4_shift) < fb) ++q.fb4_shift;
  q.in_image = in.image_stride(int64_t(g.C) * g.H * g.W);
  q.out_image = e.out_image_stride(int64_t(g.F) * q.hw);
  const int row_blocks = (q.nquads + kQuads - 1) / kQuads;
  const dim3 grid(static_cast<unsigned>((q.fg + fb - 1) / fb), static_cast<unsigned>(std::min(row_blocks, 65535)),
                  static_cast<unsigned>(g.groups));
  const size_t smem = smem_bytes(q.cg, fb, PRO);
  launch_overlapped(conv2d_pw_kernel<FT, ACT, PRO>, grid, dim3(kQuads, fy), smem, stream, 1, x, y, w, g, e, in, q);
}

// Each with ReLU compiled in and with the activation chosen at run time; each also reading through an input affine
// (`pre`: its own instantiation, so that the others keep their registers).
struct Entry {
  int ft;
  Act act;
  bool pre;
  void (*launch)(const float*, float*, const float*, const ConvGeometry&, const Epilogue&, int, InputPrologue,
                 cudaStream_t);
};

#define PW_ENTRY(FT, ACT, PRE) \
  Entry { FT, ACT, PRE, &launch<FT, ACT, PRE> }
#define PW_ENTRIES(PRE)                                                                         \
  PW_ENTRY(4, Act::Relu, PRE), PW_ENTRY(4, Act::Param, PRE), PW_ENTRY(8, Act::Relu, PRE),         \
      PW_ENTRY(8, Act::Param, PRE), PW_ENTRY(16, Act::Relu, PRE), PW_ENTRY(16, Act::Param, PRE)

const Entry kEntries[] = {PW_ENTRIES(false), PW_ENTRIES(true)};

#undef PW_ENTRIES

#undef PW_ENTRY

const int kThreadRows[] = {1, 2, 4};

// [groups][C / groups][fg rounded up to kFilterPad]: a group's filters of one channel contiguous, zeros past fg.
PackedWeights pack(const ConvLayer& layer, const float* filters, const float*) {
  const ConvGeometry& g = layer.g;
  const int cg = g.C / g.groups, fg = g.F / g.groups;
  const int fgp = padded_filters(fg);
  PackedWeights pw;
  pw.layout = "pw_cf16";
  pw.device.assign(size_t(g.groups) * cg * fgp, 0.0f);
  for (int gr = 0; gr < g.groups; ++gr) {
    for (int f = 0; f < fg; ++f) {
      for (int c = 0; c < cg; ++c) {
        pw.device[(size_t(gr) * cg + c) * fgp + f] = filters[(size_t(gr) * fg + f) * cg + c];
      }
    }
  }
  return pw;
}

}  // namespace pw

namespace {

std::string variant_name(const pw::Entry& en, const std::string& fb) {
  return "pw_f" + fb + "_rb" + std::to_string(en.ft) + "x4_" + (en.act == Act::Relu ? "relu" : "act") +
         (en.pre ? "_pre" : "");
}

class PointwiseFamily final : public ConvFamily {
 public:
  PointwiseFamily()
      : ConvFamily("pw",
                   "1x1 convolutions of few channels at stride 1 on the CUDA cores: each thread 4 consecutive pixels "
                   "(one 16-byte load a channel) x 4, 8 or 16 filters, the block's filters in shared memory",
                   {}, pw::pack) {}

  bool writes_image_stride() const override { return true; }

  std::string reject(const ConvLayer& layer, const DeviceCaps&) const override {
    const ConvGeometry& g = layer.g;
    if (g.KH != 1 || g.KW != 1) return "needs a 1x1 filter";
    if (g.stride_h != 1 || g.stride_w != 1) return "stride other than 1";
    if (g.pad_top || g.pad_left || g.pad_bottom || g.pad_right) return "padding";
    if (layer.pooled()) return "fused pooling";
    if (g.C / g.groups > pw::kMaxChannels) return "more than 256 input channels a group";
    if (int64_t(g.N) * g.OH * g.OW >= (int64_t(1) << 31) - 4) return "too large for 32-bit indices";
    if (g.groups > 65535) return "too many groups for the grid";
    return "";
  }

  std::vector<ConvVariant> variants(const ConvLayer& layer, const DeviceCaps&, const LayerWeights& w) const override {
    const ConvGeometry& g = layer.g;
    const bool relu = layer.e.param_act == ParamAct::Relu;
    const int cg = g.C / g.groups, fg = g.F / g.groups;
    std::vector<std::pair<ConvVariant, double>> scored;  // score: estimated relative time, lower is better
    for (const pw::Entry& en : pw::kEntries) {
      if (en.act == Act::Relu && !relu) continue;
      if (en.pre != (layer.in.scale != nullptr)) continue;
      const int rows_needed = (fg + en.ft - 1) / en.ft;
      for (int fy : pw::kThreadRows) {
        const int fb = en.ft * fy;
        if (fb > pw::kMaxBlockFilters || pw::smem_bytes(cg, fb, en.pre) > size_t(pw::kSmemBytes)) continue;
        if (fy > 1 && fy / 2 >= rows_needed) continue;  // a whole thread row of padding filters
        // Input reads: once per block of filters; the filters computed, padding included.
        const int blocks = (fg + fb - 1) / fb;
        const double score = blocks * (1.0 + 0.02 * fy) + double(blocks * fb - fg) / fg;
        ConvVariant v{variant_name(en, std::to_string(fb)), "", bind_launch(en.launch, layer, w.packed, fy, layer.in)};
        scored.push_back({std::move(v), score});
      }
    }
    return rank_by_score(std::move(scored));
  }

  std::vector<std::string> variant_names() const override {
    return entry_names(pw::kEntries, [](const pw::Entry& en) { return variant_name(en, "*"); });
  }

  // A per-channel affine and activation: each loaded value's channel is the loop's; an input image stride: each
  // pixel's image offset is one product.
  bool reads_prologue(const InputPrologue& prologue) const override { return prologue.shuffle == 1; }
};

}  // namespace

const ConvFamily& conv2d_pw_family() {
  static const PointwiseFamily family;
  return family;
}

}  // namespace cnnrt::kernels
