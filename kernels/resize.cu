#include "kernels/resize.cuh"

namespace cnnrt::kernels {

namespace {

constexpr int kThreads = 256;

// The intrinsics keep every step rounded on its own (no fused multiply-add), matching the CPU reference.
__device__ float source_coordinate(int64_t index, ResizeTransform transform, const ResizeAxis& axis) {
  const float x = static_cast<float>(index);
  switch (transform) {
    case ResizeTransform::HalfPixel: return __fsub_rn(__fdiv_rn(__fadd_rn(x, 0.5f), axis.scale), 0.5f);
    case ResizeTransform::PytorchHalfPixel:
      return axis.resized_length > 1.0f ? __fsub_rn(__fdiv_rn(__fadd_rn(x, 0.5f), axis.scale), 0.5f) : 0.0f;
    case ResizeTransform::AlignCorners:
      return axis.resized_length == 1.0f ? 0.0f
                                         : __fdiv_rn(__fmul_rn(x, static_cast<float>(axis.input - 1)),
                                                     __fsub_rn(axis.resized_length, 1.0f));
    case ResizeTransform::Asymmetric: return __fdiv_rn(x, axis.scale);
    case ResizeTransform::TfHalfPixelForNearest: return __fdiv_rn(__fadd_rn(x, 0.5f), axis.scale);
  }
  return 0.0f;
}

__device__ int64_t clamp_index(int64_t i, int64_t extent) { return i < 0 ? 0 : i >= extent ? extent - 1 : i; }

__device__ int64_t nearest_index(float coordinate, NearestRounding rounding, int64_t extent) {
  const float below = floorf(coordinate);
  const float fraction = __fsub_rn(coordinate, below);
  int64_t index = static_cast<int64_t>(below);
  switch (rounding) {
    case NearestRounding::RoundPreferFloor: index += fraction > 0.5f ? 1 : 0; break;
    case NearestRounding::RoundPreferCeil: index += fraction >= 0.5f ? 1 : 0; break;
    case NearestRounding::Floor: break;
    case NearestRounding::Ceil: index += fraction > 0.0f ? 1 : 0; break;
  }
  return clamp_index(index, extent);
}

// The two input indices around a linear coordinate and the weight of the second.
struct LinearTaps {
  int64_t first, second;
  float weight;
};

__device__ LinearTaps linear_taps(float coordinate, int64_t extent) {
  const float clamped = fminf(fmaxf(coordinate, 0.0f), static_cast<float>(extent - 1));
  const int64_t below = static_cast<int64_t>(floorf(clamped));
  return {below, clamp_index(below + 1, extent), __fsub_rn(clamped, static_cast<float>(below))};
}

template <ResizeMode kMode>
__global__ void resize_kernel(const float* __restrict__ x, float* __restrict__ y, ResizeDesc desc, int64_t count) {
  const int64_t out_w = desc.cols.output, out_h = desc.rows.output;
  const int64_t in_w = desc.cols.input, in_h = desc.rows.input;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t ox = i % out_w;
    const int64_t row = i / out_w;  // p * out_h + oy
    const int64_t oy = row % out_h;
    const int64_t plane = row / out_h;
    const float* in = x + plane * in_h * in_w;
    const float cy = source_coordinate(oy, desc.transform, desc.rows);
    const float cx = source_coordinate(ox, desc.transform, desc.cols);
    if constexpr (kMode == ResizeMode::Nearest) {
      y[i] = in[nearest_index(cy, desc.rounding, in_h) * in_w + nearest_index(cx, desc.rounding, in_w)];
    } else {
      const LinearTaps ty = linear_taps(cy, in_h), tx = linear_taps(cx, in_w);
      const float* row0 = in + ty.first * in_w;
      const float* row1 = in + ty.second * in_w;
      const float top = row0[tx.first] * (1.0f - tx.weight) + row0[tx.second] * tx.weight;
      const float bottom = row1[tx.first] * (1.0f - tx.weight) + row1[tx.second] * tx.weight;
      y[i] = top * (1.0f - ty.weight) + bottom * ty.weight;
    }
  }
}

}  // namespace

void launch_resize(const float* x, float* y, const ResizeDesc& desc, cudaStream_t stream) {
  const int64_t count = desc.planes * desc.rows.output * desc.cols.output;
  if (count == 0) return;
  const unsigned blocks = blocks_for(count, kThreads);
  if (desc.mode == ResizeMode::Nearest) {
    resize_kernel<ResizeMode::Nearest><<<blocks, kThreads, 0, stream>>>(x, y, desc, count);
  } else {
    resize_kernel<ResizeMode::Linear><<<blocks, kThreads, 0, stream>>>(x, y, desc, count);
  }
}

}  // namespace cnnrt::kernels
