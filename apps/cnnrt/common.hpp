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
Action add_serve_command(CLI::App& app);

}  // namespace cnnrt_cli
