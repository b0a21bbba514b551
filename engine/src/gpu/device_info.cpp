#include "gpu/device_info.hpp"

#include <cuda_runtime.h>

#include <map>
#include <mutex>

#include "gpu/cuda_check.hpp"

namespace cnnrt::gpu {

const DeviceInfo& current_device() {
  static std::mutex mutex;
  static std::map<int, DeviceInfo> cache;
  int ordinal = 0;
  CNNRT_CUDA_CHECK(cudaGetDevice(&ordinal));
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(ordinal);
  if (it != cache.end()) return it->second;
  cudaDeviceProp prop{};
  CNNRT_CUDA_CHECK(cudaGetDeviceProperties(&prop, ordinal));
  DeviceInfo info;
  info.ordinal = ordinal;
  info.name = prop.name;
  info.sm_count = prop.multiProcessorCount;
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  info.smem_per_block_optin = prop.sharedMemPerBlockOptin;
  info.l2_bytes = static_cast<size_t>(prop.l2CacheSize);
  cudaDeviceGetAttribute(&info.sm_clock_khz, cudaDevAttrClockRate, ordinal);
  cudaDeviceGetAttribute(&info.mem_clock_khz, cudaDevAttrMemoryClockRate, ordinal);
  cudaDriverGetVersion(&info.driver_version);
  cudaRuntimeGetVersion(&info.runtime_version);
  return cache.emplace(ordinal, std::move(info)).first->second;
}

}  // namespace cnnrt::gpu
