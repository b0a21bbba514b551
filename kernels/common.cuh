// Conventions shared by all kernels.
//
// Every kernel has a host entry point `launch_<op>(..., cudaStream_t)` in its .cuh that launches on the
// given stream and returns: no allocation, no synchronisation, no error checking. Callers (the planner)
// check eligibility before launching; the runtime checks cudaGetLastError() after each planned step and
// names the step in the error. Tensors are float32, row-major (NCHW), given as raw device pointers.
#pragma once

#ifndef __CUDACC_RTC__  // (NVRTC: conv_chain_device.cuh; it knows CUDA's device types without the header)
#include <cuda_runtime.h>
#endif

#include <cstdint>

// `#pragma unroll` in __host__ __device__ functions: only the device pass knows the pragma (the host
// compiler would warn with -Wunknown-pragmas).
#ifdef __CUDA_ARCH__
#define CNNRT_UNROLL _Pragma("unroll")
#else
#define CNNRT_UNROLL
#endif

// True in the device pass for an architecture below `arch` (__CUDA_ARCH__ units: 800 is compute capability
// 8.0); false in the host pass. A kernel whose instructions an architecture lacks compiles there to a trap
// in place of its body: its family's registry entry (Needs) keeps the planner from offering it there.
#if defined(__CUDA_ARCH__)
#define CNNRT_ARCH_BELOW(arch) (__CUDA_ARCH__ < (arch))
#else
#define CNNRT_ARCH_BELOW(arch) 0
#endif

namespace cnnrt::kernels {

constexpr int kMaxRank = 8;  // N-D kernels (broadcast, transpose, slice, pad) handle up to this rank

constexpr int kWarpSize = 32;

// Grid size for a grid-stride loop over `work` items: enough blocks to cover it, capped (kernels loop over
// the rest), never 0.
inline unsigned blocks_for(int64_t work, int threads_per_block, int64_t max_blocks = 65535LL * 32) {
  int64_t blocks = (work + threads_per_block - 1) / threads_per_block;
  if (blocks < 1) blocks = 1;
  return static_cast<unsigned>(blocks < max_blocks ? blocks : max_blocks);
}

// The largest grid extent along y and z (x allows 2^31 - 1); kernels loop over what lies beyond.
constexpr int64_t kMaxGridYZ = 65535;

// True when `pointer` may be read or written as float4 (16-byte aligned).
__host__ __device__ inline bool aligned_16(const void* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 16 == 0; }

}  // namespace cnnrt::kernels
