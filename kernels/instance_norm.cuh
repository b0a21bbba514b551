// InstanceNormalization: every (n, c) plane normalized by its own mean and variance.
#pragma once

#include "kernels/common.cuh"

namespace cnnrt::kernels {

// x, y: contiguous [planes, plane] with planes = N * C (plane: the product of the spatial extents);
// scale, bias: [channels] (plane p is channel p % channels). y = scale[c] * (x - mean) / sqrt(var + epsilon)
// + bias[c], with the plane's mean and biased variance. A warp per plane when planes are short or many, a
// block per plane when they are long and few (row_reduce.cuh); three passes over the plane (the mean of the
// values less the plane's first one, the variance about the mean, the output), sums in float, float4 when the
// plane is a multiple of 4 and x, y are 16-byte aligned.
void launch_instance_norm(const float* x, const float* scale, const float* bias, float* y, int64_t planes,
                          int64_t channels, int64_t plane, float epsilon, cudaStream_t stream);

}  // namespace cnnrt::kernels
