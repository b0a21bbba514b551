// Plain direct convolution: the baseline every optimized convolution kernel is checked against.
#pragma once

#include "kernels/common.cuh"
#include "kernels/sliding_window.cuh"

namespace cnnrt::kernels {

// x: [N, C, H, W]; weights: [F, C / groups, KH, KW]; bias: [F] or null; y: [N, F, OH, OW]. Output channel f
// of group g = f / (F / groups) sees input channels [g * C / groups, (g + 1) * C / groups) (depthwise:
// groups = C). A 1-D convolution has H = OH = KH = 1.
// y = conv(x, weights) + bias. One thread per output element, taps limited to the input (padding reads
// nothing), products summed in double: on an H100 double-precision FMA runs at half the float rate, and the
// oracle for the fast kernels should carry no rounding of its own worth mentioning. Simple, not fast.
void launch_conv2d_direct(const float* x, const float* weights, const float* bias, float* y, const ConvGeometry& g,
                          cudaStream_t stream);

}  // namespace cnnrt::kernels
