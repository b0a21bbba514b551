// cnnrt::Options from Python values, and back to a dict (the way cnnrt._cnnrt hands a model's options to
// cnnrt._bench, which loads the model again to time it).
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "cnnrt/cnnrt.hpp"

namespace cnnrt_python {

namespace py = pybind11;

// "auto", "cpu", "gpu" (UsageError otherwise, as the tool's --device).
cnnrt::Device parse_device(const std::string& name);
// "trace", "debug", "info", "warn", "error", "off".
cnnrt::LogLevel parse_log_level(const std::string& name);

py::dict options_to_dict(const cnnrt::Options& options);
cnnrt::Options options_from_dict(const py::dict& options);

}  // namespace cnnrt_python
