#include "gpu/device_info.hpp"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <mutex>

#include "core/error.hpp"
#include "core/log.hpp"
#include "gpu/cuda_check.hpp"
#include "kernels/code_arch.hpp"

namespace cnnrt::gpu {

namespace {

// Shared memory a block may opt in to, per architecture (CUDA C++ Programming Guide, compute capabilities).
size_t smem_optin_of(int arch) {
  if (arch < 80) return 64 * 1024;
  if (arch == 80 || arch == 87) return 163 * 1024;
  if (arch < 90) return 99 * 1024;
  return 227 * 1024;
}

}  // namespace

int max_arch_from_environment() {
  const char* value = std::getenv("CNNRT_MAX_SM");
  if (value == nullptr || *value == '\0') return 0;
  const std::string s(value);
  int major = -1, minor = -1;
  if (s.size() == 2 && std::isdigit(static_cast<unsigned char>(s[0])) && std::isdigit(static_cast<unsigned char>(s[1]))) {
    major = s[0] - '0';
    minor = s[1] - '0';
  } else if (s.size() == 3 && s[1] == '.' && std::isdigit(static_cast<unsigned char>(s[0])) &&
             std::isdigit(static_cast<unsigned char>(s[2]))) {
    major = s[0] - '0';
    minor = s[2] - '0';
  } else if (s.size() == 3 && std::isdigit(static_cast<unsigned char>(s[0])) &&
             std::isdigit(static_cast<unsigned char>(s[1])) && std::isdigit(static_cast<unsigned char>(s[2]))) {
    major = (s[0] - '0') * 10 + (s[1] - '0');  // 100, 120: Blackwell
    minor = s[2] - '0';
  }
  CNNRT_CHECK(major >= 1, ErrorCode::Usage,
              "CNNRT_MAX_SM='{}': give a compute capability as digits, such as 75, 80, 86, 89 or 8.0", s);
  return major * 10 + minor;
}

DeviceInfo capped(DeviceInfo device, int max_arch, int code_arch) {
  if (max_arch > 0 && max_arch < device.arch()) {
    device.cc_major = max_arch / 10;
    device.cc_minor = max_arch % 10;
    device.smem_per_block_optin = std::min(device.smem_per_block_optin, smem_optin_of(max_arch));
    device.name += fmt::format(" as sm_{}", max_arch);
  }
  if (code_arch > 0 && code_arch < device.arch()) {
    device.cc_major = code_arch / 10;
    device.cc_minor = code_arch % 10;
  }
  return device;
}

std::string unusable_reason(const DeviceInfo& device) {
  if (device.arch() < kMinArch) {
    return fmt::format("{} has compute capability {}.{}; cnnrt runs on {}.{} (Turing) and later", device.name,
                       device.cc_major, device.cc_minor, kMinArch / 10, kMinArch % 10);
  }
  return "";
}

std::string cuda_version_string(int version) { return fmt::format("{}.{}", version / 1000, version % 1000 / 10); }

std::string old_driver_message(int driver_version, int runtime_version) {
  if (driver_version <= 0) return "no NVIDIA driver is installed (or it cannot be loaded)";
  return fmt::format("the NVIDIA driver supports CUDA {} but cnnrt was built with CUDA {}; install a driver for "
                     "CUDA {} or later",
                     cuda_version_string(driver_version), cuda_version_string(runtime_version),
                     cuda_version_string(runtime_version));
}

const DeviceInfo& current_device() {
  static std::mutex mutex;
  static std::map<int, DeviceInfo> cache;
  int ordinal = 0;
  CNNRT_CUDA_CHECK(cudaGetDevice(&ordinal));
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(ordinal);
  if (it != cache.end()) return it->second;
  const int max_arch = max_arch_from_environment();  // read once per device: the cap is per process
  cudaDeviceProp prop{};
  CNNRT_CUDA_CHECK(cudaGetDeviceProperties(&prop, ordinal));
  DeviceInfo info;
  info.ordinal = ordinal;
  info.name = prop.name;
  info.sm_count = prop.multiProcessorCount;
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  info.device_arch = prop.major * 10 + prop.minor;
  info.smem_per_block_optin = prop.sharedMemPerBlockOptin;
  info.l2_bytes = static_cast<size_t>(prop.l2CacheSize);
  info.total_memory_bytes = prop.totalGlobalMem;
  cudaDeviceGetAttribute(&info.sm_clock_khz, cudaDevAttrClockRate, ordinal);
  cudaDeviceGetAttribute(&info.mem_clock_khz, cudaDevAttrMemoryClockRate, ordinal);
  cudaDriverGetVersion(&info.driver_version);
  cudaRuntimeGetVersion(&info.runtime_version);
  info.code_arch = kernels::loaded_code_arch();
  info.sm90a_code = kernels::arch_specific_code_loaded();
  const int code_arch = info.code_arch;
  if (code_arch > 0 && code_arch / 10 < info.device_arch / 10) {
    log().info("GPU {} ({}): its kernels run from PTX for sm_{} compiled by the driver; planning for that "
               "architecture", ordinal, info.name, code_arch);
  }
  return cache.emplace(ordinal, capped(std::move(info), max_arch, code_arch)).first->second;
}

}  // namespace cnnrt::gpu
