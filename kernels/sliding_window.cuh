// The taps of a window that land inside a range of input positions, along one axis (kernels/layer.hpp's
// SlidingAxis, which is also the IR's ir::WindowAxis): shared by the pooling and convolution kernels and
// their tests. The functions are __host__ __device__.
#pragma once

#include "kernels/common.cuh"
#include "kernels/layer.hpp"  // SlidingAxis

namespace cnnrt::kernels {

// Taps [first, end) of one window along one axis.
struct TapRange {
  int64_t first = 0;
  int64_t end = 0;
  __host__ __device__ int64_t count() const { return end - first; }
};

// Input position of tap t of the window at output position o (negative or >= input inside padding).
__host__ __device__ inline int64_t tap_position(const SlidingAxis& axis, int64_t o, int64_t t) {
  return o * axis.stride - axis.pad_begin + t * axis.dilation;
}

// ceil(numerator / denominator) for any sign of numerator and denominator > 0.
__host__ __device__ inline int64_t ceil_div_signed(int64_t numerator, int64_t denominator) {
  return numerator >= 0 ? (numerator + denominator - 1) / denominator : -((-numerator) / denominator);
}

// The taps of the window at output position o whose input position lies in [low, high), in O(1):
// tap t qualifies when low <= start + t * dilation < high, start being the window's first position.
__host__ __device__ inline TapRange taps_within(const SlidingAxis& axis, int64_t o, int64_t low, int64_t high) {
  const int64_t start = o * axis.stride - axis.pad_begin;
  TapRange range;
  range.first = ceil_div_signed(low - start, axis.dilation);
  range.end = ceil_div_signed(high - start, axis.dilation);
  if (range.first < 0) range.first = 0;
  if (range.end > axis.kernel) range.end = axis.kernel;
  if (range.end < range.first) range.end = range.first;
  return range;
}

// The taps that read real input (not padding).
__host__ __device__ inline TapRange taps_inside(const SlidingAxis& axis, int64_t o) {
  return taps_within(axis, o, 0, axis.input);
}

// The taps inside the padded extent [-pad_begin, input + pad_end): what AveragePool's count_include_pad
// divides by. A ceil_mode window may reach past the end padding; those taps are not counted (ONNX).
__host__ __device__ inline TapRange taps_inside_padding(const SlidingAxis& axis, int64_t o) {
  return taps_within(axis, o, -axis.pad_begin, axis.input + axis.pad_end);
}

}  // namespace cnnrt::kernels
