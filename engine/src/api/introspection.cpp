#include "cnnrt/cnnrt.hpp"
#include "ir/ops.hpp"
#include "passes/pipeline.hpp"
#ifdef CNNRT_WITH_CUDA
#include "kernels/conv_registry.hpp"
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

std::vector<KernelFamily> kernel_families() {
  std::vector<KernelFamily> list;
#ifdef CNNRT_WITH_CUDA
  for (const kernels::ConvFamily* f : kernels::conv_families()) {
    const unsigned features = f->needs().features;
    const int arch = kernels::min_arch(features);
    list.push_back({f->name(), f->summary(), kernels::feature_names(features),
                    (features & kernels::kWgmma) ? "9.0 exactly" : std::to_string(arch / 10) + "." + std::to_string(arch % 10),
                    f->variant_names()});
  }
#endif
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
