// Per-channel affine transform over [batch, channels, inner], then an activation: one flat grid-stride loop;
// the channel of element i is (i / inner) % channels, by launch-constant divisors (nd_index.cuh). A strided
// input's image n lies x_gap floats a image further on: element i is read at i + (i / (channels * inner)) * x_gap.
#include "kernels/batchnorm.cuh"
#include "kernels/conv_device.cuh"
#include "kernels/nd_index.cuh"
#include "kernels/launch.cuh"

namespace cnnrt::kernels {
namespace {

constexpr int kThreads = 256;

// Packs of kWidth elements; with kWidth 4, inner % 4 == 0 so that a pack never straddles two channels.
template <class Index, int kWidth>
__global__ void channel_affine_kernel(const float* x, const float* __restrict__ scale, const float* __restrict__ shift,
                                      float* y, FixedDivisor<Index> inner, FixedDivisor<Index> channels, Index packs,
                                      ParamAct act, float alpha, float beta, Index x_gap) {
  wait_for_prior_grid();  // launched overlapped (PDL): nothing global is touched before this
  for (Index p = global_thread_index<Index>(); p < packs; p += global_thread_count<Index>()) {
    const Index first = p * kWidth;  // element index of the pack's first element
    const Index plane = inner.quotient(first);
    const Index image = channels.quotient(plane);
    const Index channel = plane - image * channels.divisor;
    const float multiplier = scale[channel];
    const float offset = shift[channel];
    Pack<kWidth> pack = load_pack<kWidth>(x, first + image * x_gap, false);
#pragma unroll
    for (int e = 0; e < kWidth; ++e) pack.v[e] = param_activate(pack.v[e] * multiplier + offset, act, alpha, beta);
    store_pack<kWidth>(y, first, pack);
  }
}

template <class Index, int kWidth>
void launch_channel_affine_with(const float* x, const float* scale, const float* shift, float* y, int64_t count,
                                int64_t channels, int64_t inner, cudaStream_t stream, ParamAct act, float alpha,
                                float beta, int64_t x_gap) {
  const int64_t packs = count / kWidth;
  launch_overlapped(channel_affine_kernel<Index, kWidth>, dim3(blocks_for(packs, kThreads)), dim3(kThreads), 0,
                    stream, 1, x, scale, shift, y, FixedDivisor<Index>::make(static_cast<Index>(inner)),
                    FixedDivisor<Index>::make(static_cast<Index>(channels)), static_cast<Index>(packs), act, alpha,
                    beta, static_cast<Index>(x_gap));
}

}  // namespace

void launch_channel_affine(const float* x, const float* scale, const float* shift, float* y, int64_t batch,
                           int64_t channels, int64_t inner, cudaStream_t stream, ParamAct act, float alpha,
                           float beta, int64_t x_image) {
  const int64_t count = batch * channels * inner;
  if (count == 0) return;
  const int64_t x_gap = x_image > 0 ? x_image - channels * inner : 0;  // floats between a strided input's images
  const int64_t x_extent = count + (batch - 1) * x_gap;
  if (x_extent >= (int64_t{1} << 31)) {
    launch_channel_affine_with<uint64_t, 1>(x, scale, shift, y, count, channels, inner, stream, act, alpha, beta, x_gap);
  } else if (inner % 4 == 0 && x_gap % 4 == 0 && aligned_16(x) && aligned_16(y)) {
    launch_channel_affine_with<uint32_t, 4>(x, scale, shift, y, count, channels, inner, stream, act, alpha, beta, x_gap);
  } else {
    launch_channel_affine_with<uint32_t, 1>(x, scale, shift, y, count, channels, inner, stream, act, alpha, beta, x_gap);
  }
}

}  // namespace cnnrt::kernels
