// Which GPU code the driver loaded for the current device. A build holds machine code for some
// architectures and PTX for others (CMakeLists.txt); on a GPU without machine code of its own (a Blackwell
// card, or any GPU under CUDA_FORCE_PTX_JIT=1) the driver compiles the PTX, whose architecture then bounds
// what the kernels can do: the planner plans for min(the device, the loaded code).
#pragma once

#include <cuda_runtime.h>

namespace cnnrt::kernels {

// The lowest architecture (major * 10 + minor) of the code loaded from the kernel libraries for the current
// device, e.g. 90 on an H100, 75 where only sm_75 PTX serves; 0 when none loads.
int loaded_code_arch();
// Whether the sm_90a kernels (wgmma) have machine code for the current device.
bool arch_specific_code_loaded();

// Defines `int fn()`: the PTX architecture of an empty kernel of the calling translation unit as loaded for
// the current device, 0 when the device has no code for it. One per kernel library (each is built for its
// own architectures).
#define CNNRT_CODE_ARCH_PROBE(fn)                                             \
  __global__ void fn##_kernel() {}                                            \
  int fn() {                                                                  \
    cudaFuncAttributes attributes{};                                          \
    if (cudaFuncGetAttributes(&attributes, fn##_kernel) != cudaSuccess) {     \
      cudaGetLastError();                                                     \
      return 0;                                                               \
    }                                                                         \
    return attributes.ptxVersion;                                             \
  }

}  // namespace cnnrt::kernels
