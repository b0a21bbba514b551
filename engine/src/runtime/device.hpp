// Whether a usable CUDA device exists. Called lazily (never at static-initialisation time).
#pragma once

#include <string>

namespace cnnrt::runtime {

// True when this build has CUDA and the driver reports at least one device. Otherwise false, with the
// reason in *why ("no CUDA-capable device is detected", "this build has no CUDA", ...).
bool cuda_device_available(std::string* why = nullptr);

// The calling thread's current CUDA device (cudaGetDevice); -1 in a build without CUDA.
int current_device_ordinal();

// Throws DeviceUnavailable unless `ordinal` names a CUDA device of this machine (the message gives the count).
void check_device_ordinal(int ordinal);

// Why device `ordinal` (-1: the current device) cannot run cnnrt, naming it ("" when it can): an
// architecture older than Turing, real or as CNNRT_MAX_SM caps it.
std::string device_unusable(int ordinal);

// Makes `ordinal` the calling thread's current CUDA device for the scope and restores the previous one at its
// end, so that a model's weights, streams and launches stay on the device it was loaded on, whichever device
// the caller's thread has current. ordinal < 0 (CPU models): does nothing. Never throws: a failed switch
// surfaces as the next CUDA call's error, which names the device.
class ScopedDevice {
 public:
  explicit ScopedDevice(int ordinal) noexcept;
  ~ScopedDevice();
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;

 private:
  int previous_ = -1;  // the device to restore; -1: nothing was switched
};

}  // namespace cnnrt::runtime
