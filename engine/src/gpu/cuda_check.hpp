// CUDA error checks that name the statement, file:line and device, and throw cnnrt::Error (DeviceError).
#pragma once

#include <cuda_runtime.h>

#include <string>

namespace cnnrt::gpu {

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* statement, const char* file, int line,
                                   const std::string& context = {});

}  // namespace cnnrt::gpu

#define CNNRT_CUDA_CHECK(statement)                                                         \
  do {                                                                                      \
    const cudaError_t cnnrt_err_ = (statement);                                             \
    if (cnnrt_err_ != cudaSuccess) ::cnnrt::gpu::throw_cuda_error(cnnrt_err_, #statement, __FILE__, __LINE__); \
  } while (0)
