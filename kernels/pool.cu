// Window pooling: one thread per output element. Undilated windows (the usual ones) take a 32-bit path whose
// window bounds need no division; dilated ones the shared tap arithmetic (sliding_window.cuh). Either way no tap
// needs a bounds check.
#include "kernels/nd_index.cuh"
#include "kernels/pool.cuh"
#include "kernels/reduce.cuh"
#include "kernels/launch.cuh"

namespace cnnrt::kernels {
namespace {

constexpr int kThreads = 256;

template <class Index>
__global__ void pool2d_kernel(PoolOp op, const float* __restrict__ x, float* __restrict__ y, Pool2dDesc desc,
                              FixedDivisor<Index> out_width, FixedDivisor<Index> out_height, Index count,
                              int64_t out_gap) {
  wait_for_prior_grid();  // launched with PDL (launch.cuh): nothing global before this
  const SlidingAxis& rows = desc.rows;
  const SlidingAxis& cols = desc.cols;
  for (Index i = global_thread_index<Index>(); i < count; i += global_thread_count<Index>()) {
    const Index row_index = out_width.quotient(i);  // plane * out_h + oy
    const int64_t ox = static_cast<int64_t>(i - row_index * out_width.divisor);
    const Index plane = out_height.quotient(row_index);
    const int64_t oy = static_cast<int64_t>(row_index - plane * out_height.divisor);
    const float* x_plane = x + static_cast<int64_t>(plane) * rows.input * cols.input;
    const TapRange ky = taps_inside(rows, oy);
    const TapRange kx = taps_inside(cols, ox);
    float result;
    if (op == PoolOp::Max) {
      result = -INFINITY;
      for (int64_t ty = ky.first; ty < ky.end; ++ty) {
        const float* x_row = x_plane + tap_position(rows, oy, ty) * cols.input;
        for (int64_t tx = kx.first; tx < kx.end; ++tx) {
          const float value = x_row[tap_position(cols, ox, tx)];
          result = result < value ? value : result;
        }
      }
    } else {
      float sum = 0.0f;
      for (int64_t ty = ky.first; ty < ky.end; ++ty) {
        const float* x_row = x_plane + tap_position(rows, oy, ty) * cols.input;
        for (int64_t tx = kx.first; tx < kx.end; ++tx) sum += x_row[tap_position(cols, ox, tx)];
      }
      const int64_t divisor = desc.count_include_pad
                                  ? taps_inside_padding(rows, oy).count() * taps_inside_padding(cols, ox).count()
                                  : ky.count() * kx.count();
      result = divisor > 0 ? sum / static_cast<float>(divisor) : 0.0f;
    }
    // A strided output: image n's planes lie out_gap floats a image further on.
    y[out_gap ? static_cast<int64_t>(i) + static_cast<int64_t>(plane) / desc.channels * out_gap : static_cast<int64_t>(i)] = result;
  }
}

// One axis of an undilated window in 32 bits: the window's first input position and its taps inside the
// input and inside the padded extent, without a division.
struct FastAxis {
  int input, stride, pad_begin, pad_end, kernel;
};

struct FastWindow {
  int start, first, end, padded;  // taps [first, end) read input; `padded` taps lie inside the padded extent
};

template <int K>
__device__ __forceinline__ FastWindow fast_window(const FastAxis& a, int o) {
  const int kernel = K > 0 ? K : a.kernel;
  FastWindow w;
  w.start = o * a.stride - a.pad_begin;
  w.first = max(0, -w.start);
  w.end = min(kernel, a.input - w.start);
  // Taps inside [-pad_begin, input + pad_end): a ceil_mode window may overhang the end padding.
  w.padded = min(kernel, a.input + a.pad_end - w.start) - max(0, -a.pad_begin - w.start);
  return w;
}

// Folds the taps of a window that lie inside the input, row by row, unrolled when the size is compiled in.
template <int KH, int KW, class Fold>
__device__ __forceinline__ float fold_window(const float* __restrict__ window, int pitch, int kh, int kw,
                                             const FastWindow& wy, const FastWindow& wx, float init, Fold fold) {
  float acc = init;
#pragma unroll
  for (int ty = 0; ty < (KH > 0 ? KH : kh); ++ty) {
    if (ty < wy.first || ty >= wy.end) continue;
#pragma unroll
    for (int tx = 0; tx < (KW > 0 ? KW : kw); ++tx) {
      if (tx < wx.first || tx >= wx.end) continue;
      acc = fold(acc, __ldg(window + ty * pitch + tx));
    }
  }
  return acc;
}

// The undilated windows (every MaxPool and AveragePool of the zoo): 32-bit tap arithmetic with no division, the
// window's taps unrolled when its size is compiled in (KH, KW > 0), one thread per output element.
template <int KH, int KW>
__global__ void pool2d_fast_kernel(PoolOp op, const float* __restrict__ x, float* __restrict__ y, FastAxis rows,
                                   FastAxis cols, bool count_include_pad, int channels, int64_t out_gap,
                                   FixedDivisor<uint32_t> out_width, FixedDivisor<uint32_t> out_height,
                                   uint32_t count) {
  wait_for_prior_grid();  // launched with PDL (launch.cuh): nothing global before this
  const int kh = KH > 0 ? KH : rows.kernel;
  const int kw = KW > 0 ? KW : cols.kernel;
  for (uint32_t i = global_thread_index<uint32_t>(); i < count; i += global_thread_count<uint32_t>()) {
    const uint32_t row_index = out_width.quotient(i);  // plane * out_h + oy
    const int ox = static_cast<int>(i - row_index * out_width.divisor);
    const uint32_t plane = out_height.quotient(row_index);
    const int oy = static_cast<int>(row_index - plane * out_height.divisor);
    const FastWindow wy = fast_window<KH>(rows, oy);
    const FastWindow wx = fast_window<KW>(cols, ox);
    const float* x_window =
        x + static_cast<int64_t>(plane) * rows.input * cols.input + static_cast<int64_t>(wy.start) * cols.input + wx.start;
    float result;
    if (op == PoolOp::Max) {
      result = fold_window<KH, KW>(x_window, cols.input, kh, kw, wy, wx, -INFINITY,
                                   [](float acc, float v) { return fmaxf(acc, v); });
    } else {
      const float sum = fold_window<KH, KW>(x_window, cols.input, kh, kw, wy, wx, 0.0f,
                                            [](float acc, float v) { return acc + v; });
      const int divisor = count_include_pad ? max(0, wy.padded) * max(0, wx.padded)
                                            : max(0, wy.end - wy.first) * max(0, wx.end - wx.first);
      result = divisor > 0 ? sum / static_cast<float>(divisor) : 0.0f;
    }
    y[out_gap ? static_cast<int64_t>(i) + static_cast<int64_t>(plane / channels) * out_gap : static_cast<int64_t>(i)] =
        result;
  }
}

// The 32-bit fast path applies: no dilation, and every extent and index fits in an int.
bool fast_pool_applies(const Pool2dDesc& desc, int64_t count) {
  const auto fits = [](const SlidingAxis& a) {
    const int64_t limit = int64_t{1} << 24;
    return a.dilation == 1 && a.input < limit && a.output < limit && a.kernel < limit && a.stride < limit &&
           a.pad_begin < limit && a.pad_end < limit;
  };
  return fits(desc.rows) && fits(desc.cols) && count < (int64_t{1} << 31) && desc.channels < (int64_t{1} << 31);
}

FastAxis fast_axis(const SlidingAxis& a) {
  return {static_cast<int>(a.input), static_cast<int>(a.stride), static_cast<int>(a.pad_begin),
          static_cast<int>(a.pad_end), static_cast<int>(a.kernel)};
}

void launch_pool2d_fast(PoolOp op, const float* x, float* y, const Pool2dDesc& desc, int64_t count, int64_t out_gap,
                        cudaStream_t stream) {
  const auto launch = [&](auto kernel) {
    launch_overlapped(kernel, dim3(blocks_for(count, kThreads)), dim3(kThreads), 0, stream, 1, op, x, y,
                      fast_axis(desc.rows), fast_axis(desc.cols), desc.count_include_pad,
                      static_cast<int>(desc.channels), out_gap,
                      FixedDivisor<uint32_t>::make(static_cast<uint32_t>(desc.cols.output)),
                      FixedDivisor<uint32_t>::make(static_cast<uint32_t>(desc.rows.output)),
                      static_cast<uint32_t>(count));
  };
  const int64_t kh = desc.rows.kernel, kw = desc.cols.kernel;
  if (kh == 3 && kw == 3) {
    launch(pool2d_fast_kernel<3, 3>);
  } else if (kh == 2 && kw == 2) {
    launch(pool2d_fast_kernel<2, 2>);
  } else {
    launch(pool2d_fast_kernel<0, 0>);
  }
}

template <class Index>
void launch_pool2d_with(PoolOp op, const float* x, float* y, const Pool2dDesc& desc, int64_t count, int64_t out_gap,
                        cudaStream_t stream) {
  launch_overlapped(pool2d_kernel<Index>, dim3(blocks_for(count, kThreads)), dim3(kThreads), 0, stream, 1, op, x, y,
                    desc, FixedDivisor<Index>::make(static_cast<Index>(desc.cols.output)),
                    FixedDivisor<Index>::make(static_cast<Index>(desc.rows.output)), static_cast<Index>(count), out_gap);
}

}  // namespace

void launch_pool2d(PoolOp op, const float* x, float* y, const Pool2dDesc& desc, cudaStream_t stream) {
  const int64_t count = desc.planes * desc.rows.output * desc.cols.output;
  if (count <= 0) return;
  // A strided output (a Concat's slice): the floats between one image's planes and the next image's.
  const int64_t out_gap =
      desc.out_image_floats > 0 ? desc.out_image_floats - desc.channels * desc.rows.output * desc.cols.output : 0;
  if (fast_pool_applies(desc, count)) {
    launch_pool2d_fast(op, x, y, desc, count, out_gap, stream);
    return;
  }
  // Output indices in 32 bits; input offsets are 64-bit either way.
  if (count < (int64_t{1} << 31)) {
    launch_pool2d_with<uint32_t>(op, x, y, desc, count, out_gap, stream);
  } else {
    launch_pool2d_with<uint64_t>(op, x, y, desc, count, out_gap, stream);
  }
}

void launch_global_pool(PoolOp op, const float* x, float* y, int64_t planes, int64_t plane_size, cudaStream_t stream) {
  ReduceDesc desc;
  desc.rank = 2;
  desc.dims[0] = planes;
  desc.dims[1] = plane_size;
  desc.axis_count = 1;
  desc.axes[0] = 1;
  launch_reduce(op == PoolOp::Max ? ReduceOp::Max : ReduceOp::Mean, x, y, desc, stream);
}

}  // namespace cnnrt::kernels
