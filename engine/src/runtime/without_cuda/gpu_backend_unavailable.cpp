// The GPU entry points of a build configured with CNNRT_ENABLE_CUDA=OFF: the CPU backend is all there is.
#include "runtime/device.hpp"

#include "core/error.hpp"
#include "runtime/gpu_model.hpp"

namespace cnnrt::runtime {

bool cuda_device_available(std::string* why) {
  if (why) *why = "this build of cnnrt has no CUDA support (configured with CNNRT_ENABLE_CUDA=OFF)";
  return false;
}

int current_device_ordinal() { return -1; }

void check_device_ordinal(int ordinal) {
  fail(ErrorCode::DeviceUnavailable, "GPU {} was asked for (Options::gpu_index), but this build of cnnrt has no "
       "CUDA support (configured with CNNRT_ENABLE_CUDA=OFF)", ordinal);
}

std::string device_unusable(int) { return "this build of cnnrt has no CUDA support (configured with CNNRT_ENABLE_CUDA=OFF)"; }

ScopedDevice::ScopedDevice(int) noexcept {}
ScopedDevice::~ScopedDevice() = default;

std::shared_ptr<GpuModel> GpuModel::create(const Options&) {
  fail(ErrorCode::DeviceUnavailable, "this build of cnnrt has no CUDA support (configured with "
       "CNNRT_ENABLE_CUDA=OFF)");
}

}  // namespace cnnrt::runtime
