// The text `cnnrt plan` prints for a prepared model.
#pragma once

#include <string>

#include "cnnrt/cnnrt.hpp"
#include "plan/prepared.hpp"

namespace cnnrt::plan {

// Steps (with the ONNX nodes each covers), shapes, the passes' log; on the GPU also kernels, launch
// configurations and the memory plan. `explain` adds the measured runners-up of each kernel choice.
std::string describe(const Prepared& prepared, Device device, bool explain);

}  // namespace cnnrt::plan
