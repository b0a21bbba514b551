// Plain direct convolution: the baseline every optimized convolution kernel is checked against.
#pragma once

#include "kernels/common.cuh"
#include "kernels/sliding_window.cuh"

namespace cnnrt::kernels {

// x: contiguous [batch, in_channels, rows.input, cols.input]; weights: [out_channels, in_channels / groups,
// rows.kernel, cols.kernel]; bias: [out_channels] or null; y: [batch, out_channels, rows.output, cols.output].
// Output channel f of group g = f / (out_channels / groups) sees input channels
// [g * in_channels / groups, (g + 1) * in_channels / groups) (depthwise: groups = in_channels).
// 1-D convolution: `rows` left at its defaults (extent 1, kernel 1, no padding).
struct Conv2dDesc {
  int64_t batch = 0;
  int64_t in_channels = 0;
  int64_t out_channels = 0;
  int64_t groups = 1;  // divides in_channels and out_channels
  SlidingAxis rows;    // H
  SlidingAxis cols;    // W
};

// y = conv(x, weights) + bias. One thread per output element, taps limited to the input (padding reads
// nothing), products summed in double: on an H100 double-precision FMA runs at half the float rate, and the
// oracle for the fast kernels should carry no rounding of its own worth mentioning. Simple, not fast.
void launch_conv2d_direct(const float* x, const float* weights, const float* bias, float* y, const Conv2dDesc& desc,
                          cudaStream_t stream);

}  // namespace cnnrt::kernels
