#include "kernels/fill.cuh"

namespace cnnrt::kernels {

namespace {
__global__ void fill_kernel(float* __restrict__ out, int64_t count, float value) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = value;
  }
}
}  // namespace

void launch_fill(float* out, int64_t count, float value, cudaStream_t stream) {
  if (count <= 0) return;
  fill_kernel<<<blocks_for(count, 256, 4096), 256, 0, stream>>>(out, count, value);
}

}  // namespace cnnrt::kernels
