// Whether a usable CUDA device exists. Called lazily (never at static-initialisation time).
#pragma once

#include <string>

namespace cnnrt::runtime {

// True when this build has CUDA and the driver reports at least one device. Otherwise false, with the
// reason in *why ("no CUDA-capable device is detected", "this build has no CUDA", ...).
bool cuda_device_available(std::string* why = nullptr);

}  // namespace cnnrt::runtime
