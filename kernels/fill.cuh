// Fill a float32 buffer with one value (constant outputs, test poisoning).
#pragma once

#include "kernels/common.cuh"

namespace cnnrt::kernels {
void launch_fill(float* out, int64_t count, float value, cudaStream_t stream);
}  // namespace cnnrt::kernels
