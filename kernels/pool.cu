// Window pooling: one thread per output element; window bounds come from the shared tap arithmetic
// (sliding_window.cuh), so no tap needs a bounds check.
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

template <class Index>
void launch_pool2d_with(PoolOp op, const float* x, float* y, const Pool2dDesc& desc, int64_t count,
                        cudaStream_t stream) {
  const int64_t out_gap =
      desc.out_image_floats > 0 ? desc.out_image_floats - desc.channels * desc.rows.output * desc.cols.output : 0;
  launch_overlapped(pool2d_kernel<Index>, dim3(blocks_for(count, kThreads)), dim3(kThreads), 0, stream, 1, op, x, y,
                    desc, FixedDivisor<Index>::make(static_cast<Index>(desc.cols.output)),
                    FixedDivisor<Index>::make(static_cast<Index>(desc.rows.output)), static_cast<Index>(count), out_gap);
}

}  // namespace

void launch_pool2d(PoolOp op, const float* x, float* y, const Pool2dDesc& desc, cudaStream_t stream) {
  const int64_t count = desc.planes * desc.rows.output * desc.cols.output;
  if (count <= 0) return;
  // Output indices in 32 bits; input offsets are 64-bit either way.
  if (count < (int64_t{1} << 31)) {
    launch_pool2d_with<uint32_t>(op, x, y, desc, count, stream);
  } else {
    launch_pool2d_with<uint64_t>(op, x, y, desc, count, stream);
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
