#include "runtime/device.hpp"

#include <cuda_runtime.h>

#include <mutex>

#include "core/error.hpp"
#include "gpu/device_info.hpp"

namespace cnnrt::runtime {

bool cuda_device_available(std::string* why) {
  // Asked once per process; the first call initialises the CUDA runtime.
  static std::once_flag once;
  static bool available = false;
  static std::string reason;
  std::call_once(once, [] {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err == cudaErrorInsufficientDriver) {
      int driver = 0, runtime = 0;
      cudaDriverGetVersion(&driver);
      cudaRuntimeGetVersion(&runtime);
      reason = gpu::old_driver_message(driver, runtime);
      cudaGetLastError();
    } else if (err != cudaSuccess) {
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

int current_device_ordinal() {
  int ordinal = -1;
  if (cudaGetDevice(&ordinal) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return ordinal;
}

void check_device_ordinal(int ordinal) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    count = 0;
  }
  CNNRT_CHECK(ordinal >= 0 && ordinal < count, ErrorCode::DeviceUnavailable,
              "GPU {} was asked for (Options::gpu_index), but this machine has {} CUDA device{}{}", ordinal, count,
              count == 1 ? "" : "s", count > 0 ? fmt::format(" (0 to {})", count - 1) : std::string());
}

std::string device_unusable(int ordinal) {
  ScopedDevice on_device(ordinal);
  const gpu::DeviceInfo& device = gpu::current_device();
  const std::string why = gpu::unusable_reason(device);
  return why.empty() ? why : fmt::format("GPU {}: {}", device.ordinal, why);
}

ScopedDevice::ScopedDevice(int ordinal) noexcept {
  if (ordinal < 0) return;
  int current = -1;
  if (cudaGetDevice(&current) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  if (current == ordinal) return;
  if (cudaSetDevice(ordinal) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  previous_ = current;
}

ScopedDevice::~ScopedDevice() {
  if (previous_ >= 0) cudaSetDevice(previous_);
}

}  // namespace cnnrt::runtime
