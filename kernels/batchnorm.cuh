// Per-channel affine transform: inference BatchNormalization after the planner folds its constants, with the
// activation after it fused (FusedBatchNormalization).
#pragma once

#include "kernels/common.cuh"
#include "kernels/layer.hpp"

namespace cnnrt::kernels {

// y[n, c, i] = x[n, c, i] * scale[c] + shift[c] for x, y contiguous [batch, channels, inner] (inner: the
// product of the spatial extents; 1 for a 2-D input). The planner computes, in double,
// scale = gamma / sqrt(var + epsilon) and shift = beta - mean * scale. x and y may be the same buffer.
// float4 accesses when inner is a multiple of 4 and x, y are 16-byte aligned. Then `act` (its parameters in
// alpha, beta as in the convolution epilogue; ParamAct::None: none). `x_image` > 0: image n of x starts at
// x + n * x_image (x is a strided block of a channel Concat's output); y stays contiguous.
void launch_channel_affine(const float* x, const float* scale, const float* shift, float* y, int64_t batch,
                           int64_t channels, int64_t inner, cudaStream_t stream, ParamAct act = ParamAct::None,
                           float alpha = 0.0f, float beta = 0.0f, int64_t x_image = 0);

}  // namespace cnnrt::kernels
