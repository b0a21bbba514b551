// cp.async (sm_80+): global -> shared copies that bypass registers and do not block the issuing thread,
// so a block can have its whole tile in flight at once instead of one load latency per loop iteration.
// A source size of 0 writes zeros and reads nothing: that is how out-of-image taps (the convolution's
// padding) are filled.
#pragma once

namespace cnnrt::kernels {

__device__ __forceinline__ void cp_async_4(void* smem, const void* gmem, bool valid) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(gmem), "r"(valid ? 4 : 0));
}
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool valid) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most PENDING committed groups are still in flight (this thread's copies only: a
// __syncthreads() must follow before other threads read them).
template <int PENDING>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING));
}

}  // namespace cnnrt::kernels
