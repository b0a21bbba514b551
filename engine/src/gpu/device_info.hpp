// Properties of the CUDA device cnnrt runs on, read once.
#pragma once

#include <cstddef>
#include <string>

namespace cnnrt::gpu {

struct DeviceInfo {
  int ordinal = 0;
  std::string name;            // "NVIDIA H100 80GB HBM3"
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;
  size_t smem_per_block_optin = 0;  // bytes a block may use after cudaFuncSetAttribute
  size_t l2_bytes = 0;
  int sm_clock_khz = 0, mem_clock_khz = 0;
  int driver_version = 0, runtime_version = 0;
};

// The current device's properties (cached per device ordinal).
const DeviceInfo& current_device();

}  // namespace cnnrt::gpu
