#include "cnnrt/cnnrt.hpp"
#include "ir/ops.hpp"
#include "passes/pipeline.hpp"
#ifdef CNNRT_WITH_CUDA
#include "kernels/launch.cuh"
#endif

namespace cnnrt {

std::vector<std::string> supported_ops() {
  std::vector<std::string> names;
  for (std::string_view op : ir::supported_ops()) names.emplace_back(op);
  return names;
}

std::vector<std::pair<std::string, std::string>> graph_passes() {
  std::vector<std::pair<std::string, std::string>> list;
  for (const passes::PassInfo& p : passes::all_passes()) list.emplace_back(p.name, p.description);
  return list;
}

void set_launch_overlap(bool on) {
#ifdef CNNRT_WITH_CUDA
  kernels::set_programmatic_launch(on);
#else
  (void)on;  // the CPU backend launches nothing
#endif
}

}  // namespace cnnrt
