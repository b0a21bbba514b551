// The process-wide programmatic-launch switch of launch.cuh.
#include <atomic>
#include <cstdint>

#include "kernels/code_arch.hpp"
#include "kernels/launch.cuh"

namespace cnnrt::kernels {

namespace {
std::atomic<bool> g_programmatic_launch{true};  // constant-initialised: no CUDA call at static-init time
std::atomic<uint64_t> g_plain_devices{0};         // bit d: device d launches without PDL
thread_local bool t_next_plain = false;           // launch_next_plain() asked for it
}  // namespace

void set_programmatic_launch(bool on) { g_programmatic_launch.store(on, std::memory_order_relaxed); }

void set_programmatic_launch_for_device(int ordinal, bool allowed) {
  if (ordinal < 0 || ordinal >= 64) return;
  const uint64_t bit = uint64_t(1) << ordinal;
  if (allowed) {
    g_plain_devices.fetch_and(~bit, std::memory_order_relaxed);
  } else {
    g_plain_devices.fetch_or(bit, std::memory_order_relaxed);
  }
}

int heavy_code_arch();  // conv2d_c1.cu
int sm90a_code_arch();  // conv2d_wgr.cu

CNNRT_CODE_ARCH_PROBE(light_code_arch)

int loaded_code_arch() {
  const int light = light_code_arch(), heavy = heavy_code_arch();
  return light < heavy ? light : heavy;
}

bool arch_specific_code_loaded() { return sm90a_code_arch() > 0; }

bool programmatic_launch() {
  if (!g_programmatic_launch.load(std::memory_order_relaxed)) return false;
  const uint64_t plain = g_plain_devices.load(std::memory_order_relaxed);
  if (plain == 0) return true;
  int ordinal = 0;
  if (cudaGetDevice(&ordinal) != cudaSuccess || ordinal < 0 || ordinal >= 64) return false;
  return (plain >> ordinal & 1) == 0;
}

void launch_next_plain() { t_next_plain = true; }

bool take_programmatic_launch() {
  if (t_next_plain) {
    t_next_plain = false;
    return false;
  }
  return programmatic_launch();
}

}  // namespace cnnrt::kernels
