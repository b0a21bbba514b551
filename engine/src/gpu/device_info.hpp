// Properties of the CUDA device cnnrt runs on, read once; and what cnnrt asks of a device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace cnnrt::gpu {

// The oldest architecture cnnrt builds for and runs on: compute capability 7.5 (Turing).
constexpr int kMinArch = 75;

struct DeviceInfo {
  int ordinal = 0;
  std::string name;            // "NVIDIA H100 80GB HBM3", with " as sm_80" under CNNRT_MAX_SM
  int sm_count = 0;
  // The compute capability the planner plans for: the device's own, or CNNRT_MAX_SM's when lower.
  int cc_major = 0, cc_minor = 0;
  int device_arch = 0;              // the device's own compute capability, major * 10 + minor
  int code_arch = 0;                // the architecture of the kernels' code loaded for it (kernels/code_arch.hpp)
  bool sm90a_code = false;          // whether the sm_90a kernels (wgmma) loaded
  size_t smem_per_block_optin = 0;  // bytes a block may use after cudaFuncSetAttribute (capped with the arch)
  size_t l2_bytes = 0;
  size_t total_memory_bytes = 0;    // device memory in all
  int sm_clock_khz = 0, mem_clock_khz = 0;
  int driver_version = 0, runtime_version = 0;

  int arch() const { return cc_major * 10 + cc_minor; }
};

// The current device's properties (cached per device ordinal), capped by CNNRT_MAX_SM when it is set.
const DeviceInfo& current_device();

// CNNRT_MAX_SM as an architecture (80 for "80" or "8.0"); 0 when unset or empty. Throws Usage for anything
// else. The planner then chooses as a GPU of that architecture would: only the kernel families it has.
int max_arch_from_environment();

// `device` as the planner sees it under a cap of `max_arch` (0: none) and with its kernels' code loaded for
// `code_arch` (PTX compiled by the driver: 0 for machine code of the device's own): the lowest of the three
// compute capabilities, and the shared memory a block may have on that architecture. Only a cap renames it.
DeviceInfo capped(DeviceInfo device, int max_arch, int code_arch = 0);

// Why cnnrt cannot run on `device` ("" when it can): a compute capability below kMinArch.
std::string unusable_reason(const DeviceInfo& device);

// The message for a CUDA runtime that cannot start because the driver is older than the runtime cnnrt was
// built with (versions as CUDA reports them: 12040 is 12.4).
std::string old_driver_message(int driver_version, int runtime_version);

// "12.4" for 12040.
std::string cuda_version_string(int version);

}  // namespace cnnrt::gpu
