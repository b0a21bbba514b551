#include "options.hpp"

#include <pybind11/stl.h>

#include "errors.hpp"

namespace cnnrt_python {

cnnrt::Device parse_device(const std::string& name) {
  if (name == "auto") return cnnrt::Device::Auto;
  if (name == "cpu") return cnnrt::Device::Cpu;
  if (name == "gpu") return cnnrt::Device::Gpu;
  fail(cnnrt::ErrorCode::Usage, "device must be 'auto', 'cpu' or 'gpu', not '", name, "'");
}

cnnrt::LogLevel parse_log_level(const std::string& name) {
  using L = cnnrt::LogLevel;
  if (name == "trace") return L::Trace;
  if (name == "debug") return L::Debug;
  if (name == "info") return L::Info;
  if (name == "warn") return L::Warn;
  if (name == "error") return L::Error;
  if (name == "off") return L::Off;
  fail(cnnrt::ErrorCode::Usage, "log_level must be 'trace', 'debug', 'info', 'warn', 'error' or 'off', not '", name,
       "'");
}

py::dict options_to_dict(const cnnrt::Options& o) {
  py::dict d;
  d["device"] = cnnrt::to_string(o.device);
  d["batch_sizes"] = o.batch_sizes;
  d["tuning"] = o.tuning;
  d["tuning_cache"] = o.tuning_cache;
  d["cuda_graphs"] = o.cuda_graphs;
  d["disabled_passes"] = o.disabled_passes;
  d["force_kernel"] = o.force_kernel;
  d["max_model_bytes"] = o.limits.max_model_bytes;
  d["max_weight_bytes"] = o.limits.max_weight_bytes;
  d["max_activation_bytes"] = o.limits.max_activation_bytes;
  d["max_nodes"] = o.limits.max_nodes;
  return d;
}

cnnrt::Options options_from_dict(const py::dict& d) {
  cnnrt::Options o;
  o.device = parse_device(d["device"].cast<std::string>());
  o.batch_sizes = d["batch_sizes"].cast<std::vector<int64_t>>();
  o.tuning = d["tuning"].cast<bool>();
  o.tuning_cache = d["tuning_cache"].cast<std::string>();
  o.cuda_graphs = d["cuda_graphs"].cast<bool>();
  o.disabled_passes = d["disabled_passes"].cast<std::vector<std::string>>();
  o.force_kernel = d["force_kernel"].cast<std::string>();
  o.limits.max_model_bytes = d["max_model_bytes"].cast<int64_t>();
  o.limits.max_weight_bytes = d["max_weight_bytes"].cast<int64_t>();
  o.limits.max_activation_bytes = d["max_activation_bytes"].cast<int64_t>();
  o.limits.max_nodes = d["max_nodes"].cast<int64_t>();
  return o;
}

}  // namespace cnnrt_python
