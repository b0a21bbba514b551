#include "runtime/device.hpp"

#include <cuda_runtime.h>

#include <mutex>

namespace cnnrt::runtime {

bool cuda_device_available(std::string* why) {
  // Asked once per process; the first call initialises the CUDA runtime.
  static std::once_flag once;
  static bool available = false;
  static std::string reason;
  std::call_once(once, [] {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
      reason = cudaGetErrorString(err);
      cudaGetLastError();  // clear the sticky-free error so later queries start clean
    } else if (count == 0) {
      reason = "the CUDA driver reports no devices";
    } else {
      available = true;
    }
  });
  if (!available && why) *why = reason;
  return available;
}

}  // namespace cnnrt::runtime
