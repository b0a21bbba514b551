#include "common.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <map>

namespace cnnrt_cli {

namespace {
std::string g_invocation;
}

const std::string& invocation() { return g_invocation; }

void set_invocation(int argc, char** argv) {
  g_invocation.clear();
  for (int i = 0; i < argc; ++i) {
    if (i > 0) g_invocation += ' ';
    g_invocation += i == 0 ? "cnnrt" : argv[i];
  }
}

cnnrt::Shape parse_shape(const std::string& text, const std::string& spec) {
  cnnrt::Shape shape;
  size_t start = 0;
  while (true) {
    const size_t end = text.find('x', start);
    const std::string part = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    char* rest = nullptr;
    errno = 0;
    const long long value = part.empty() ? 0 : std::strtoll(part.c_str(), &rest, 10);
    if (part.empty() || *rest != '\0' || errno == ERANGE) {
      throw cnnrt::Error(cnnrt::ErrorCode::Usage,
                         fmt::format("--shape '{}': '{}' is not a dimension (expected sizes joined by x, such as "
                                     "1x1x512x512)", spec, part));
    }
    shape.push_back(value);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return shape;
}

std::string shape_text(const cnnrt::Shape& shape) { return fmt::format("{}", fmt::join(shape, "x")); }

CLI::Option* ShapeFlags::add_to(CLI::App& command) {
  return command.add_option("--shape", specs,
                            "Input shape NAME=1x1x512x512 (repeatable; just the shape for a one-input model): binds "
                            "symbolic dimensions such as an image's height and width");
}

std::vector<cnnrt::Shape> ShapeFlags::resolve(const cnnrt::Model& model) const {
  const std::vector<cnnrt::TensorDesc>& inputs = model.inputs();
  std::map<std::string, cnnrt::Shape> given;
  for (const std::string& spec : specs) {
    const size_t eq = spec.rfind('=');  // input names may hold '=', shapes never do
    std::string name = eq == std::string::npos ? "" : spec.substr(0, eq);
    const cnnrt::Shape shape = parse_shape(eq == std::string::npos ? spec : spec.substr(eq + 1), spec);
    if (eq == std::string::npos) {
      if (inputs.size() != 1) {
        throw cnnrt::Error(cnnrt::ErrorCode::Usage,
                           fmt::format("--shape '{}' names no input, but '{}' has {} inputs; write NAME=SHAPE", spec,
                                       model.name(), inputs.size()));
      }
      name = inputs[0].name;
    }
    bool known = false;
    for (const cnnrt::TensorDesc& in : inputs) known = known || in.name == name;
    if (!known) {
      std::vector<std::string> names;
      for (const cnnrt::TensorDesc& in : inputs) names.push_back("'" + in.name + "'");
      throw cnnrt::Error(cnnrt::ErrorCode::Usage, fmt::format("--shape '{}': '{}' has no input '{}' (its inputs: {})",
                                                              spec, model.name(), name, fmt::join(names, ", ")));
    }
    if (!given.emplace(name, shape).second) {
      throw cnnrt::Error(cnnrt::ErrorCode::Usage, fmt::format("--shape gives input '{}' twice", name));
    }
  }
  std::vector<cnnrt::Shape> shapes;
  for (const cnnrt::TensorDesc& in : inputs) {
    auto it = given.find(in.name);
    if (it != given.end()) {
      shapes.push_back(it->second);
      continue;
    }
    for (size_t d = 0; d < in.shape.size(); ++d) {
      if (in.shape[d] < 0) {
        throw cnnrt::Error(cnnrt::ErrorCode::Usage,
                           fmt::format("input '{}' of '{}' has a symbolic dimension {} ('{}'); give its shape with "
                                       "--shape {}=...", in.name, model.name(), d, in.dim_names[d], in.name));
      }
    }
    shapes.push_back(in.shape);
  }
  return shapes;
}

cnnrt::Device parse_device(const std::string& name) {
  if (name == "auto") return cnnrt::Device::Auto;
  if (name == "cpu") return cnnrt::Device::Cpu;
  if (name == "gpu") return cnnrt::Device::Gpu;
  throw cnnrt::Error(cnnrt::ErrorCode::Usage, "--device must be auto, cpu or gpu, not '" + name + "'");
}

void EngineFlags::add_to(CLI::App& command, bool with_device) {
  if (with_device) {
    command.add_option("--device", device, "Backend: auto (GPU if usable, else CPU), gpu or cpu")
        ->check(CLI::IsMember({"auto", "cpu", "gpu"}));
  }
  command.add_flag("--no-cuda-graph", no_cuda_graph, "Launch steps one by one instead of replaying a CUDA graph");
  command.add_flag("--no-launch-overlap", no_launch_overlap,
                   "Launch each step after the previous one finished (no programmatic dependent launch)");
  command.add_flag("--no-tuning", no_tuning, "Choose kernels by heuristic instead of measuring them");
  command.add_option("--tuning-cache", tuning_cache, "Tuning cache file ('none' to disable)");
  command.add_option("--disable-pass", disabled_passes, "Skip a graph pass (repeatable; see `cnnrt plan`)");
  command.add_option("--force-kernel", force_kernel, "Run convolutions (and LeNet-class chains: chain, separate_steps) with this kernel where it is eligible");
  command.add_option("--max-weight-bytes", max_weight_bytes, "Refuse models whose weights need more");
  command.add_option("--max-activation-bytes", max_activation_bytes, "Refuse plans whose arena needs more");
}

cnnrt::Options EngineFlags::options() const {
  cnnrt::Options o;
  o.device = parse_device(device);
  o.cuda_graphs = !no_cuda_graph;
  cnnrt::set_launch_overlap(!no_launch_overlap);  // a process-wide switch, not an Options field
  o.tuning = !no_tuning;
  o.tuning_cache = tuning_cache;
  o.disabled_passes = disabled_passes;
  o.force_kernel = force_kernel;
  o.limits.max_weight_bytes = max_weight_bytes;
  o.limits.max_activation_bytes = max_activation_bytes;
  return o;
}

}  // namespace cnnrt_cli
