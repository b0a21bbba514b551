#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>

#include "plan/gpu/lower_util.hpp"

namespace cnnrt::plan {

void require_rank_at_most(const ir::Shape& shape, int max_rank, const char* what) {
  CNNRT_CHECK(static_cast<int>(shape.size()) <= max_rank, ErrorCode::Unsupported,
              "{} of rank {} (shape {}): the GPU kernels handle rank {} at most", what, shape.size(),
              ir::shape_str(shape), max_rank);
}

Choice choose_kernel(LowerContext& lc, const std::string& signature, const std::vector<KernelCandidate>& candidates,
                     const TuneShapes& shapes) {
  if (lc.context.tuner) return lc.context.tuner->choose(signature, candidates, shapes);
  Choice choice;
  choice.how = "heuristic";
  return choice;
}

std::vector<std::pair<const KernelCandidate*, double>> close_candidates(const Choice& choice,
                                                                        const std::vector<KernelCandidate>& candidates) {
  constexpr double kCloseRatio = 1.15, kCloseUs = 0.3;
  std::vector<std::pair<const KernelCandidate*, double>> close;
  if (choice.timings.empty() || choice.index >= candidates.size()) return close;
  const std::string& chosen = candidates[choice.index].name;
  double chosen_us = -1;
  for (const Candidate& t : choice.timings) {
    if (t.kernel == chosen) chosen_us = t.median_us;
  }
  if (chosen_us <= 0) return close;
  for (const Candidate& t : choice.timings) {  // fastest first
    if (t.kernel == chosen || t.median_us <= 0 || t.median_us > chosen_us * kCloseRatio + kCloseUs) continue;
    const auto c = std::find_if(candidates.begin(), candidates.end(),
                                [&t](const KernelCandidate& k) { return k.name == t.kernel; });
    if (c != candidates.end() && !c->reference) close.emplace_back(&*c, t.median_us);
  }
  return close;
}

bool clearly_faster_than_steps(const Choice& choice, const std::string& fused, double ratio) {
  double steps_us = -1, fused_us = -1;
  for (const Candidate& c : choice.timings) {
    if (c.kernel == "separate_steps") steps_us = c.median_us;
    if (c.kernel == fused) fused_us = c.median_us;
  }
  if (steps_us <= 0 || fused_us <= 0) return true;  // not measured (forced, heuristic): as chosen
  return fused_us <= ratio * steps_us;
}

std::vector<StepKernel> close_alternatives(const Choice& choice, const std::vector<KernelCandidate>& candidates) {
  constexpr size_t kMost = 2;
  std::vector<StepKernel> close;
  for (const auto& [c, us] : close_candidates(choice, candidates)) {
    if (close.size() == kMost) break;
    if (c->workspace_floats > candidates[choice.index].workspace_floats) continue;
    close.push_back({c->name, c->config, c->launch, c->launch_from_host, c->signals_done});
  }
  return close;
}

std::vector<int> input_slots(LowerContext& lc, const ir::Node& node) {
  std::vector<int> slots;
  for (int v : node.inputs) {
    if (v != ir::kNoValue) slots.push_back(lc.slot(v));
  }
  return slots;
}

bool plan_time_compilation() {
  const char* off = std::getenv("CNNRT_NO_JIT");
  return !(off && *off && std::string(off) != "0");
}

std::vector<int> output_slots(LowerContext& lc, const ir::Node& node) {
  std::vector<int> slots;
  for (int v : node.outputs) {
    if (v != ir::kNoValue) slots.push_back(lc.slot(v));
  }
  return slots;
}

LowerFn find_lowering(std::string_view op) {
  static const std::map<std::string, LowerFn, std::less<>> table = [] {
    std::map<std::string, LowerFn, std::less<>> t;
    for (auto family : {elementwise_lowerings, window_lowerings, matrix_lowerings, movement_lowerings,
                        resize_lowerings, conv_transpose_lowerings, normalization_lowerings}) {
      for (const LoweringEntry& e : family()) t.emplace(e.op, e.fn);
    }
    return t;
  }();
  auto it = table.find(op);
  return it == table.end() ? nullptr : it->second;
}

}  // namespace cnnrt::plan
