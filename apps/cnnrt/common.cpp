#include "common.hpp"

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
