// Kernels compiled at plan time for one model's shapes, with NVRTC: what the chain kernel (conv_chain_jit.hpp)
// and the sequence kernel (seqnet.cuh) share.
//
// A plan-time source includes the built kernel's own device header, embedded in the library at build time
// (kernels/CMakeLists.txt: CNNRT_JIT_HEADERS), so the two cannot drift apart; the structs that describe the shapes
// travel as their bytes (jit_words: the same bytes the built kernel gets as parameters), copied into locals that
// the compiler folds into constants.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>

namespace cnnrt::kernels {

// `size` bytes at `bytes` (a multiple of 4) as a C++ initializer of 32-bit words: "0x1u, 0x0u, ...".
std::string jit_words(const void* bytes, size_t size);

// The current device's compute capability as major * 10 + minor (what compile_jit_source takes). Throws
// std::runtime_error with the CUDA error where there is no device.
int current_device_arch();

// `source` compiled for sm_<arch> (e.g. 90) to a cubin, as nvcc builds the kernels (C++17, full optimisation, no
// fast-math). Needs no GPU. Throws std::runtime_error naming `what` ("the chain kernel") with the compiler's log
// when the source does not compile; `log` (if given) gets the log of a compilation that succeeded (ptxas warns
// there where the kernel uses local memory or spills).
std::string compile_jit_source(const std::string& source, int arch, const char* what, std::string* log = nullptr);

// A cubin's kernel `entry`, loaded for the current device with `smem_bytes` of dynamic shared memory allowed
// (and clusters beyond 8 blocks where `large_clusters`). Throws std::runtime_error when the load fails.
class JitKernel {
 public:
  JitKernel(const std::string& cubin, const char* entry, size_t smem_bytes, bool large_clusters);
  ~JitKernel();
  JitKernel(const JitKernel&) = delete;
  JitKernel& operator=(const JitKernel&) = delete;
  cudaKernel_t kernel() const { return kernel_; }

 private:
  cudaLibrary_t library_ = nullptr;
  cudaKernel_t kernel_ = nullptr;
};

}  // namespace cnnrt::kernels
