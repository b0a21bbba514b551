// Direct convolution, one thread per output element: kept deliberately plain (64-bit index arithmetic, no
// shared memory, no tiling) so that it is obviously correct.
#include "kernels/conv2d_direct.cuh"
#include "kernels/nd_index.cuh"
#include "kernels/launch.cuh"

namespace cnnrt::kernels {
namespace {

constexpr int kThreads = 128;

__global__ void conv2d_direct_kernel(const float* __restrict__ x, const float* __restrict__ weights,
                                     const float* __restrict__ bias, float* __restrict__ y, ConvGeometry g,
                                     int64_t count) {
  wait_for_prior_grid();  // launched with PDL (launch.cuh): nothing global before this
  const SlidingAxis rows = g.rows();
  const SlidingAxis cols = g.cols();
  const int64_t in_per_group = g.C / g.groups;
  const int64_t out_per_group = g.F / g.groups;
  const int64_t in_plane = rows.input * cols.input;
  const int64_t kernel_plane = rows.kernel * cols.kernel;
  for (int64_t i = global_thread_index<int64_t>(); i < count; i += global_thread_count<int64_t>()) {
    // i = ((n * F + f) * OH + oy) * OW + ox
    const int64_t ox = i % cols.output;
    const int64_t oy = (i / cols.output) % rows.output;
    const int64_t f = (i / (cols.output * rows.output)) % g.F;
    const int64_t n = i / (cols.output * rows.output * g.F);
    const int64_t first_channel = (f / out_per_group) * in_per_group;
    const TapRange ky = taps_inside(rows, oy);
    const TapRange kx = taps_inside(cols, ox);
    double sum = bias != nullptr ? bias[f] : 0.0;
    for (int64_t c = 0; c < in_per_group; ++c) {
      const float* x_plane = x + (n * g.C + first_channel + c) * in_plane;
      const float* w_plane = weights + (f * in_per_group + c) * kernel_plane;
      for (int64_t ty = ky.first; ty < ky.end; ++ty) {
        const float* x_row = x_plane + tap_position(rows, oy, ty) * cols.input;
        const float* w_row = w_plane + ty * cols.kernel;
        for (int64_t tx = kx.first; tx < kx.end; ++tx) {
          sum += static_cast<double>(x_row[tap_position(cols, ox, tx)]) * w_row[tx];
        }
      }
    }
    y[i] = static_cast<float>(sum);
  }
}

}  // namespace

void launch_conv2d_direct(const float* x, const float* weights, const float* bias, float* y, const ConvGeometry& g,
                          cudaStream_t stream) {
  const int64_t count = int64_t(g.N) * g.F * g.OH * g.OW;
  if (count <= 0) return;
  launch_overlapped(conv2d_direct_kernel, dim3(blocks_for(count, kThreads)), dim3(kThreads), 0, stream, 1, x,
                    weights, bias, y, g, count);
}

}  // namespace cnnrt::kernels
