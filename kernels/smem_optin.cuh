// Shared memory beyond the 48 KB default, up to all that the device lets a block opt in to.
#pragma once

#include <cuda_runtime.h>

#include "kernels/conv_device.cuh"

namespace cnnrt::kernels {

// Lets `Kernel` use as much dynamic shared memory as a block of the current device can opt in to (the kernels
// whose blocks size their staging to the device); done once per kernel and device.
template <auto Kernel>
void allow_all_dynamic_smem() {
  static OncePerDevice once;
  once.call([] {
    int device = 0, optin = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, optin);
  });
}

}  // namespace cnnrt::kernels
