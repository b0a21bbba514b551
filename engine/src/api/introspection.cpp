#include "cnnrt/cnnrt.hpp"
#include "ir/ops.hpp"
#include "passes/pipeline.hpp"

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

}  // namespace cnnrt
