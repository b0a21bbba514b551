// Pieces every cnnrt subcommand shares: engine options from flags, device names, error reporting.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

#include "cnnrt/cnnrt.hpp"

namespace cnnrt_cli {

// Flags that shape how a model is loaded: --device, --no-cuda-graph, --no-launch-overlap, --no-tuning,
// --tuning-cache, --disable-pass, --force-kernel, --max-*-bytes. Each command that loads a model adds them.
struct EngineFlags {
  std::string device = "auto";
  bool no_cuda_graph = false;
  bool no_launch_overlap = false;  // process-wide (cnnrt::set_launch_overlap): applied by options()
  bool no_tuning = false;
  std::string tuning_cache;
  std::vector<std::string> disabled_passes;
  std::string force_kernel;
  int64_t max_weight_bytes = cnnrt::Limits{}.max_weight_bytes;
  int64_t max_activation_bytes = cnnrt::Limits{}.max_activation_bytes;

  void add_to(CLI::App& command, bool with_device = true);
  cnnrt::Options options() const;
};

// --shape NAME=1x1x512x512 (repeatable; --shape 1x1x512x512 for a model with one input): explicit input shapes,
// which bind the model's symbolic dimensions (a fully convolutional net's height and width).
struct ShapeFlags {
  std::vector<std::string> specs;

  // Adds --shape to `command` and returns the option (for excludes()).
  CLI::Option* add_to(CLI::App& command);
  bool given() const { return !specs.empty(); }
  // One shape per model input, in the model's order: the given ones, and the declared shape of an input that
  // has no symbolic dimension. Usage errors name the problem: a malformed shape, an unknown or repeated
  // input name, an unnamed shape for a model of several inputs, an input with symbolic dimensions left out.
  // The engine checks the shapes themselves (rank, fixed dimensions, sizes >= 1) when they are used.
  std::vector<cnnrt::Shape> resolve(const cnnrt::Model& model) const;
};

// "1x1x512x512" -> {1, 1, 512, 512}; Usage error naming `spec` when a part is not an integer.
cnnrt::Shape parse_shape(const std::string& text, const std::string& spec);
std::string shape_text(const cnnrt::Shape& shape);  // "1x1x512x512"

cnnrt::Device parse_device(const std::string& name);

// The command line this process was started with (for reports that say how they were produced).
const std::string& invocation();
void set_invocation(int argc, char** argv);

// A subcommand: registers its flags on `app` and returns the action to run when it is chosen.
using Action = std::function<int()>;
Action add_run_command(CLI::App& app);
Action add_plan_command(CLI::App& app);
Action add_ops_command(CLI::App& app);
Action add_bench_command(CLI::App& app);
Action add_infer_command(CLI::App& app);
Action add_eval_command(CLI::App& app);

}  // namespace cnnrt_cli
