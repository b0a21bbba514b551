#include "passes/pipeline.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/log.hpp"
#include "passes/passes.hpp"

namespace cnnrt::passes {

const std::vector<PassInfo>& all_passes() {
  static const std::vector<PassInfo> passes = {
#define CNNRT_PASS(name, description, fn) {name, description, fn},
#include "passes/pass_list.inc"
#undef CNNRT_PASS
  };
  return passes;
}

std::vector<std::string> run_passes(ir::Graph& graph, const std::vector<std::string>& disabled, const Target& target) {
  const auto& passes = all_passes();
  for (const std::string& name : disabled) {
    const bool known = std::any_of(passes.begin(), passes.end(), [&](const PassInfo& p) { return name == p.name; });
    if (!known) {
      std::vector<std::string> names;
      for (const PassInfo& p : passes) names.emplace_back(p.name);
      fail(ErrorCode::Usage, "unknown pass '{}' (passes: {})", name, fmt::join(names, ", "));
    }
  }
  std::vector<std::string> all_lines;
  for (const PassInfo& pass : passes) {
    if (std::find(disabled.begin(), disabled.end(), pass.name) != disabled.end()) {
      all_lines.push_back(fmt::format("{}: disabled", pass.name));
      continue;
    }
    std::vector<std::string> lines;
    pass.run(graph, target, lines);
    for (const std::string& line : lines) {
      log().debug("pass {}: {}", pass.name, line);
      all_lines.push_back(fmt::format("{}: {}", pass.name, line));
    }
  }
  graph.remove_dead();
  return all_lines;
}

}  // namespace cnnrt::passes
