// cp.async (sm_80+; emulated below on sm_75): global -> shared copies that bypass registers and do not block the issuing thread,
// so a block can have its whole tile in flight at once instead of one load latency per loop iteration.
// A source size of 0 writes zeros and reads nothing: that is how out-of-image taps (the convolution's
// padding) are filled.
#pragma once

namespace cnnrt::kernels {

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
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
#else
// Turing (sm_75) has no cp.async: the same calls copy through registers, synchronously, so every kernel
// written for the pipelined copies runs there unchanged (each copy has landed when the call returns; the
// __syncthreads() the callers already have publishes it). The pipelining is lost, not the result.
__device__ __forceinline__ void cp_async_4(void* smem, const void* gmem, bool valid) {
  *static_cast<float*>(smem) = valid ? __ldg(static_cast<const float*>(gmem)) : 0.0f;
}
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool valid) {
  *static_cast<float4*>(smem) = valid ? __ldg(static_cast<const float4*>(gmem)) : make_float4(0.f, 0.f, 0.f, 0.f);
}
__device__ __forceinline__ void cp_async_commit() {}
template <int PENDING>
__device__ __forceinline__ void cp_async_wait() {}
#endif

// Copies `n` floats from global `src` into shared `dst` by the block's THREADS threads, every copy in flight at once:
// 16 bytes a copy where both addresses are 16-byte aligned, the tail 4 bytes a copy. Not committed.
template <int THREADS>
__device__ __forceinline__ void cp_async_floats(float* dst, const float* src, int n) {
  const bool vector = ((reinterpret_cast<size_t>(src) | reinterpret_cast<size_t>(dst)) & 15) == 0;
  int i = 0;
  if (vector) {
    for (i = static_cast<int>(threadIdx.x) * 4; i + 3 < n; i += THREADS * 4) cp_async_16(dst + i, src + i, true);
    i = n & ~3;
  }
  for (int j = i + static_cast<int>(threadIdx.x); j < n; j += THREADS) cp_async_4(dst + j, src + j, true);
}

}  // namespace cnnrt::kernels
