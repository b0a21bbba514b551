// The graph rewrites that run after shapes are bound, in order. Each pass is a standalone function over
// the IR (one file each in this folder), can be switched off by name, and logs what it rewrote so that
// `cnnrt plan` can show why a step looks the way it does.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.hpp"
#include "passes/passes.hpp"

namespace cnnrt::passes {

struct PassInfo {
  const char* name;         // for --disable-pass
  const char* description;  // one line, for `cnnrt plan --list-passes`
  // Rewrites the graph; appends one line per rewrite to `log`.
  void (*run)(ir::Graph& graph, const Target& target, std::vector<std::string>& log);
};

const std::vector<PassInfo>& all_passes();

// Runs every pass whose name is not in `disabled` (unknown names are a Usage error listing the valid ones),
// for `target`. Returns the log lines, each prefixed with the pass name.
std::vector<std::string> run_passes(ir::Graph& graph, const std::vector<std::string>& disabled,
                                    const Target& target = {});

}  // namespace cnnrt::passes
