// The chain kernel (conv_chain.cuh) compiled at plan time for one model's shapes, with NVRTC.
//
// Why: the kernels built ahead of time take the chain's shapes, pool geometry, activations and work split
// as ~600 bytes of kernel parameters. In one batch-1 launch those cost twice: the index arithmetic that
// reads them (FastDiv divisions, bounds, the activation's jump table), and a dozen constant-cache misses at
// the kernel's start, one after another. Compiled with all of them as constants,
// the same code (conv_chain_device.cuh) folds them away; only the pointers stay parameters.
//
// The source is the built kernel's own header, embedded in the library at build time, so the two cannot
// drift apart; the desc and layout travel as their bytes (the same bytes the built kernel gets as
// parameters) and a static_assert checks that NVRTC lays the structs out as the host compiler does.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "kernels/conv_chain.cuh"
#include "kernels/jit.hpp"

namespace cnnrt::kernels {

// The CUDA C++ source of the chain kernel specialised for (d, v); its kernel is kChainJitEntry.
std::string conv_chain_jit_source(const ConvChainDesc& d, const ConvChainVariant& v);
extern const char* const kChainJitEntry;

// `source` compiled for sm_<arch> (e.g. 90) to a cubin. Needs no GPU. Throws std::runtime_error with the
// compiler's log when the source does not compile; `log` (if given) gets the log of a compilation that
// succeeded (ptxas warns there where the kernel uses local memory).
std::string compile_chain_jit_source(const std::string& source, int arch, std::string* log = nullptr);

// A chain kernel compiled for (d, v) on the current device and loaded. Throws std::runtime_error when NVRTC
// or the load fails; the planner then keeps the built kernel.
class ChainJitKernel {
 public:
  ChainJitKernel(const ConvChainDesc& d, const ConvChainVariant& v);
  ~ChainJitKernel();
  ChainJitKernel(const ChainJitKernel&) = delete;
  ChainJitKernel& operator=(const ChainJitKernel&) = delete;

  // Same contract as launch_conv_chain; `d` must have the shapes it was compiled for (its pointers may
  // differ).
  void launch(const float* x, float* y, const ConvChainDesc& d, cudaStream_t stream, bool image_once = false,
              unsigned* done = nullptr) const;
  double compile_seconds() const { return compile_seconds_; }

 private:
  ChainLayout layout_;
  std::unique_ptr<JitKernel> kernel_;
  double compile_seconds_ = 0.0;
};

}  // namespace cnnrt::kernels
