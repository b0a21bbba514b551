#include "common.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <unistd.h>
#include <utility>

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

namespace {

// Which command each EngineFlags belongs to, so that flags given before a command's name reach it.
std::vector<std::pair<const CLI::App*, EngineFlags*>>& engine_flags_of_commands() {
  static std::vector<std::pair<const CLI::App*, EngineFlags*>> registered;
  return registered;
}

const char* const kEngineFlagNames[] = {"--device",       "--no-cuda-graph",    "--no-launch-overlap",
                                        "--no-tuning",    "--tuning-cache",     "--disable-pass",
                                        "--force-kernel", "--max-weight-bytes", "--max-activation-bytes"};

}  // namespace

void EngineFlags::add_to(CLI::App& command) {
  command.add_option("--device", device, "Backend: auto (GPU if usable, else CPU), gpu or cpu")
      ->check(CLI::IsMember({"auto", "cpu", "gpu"}));
  command.add_flag("--no-cuda-graph", no_cuda_graph, "Launch steps one by one instead of replaying a CUDA graph");
  command.add_flag("--no-launch-overlap", no_launch_overlap,
                   "Launch each step after the previous one finished (no programmatic dependent launch)");
  command.add_flag("--no-tuning", no_tuning, "Choose kernels by heuristic instead of measuring them");
  command.add_option("--tuning-cache", tuning_cache, "Tuning cache file ('none' to disable)");
  command.add_option("--disable-pass", disabled_passes, "Skip a graph pass (repeatable; cnnrt plan --list-passes)");
  command.add_option("--force-kernel", force_kernel, "Run convolutions (and fused steps: chain, dense_chain, squeeze_excite, dw_pw, wgr_pw, mbconv, mbchain, dense_layer, net, seqnet, separate_steps) with this kernel where it is eligible");
  command.add_option("--max-weight-bytes", max_weight_bytes, "Refuse models whose weights need more");
  command.add_option("--max-activation-bytes", max_activation_bytes, "Refuse plans whose arena needs more");
  engine_flags_of_commands().emplace_back(&command, this);
}

void GlobalFlags::add_to_tool(CLI::App& tool) {
  add_to_command(tool);
  engine.add_to(tool);
}

void GlobalFlags::add_to_command(CLI::App& command) {
  command.add_flag("-v,--verbose", verbose, "Log what the engine does (passes, kernel choices)");
}

void GlobalFlags::apply_to(const CLI::App& tool, const CLI::App& command) const {
  std::vector<std::string> before;
  for (const char* name : kEngineFlagNames) {
    if (tool.count(name) > 0) before.emplace_back(name);
  }
  if (before.empty()) return;
  const auto& registered = engine_flags_of_commands();
  const auto it = std::find_if(registered.begin(), registered.end(),
                               [&](const auto& entry) { return entry.first == &command; });
  if (it == registered.end()) {
    throw cnnrt::Error(cnnrt::ErrorCode::Usage, fmt::format("cnnrt {} loads no model and takes no engine option ({})",
                                                            command.get_name(), fmt::join(before, ", ")));
  }
  EngineFlags& target = *it->second;
  // A flag given after the command's name wins over the same flag given before it.
  auto take = [&](const char* name) { return tool.count(name) > 0 && command.count(name) == 0; };
  if (take("--device")) target.device = engine.device;
  if (take("--no-cuda-graph")) target.no_cuda_graph = engine.no_cuda_graph;
  if (take("--no-launch-overlap")) target.no_launch_overlap = engine.no_launch_overlap;
  if (take("--no-tuning")) target.no_tuning = engine.no_tuning;
  if (take("--tuning-cache")) target.tuning_cache = engine.tuning_cache;
  if (take("--force-kernel")) target.force_kernel = engine.force_kernel;
  if (take("--max-weight-bytes")) target.max_weight_bytes = engine.max_weight_bytes;
  if (take("--max-activation-bytes")) target.max_activation_bytes = engine.max_activation_bytes;
  if (tool.count("--disable-pass") > 0) {
    target.disabled_passes.insert(target.disabled_passes.begin(), engine.disabled_passes.begin(),
                                  engine.disabled_passes.end());
  }
}

CLI::Option* add_json_option(CLI::App& command, std::string& path, const std::string& what) {
  return command.add_option("--json", path,
                            "Write " + what + " as JSON to this file ('-': to standard output, and the text to "
                                              "standard error)")
      ->type_name("FILE");
}

JsonSink::JsonSink(const std::string& path) : path_(path) {
  if (path.empty()) return;
  if (path == "-") {
    // The JSON keeps the real standard output; everything printed as text from here on goes to stderr.
    std::fflush(stdout);
    const int json_fd = dup(STDOUT_FILENO);
    if (json_fd < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0 || (file_ = fdopen(json_fd, "w")) == nullptr) {
      throw cnnrt::Error(cnnrt::ErrorCode::Io,
                         fmt::format("--json -: cannot set standard output aside: {}", std::strerror(errno)));
    }
    return;
  }
  // Written beside it and renamed into place when complete: a failed run leaves no file, or the old one.
  file_ = std::fopen(partial_path().c_str(), "w");
  if (file_ == nullptr) {
    throw cnnrt::Error(cnnrt::ErrorCode::Io, fmt::format("cannot write the --json file '{}': {}", path,
                                                         std::strerror(errno)));
  }
}

JsonSink::~JsonSink() {
  if (file_ == nullptr) return;
  std::fclose(file_);
  if (!to_stdout()) std::remove(partial_path().c_str());
}

std::string JsonSink::partial_path() const { return path_ + ".part"; }

void JsonSink::write(const std::string& json_text) {
  if (file_ == nullptr) return;
  std::fputs(json_text.c_str(), file_);
  std::fputc('\n', file_);
  std::fflush(file_);  // with --json -, each record reaches the reader as it is made
}

void JsonSink::close() {
  if (file_ == nullptr) return;
  const bool written = std::fflush(file_) == 0 && std::ferror(file_) == 0;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  const std::string where = to_stdout() ? std::string("standard output") : "'" + path_ + "'";
  const bool in_place = to_stdout() || std::rename(partial_path().c_str(), path_.c_str()) == 0;
  if (!written || !closed || !in_place) {
    if (!to_stdout()) std::remove(partial_path().c_str());
    throw cnnrt::Error(cnnrt::ErrorCode::Io, fmt::format("cannot write the JSON report to {}: {}", where,
                                                         std::strerror(errno)));
  }
  if (!to_stdout()) fmt::print(stderr, "wrote {}\n", path_);
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
