#include "plan/gpu_plan.hpp"

#include <fmt/format.h>

namespace cnnrt::plan {

namespace {

std::string human_bytes(int64_t bytes) {
  if (bytes >= (int64_t(1) << 30)) return fmt::format("{:.2f} GiB", bytes / double(int64_t(1) << 30));
  if (bytes >= (int64_t(1) << 20)) return fmt::format("{:.2f} MiB", bytes / double(1 << 20));
  if (bytes >= (int64_t(1) << 10)) return fmt::format("{:.1f} KiB", bytes / 1024.0);
  return fmt::format("{} B", bytes);
}

std::string slot_text(const Slot& s) {
  switch (s.kind) {
    case SlotKind::Arena: return fmt::format("arena+{}", s.offset);
    case SlotKind::Weight: return "weight";
    case SlotKind::Input: return fmt::format("input{}", s.io_index);
    case SlotKind::Output: return fmt::format("output{}", s.io_index);
  }
  return "?";
}

}  // namespace

std::string describe_gpu_plan(const GpuPlan& plan, const ir::Graph& graph, bool explain) {
  std::string text = fmt::format("steps ({}, GPU):\n", plan.steps.size());
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& s = plan.steps[i];
    std::vector<std::string> outs;
    for (int o : s.outputs) outs.push_back(slot_text(plan.slots[o]));
    text += fmt::format("  {:3}  {:<30} {:<34} -> {:<16} {:<18} {}\n", i, s.label, s.kernel,
                        ir::shape_str(s.output_shape), fmt::join(outs, ","), s.config);
    if (explain) {
      for (const Candidate& c : s.candidates) {
        // The distance from the reference's output, where known (the reference's own line: 0).
        const std::string err = c.error > 0 ? fmt::format("  err {:.1e}", c.error) : c.error == 0 ? "  err 0" : "";
        text += c.median_us >= 0 ? fmt::format("         {:<34} {:9.2f} us{}\n", c.kernel, c.median_us, err)
                                 : fmt::format("         {:<34}  (failed its check{})\n", c.kernel, err);
      }
      for (const std::string& why : s.not_eligible) text += fmt::format("         not eligible: {}\n", why);
    }
  }
  text += fmt::format("\nmemory plan:\n  activation arena {} (one buffer per activation would take {})\n"
                      "  weights          {}\n", human_bytes(plan.arena_bytes), human_bytes(plan.activation_bytes),
                      human_bytes(plan.weight_bytes));
  for (const std::string& note : plan.notes) text += "  note: " + note + "\n";
  (void)graph;
  return text;
}

}  // namespace cnnrt::plan
