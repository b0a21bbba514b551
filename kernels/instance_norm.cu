#include "kernels/instance_norm.cuh"
#include "kernels/launch.cuh"
#include "kernels/nd_index.cuh"
#include "kernels/row_reduce.cuh"

namespace cnnrt::kernels {
namespace {

// Sum of `transform(value)` over the group's share of a plane of `length` floats (kWidth of them a step).
template <int kWidth, class Transform>
__device__ float plane_partial(const float* plane, int64_t length, const RowGroup& group, Transform transform) {
  float sum = 0.0f;
  for (int64_t p = group.lane; p < length / kWidth; p += group.size) {
    const Pack<kWidth> pack = load_pack<kWidth>(plane, p * kWidth, false);
#pragma unroll
    for (int e = 0; e < kWidth; ++e) sum += transform(pack.v[e]);
  }
  return sum;
}

template <int kWidth>
__device__ void normalize_plane(const float* __restrict__ in, float* __restrict__ out, int64_t length,
                                const RowGroup& group, float* scratch, float scale, float bias, float epsilon) {
  const float count = static_cast<float>(length);
  // The mean of x - x[0], plus x[0]: sums of values near the mean's offset from the first element round far
  // less than sums of the raw values when the plane's mean is large against its spread (shifted data).
  const float shift = __ldg(in);
  const float mean = shift + group_allreduce(group, plane_partial<kWidth>(in, length, group,
                                                                          [shift](float v) { return v - shift; }),
                                             SumCombine{}, scratch) / count;
  const float squares = group_allreduce(
      group, plane_partial<kWidth>(in, length, group, [mean](float v) { return (v - mean) * (v - mean); }),
      SumCombine{}, scratch);
  const float gain = scale * rsqrtf(squares / count + epsilon);
  for (int64_t p = group.lane; p < length / kWidth; p += group.size) {
    Pack<kWidth> pack = load_pack<kWidth>(in, p * kWidth, false);
#pragma unroll
    for (int e = 0; e < kWidth; ++e) pack.v[e] = (pack.v[e] - mean) * gain + bias;
    store_pack<kWidth>(out, p * kWidth, pack);
  }
}

__global__ void instance_norm_kernel(const float* __restrict__ x, const float* __restrict__ scale,
                                     const float* __restrict__ bias, float* __restrict__ y, int64_t planes,
                                     int64_t channels, int64_t length, float epsilon, bool whole_block,
                                     bool use_float4) {
  wait_for_prior_grid();  // launched with PDL (launch.cuh): nothing global before this
  __shared__ float scratch[kWarpSize];
  const RowGroup group = row_group(whole_block);
  for (int64_t p = group.first_row; p < planes; p += group.row_step) {
    const int64_t c = p % channels;
    const float* in = x + p * length;
    float* out = y + p * length;
    if (use_float4) {
      normalize_plane<4>(in, out, length, group, scratch, __ldg(scale + c), __ldg(bias + c), epsilon);
    } else {
      normalize_plane<1>(in, out, length, group, scratch, __ldg(scale + c), __ldg(bias + c), epsilon);
    }
  }
}

}  // namespace

void launch_instance_norm(const float* x, const float* scale, const float* bias, float* y, int64_t planes,
                          int64_t channels, int64_t plane, float epsilon, cudaStream_t stream) {
  if (planes * plane == 0) return;
  const bool whole_block = rows_need_whole_blocks(planes, plane);
  const bool use_float4 = plane % 4 == 0 && aligned_16(x) && aligned_16(y);
  launch_overlapped(instance_norm_kernel, dim3(row_blocks(planes, whole_block)), dim3(kRowThreads), 0, stream, 1, x,
                    scale, bias, y, planes, channels, plane, epsilon, whole_block, use_float4);
}

}  // namespace cnnrt::kernels
