#include "plan/gpu_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>

#include "core/error.hpp"
#include "plan/memory_plan.hpp"

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
  const std::vector<SideStep> sides = plan.side_streams ? side_steps(plan) : std::vector<SideStep>{};
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& s = plan.steps[i];
    std::vector<std::string> outs;
    for (int o : s.outputs) outs.push_back(slot_text(plan.slots[o]));
    text += fmt::format("  {:3}  {:<30} {:<34} -> {:<16} {:<18} {}\n", i, s.label, s.kernel,
                        ir::shape_str(s.output_shape), fmt::join(outs, ","), s.config);
    for (const SideStep& side : sides) {
      if (side.step == i) {
        text += fmt::format("       on a second stream of the CUDA graph: starts {}, step {} waits for it\n",
                            side.fork < 0 ? std::string("first") : fmt::format("after step {}", side.fork),
                            side.join);
      }
    }
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

namespace {

// A byte range a step reads or writes, in a space: -1 a weight (never written), 0 the placed arena, 1 + 3k graph
// input k, 2 + 3k graph output k, 3 + 3b arena buffer b before placement (offsets within the buffer).
struct Access {
  int space = 0;
  int64_t begin = 0, end = 0;
  bool write = false;
};

bool conflict(const std::vector<Access>& a, const std::vector<Access>& b) {
  for (const Access& x : a) {
    for (const Access& y : b) {
      if ((x.write || y.write) && x.space == y.space && x.begin < y.end && y.begin < x.end) return true;
    }
  }
  return false;
}

// The bytes of a slot from `begin` (its offset in its space): one range, or one an image for a strided block.
void add_ranges(std::vector<Access>& to, const Slot& slot, int space, int64_t begin, bool write) {
  if (slot.image_stride == 0 || slot.images <= 1) {
    to.push_back({space, begin, begin + slot.bytes, write});
    return;
  }
  const int64_t image_bytes = slot.bytes / slot.images;
  for (int64_t n = 0; n < slot.images; ++n) {
    to.push_back({space, begin + n * slot.image_stride, begin + n * slot.image_stride + image_bytes, write});
  }
}

// The accesses of every step, given where each arena slot lies (`space_of`, `begin_of`): inputs and outputs of the
// graph by index, weights never written. An arena slot that no step writes (a kernel's workspace) counts as written
// by each step given it.
template <typename SpaceOf, typename BeginOf>
std::vector<std::vector<Access>> step_accesses(const GpuPlan& plan, SpaceOf space_of, BeginOf begin_of) {
  std::vector<Access> written;
  for (const Step& step : plan.steps) {
    for (int s : step.outputs) {
      const Slot& slot = plan.slots[static_cast<size_t>(s)];
      if (slot.kind == SlotKind::Arena) add_ranges(written, slot, space_of(s), begin_of(s), true);
    }
  }
  const auto add = [&](std::vector<Access>& to, int s, bool write) {
    const Slot& slot = plan.slots[static_cast<size_t>(s)];
    switch (slot.kind) {
      case SlotKind::Weight: to.push_back({-1, 0, 0, false}); return;
      case SlotKind::Input: to.push_back({1 + 3 * slot.io_index, 0, 1, write}); return;
      case SlotKind::Output: to.push_back({2 + 3 * slot.io_index, 0, 1, write}); return;
      case SlotKind::Arena: break;
    }
    std::vector<Access> mine;
    add_ranges(mine, slot, space_of(s), begin_of(s), write);
    const bool scratch = !write && !conflict(mine, written);
    for (Access& a : mine) a.write = write || scratch;
    to.insert(to.end(), mine.begin(), mine.end());
  };
  std::vector<std::vector<Access>> accesses(plan.steps.size());
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    for (int s : plan.steps[i].inputs) add(accesses[i], s, false);
    for (int s : plan.steps[i].outputs) add(accesses[i], s, true);
  }
  return accesses;
}

// side_steps over the steps' accesses (see gpu_plan.hpp).
std::vector<SideStep> choose_side_steps(const std::vector<std::vector<Access>>& accesses) {
  const size_t n = accesses.size();
  if (n < 3) return {};
  std::vector<SideStep> candidates;
  for (size_t j = 0; j + 1 < n; ++j) {
    int fork = -1;
    for (size_t i = j; i-- > 0;) {
      if (conflict(accesses[i], accesses[j])) {
        fork = static_cast<int>(i);
        break;
      }
    }
    size_t join = n - 1;
    for (size_t k = j + 1; k + 1 < n; ++k) {
      if (conflict(accesses[j], accesses[k])) {
        join = k;
        break;
      }
    }
    if (static_cast<int>(join) - fork - 1 >= 2) candidates.push_back({j, fork, join});  // another step beside it
  }
  // The longest spans first (the most steps beside), each kept where its span is disjoint from those kept (one may
  // fork at the step another joins at).
  std::stable_sort(candidates.begin(), candidates.end(), [](const SideStep& a, const SideStep& b) {
    return static_cast<int>(a.join) - a.fork > static_cast<int>(b.join) - b.fork;
  });
  std::vector<SideStep> sides;
  for (const SideStep& c : candidates) {
    if (std::all_of(sides.begin(), sides.end(), [&](const SideStep& s) {
          return c.fork >= static_cast<int>(s.join) || static_cast<int>(c.join) <= s.fork;
        })) {
      sides.push_back(c);
    }
  }
  std::sort(sides.begin(), sides.end(), [](const SideStep& a, const SideStep& b) { return a.step < b.step; });
  return sides;
}

}  // namespace

void place_arena(GpuPlan& plan) {
  // Per slot: the buffer it lies in (itself, or the outermost Concat output) and its offset there. That buffer
  // lives from the first write of any of its blocks to the last read.
  const size_t n_slots = plan.slots.size();
  std::vector<int> buffer_of(n_slots);
  std::vector<int64_t> offset_in_buffer(n_slots, 0);
  for (size_t s = 0; s < n_slots; ++s) {
    int at = static_cast<int>(s);
    for (; plan.slots[at].within >= 0; at = plan.slots[at].within) offset_in_buffer[s] += plan.slots[at].within_offset;
    buffer_of[s] = at;
  }
  std::vector<int> first(n_slots, INT_MAX), last(n_slots, -1);
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    for (const auto* list : {&plan.steps[i].inputs, &plan.steps[i].outputs}) {
      for (int s : *list) {
        const int buffer = buffer_of[s];
        first[buffer] = std::min(first[buffer], static_cast<int>(i));
        last[buffer] = std::max(last[buffer], static_cast<int>(i));
      }
    }
  }
  // A step that a CUDA graph can run beside others (side_steps, compared here buffer by buffer, before any bytes are
  // shared) runs any time from its fork to its join: its buffers live over all of it, so that no step between reuses
  // their bytes and ties it to the order again.
  const auto accesses = step_accesses(
      plan, [&](int s) { return 3 + 3 * buffer_of[static_cast<size_t>(s)]; },
      [&](int s) { return offset_in_buffer[static_cast<size_t>(s)]; });
  for (const SideStep& side : choose_side_steps(accesses)) {
    for (const auto* list : {&plan.steps[side.step].inputs, &plan.steps[side.step].outputs}) {
      for (int s : *list) {
        if (plan.slots[static_cast<size_t>(s)].kind != SlotKind::Arena) continue;
        const int buffer = buffer_of[static_cast<size_t>(s)];
        first[buffer] = std::min(first[buffer], side.fork + 1);
        last[buffer] = std::max(last[buffer], static_cast<int>(side.join) - 1);
      }
    }
  }
  std::vector<int> arena_ids;
  std::vector<BufferLifetime> lifetimes;
  for (size_t s = 0; s < n_slots; ++s) {
    if (plan.slots[s].kind != SlotKind::Arena || buffer_of[s] != static_cast<int>(s) || last[s] < 0) continue;
    arena_ids.push_back(static_cast<int>(s));
    lifetimes.push_back({plan.slots[s].bytes, first[s], last[s]});
  }
  const ArenaPlan arena = plan_arena(lifetimes);
  for (size_t k = 0; k < arena_ids.size(); ++k) plan.slots[arena_ids[k]].offset = arena.offsets[k];
  for (size_t s = 0; s < n_slots; ++s) {
    const int buffer = buffer_of[s];
    if (buffer != static_cast<int>(s)) plan.slots[s].offset = plan.slots[buffer].offset + offset_in_buffer[s];
  }
  plan.arena_bytes = arena.arena_bytes;
  plan.activation_bytes = arena.sum_bytes;
}

std::vector<SideStep> side_steps(const GpuPlan& plan) {
  return choose_side_steps(step_accesses(
      plan, [](int) { return 0; }, [&](int s) { return plan.slots[static_cast<size_t>(s)].offset; }));
}

size_t change_span(const GpuPlan& plan, const StepChange& change) {
  if (change.step < 0 || static_cast<size_t>(change.step) >= plan.steps.size()) return 0;
  const size_t at = static_cast<size_t>(change.step);
  const Step& step = plan.steps[at];
  if (change.kernel == StepChange::kUnfuse) return step.replaced && !step.replaced->empty() ? 1 : 0;
  if (change.kernel >= 0) return static_cast<size_t>(change.kernel) < step.alternatives.size() ? 1 : 0;
  if (change.kernel != StepChange::kFuse || !step.fused || !step.fused->replaced) return 0;
  const std::vector<Step>& replaced = *step.fused->replaced;
  if (replaced.empty() || at + replaced.size() > plan.steps.size()) return 0;
  for (size_t k = 0; k < replaced.size(); ++k) {
    if (plan.steps[at + k].label != replaced[k].label || plan.steps[at + k].kernel != replaced[k].kernel) return 0;
  }
  return replaced.size();
}

std::string changes_problem(const GpuPlan& plan, const std::vector<StepChange>& changes) {
  std::vector<bool> covered(plan.steps.size(), false);
  for (const StepChange& c : changes) {
    const size_t span = change_span(plan, c);
    if (span == 0) return fmt::format("step {} of {} has no change {}", c.step, plan.steps.size(), c.kernel);
    for (size_t k = 0; k < span; ++k) {
      if (covered[static_cast<size_t>(c.step) + k]) {
        return fmt::format("two changes cover step {}", static_cast<size_t>(c.step) + k);
      }
      covered[static_cast<size_t>(c.step) + k] = true;
    }
  }
  return "";
}

GpuPlan change_steps(const GpuPlan& plan, const std::vector<StepChange>& changes) {
  const std::string problem = changes_problem(plan, changes);
  CNNRT_CHECK(problem.empty(), ErrorCode::Internal, "change_steps: {}", problem);
  GpuPlan out = plan;
  // Per step: the change whose span starts there (-1: none).
  std::vector<int> starts(plan.steps.size(), -1);
  for (size_t n = 0; n < changes.size(); ++n) starts[static_cast<size_t>(changes[n].step)] = static_cast<int>(n);
  std::vector<Step> steps;
  for (size_t i = 0; i < plan.steps.size();) {
    if (starts[i] < 0) {
      steps.push_back(std::move(out.steps[i++]));
      continue;
    }
    const StepChange& c = changes[static_cast<size_t>(starts[i])];
    Step& step = out.steps[i];
    if (c.kernel == StepChange::kUnfuse) {
      steps.insert(steps.end(), step.replaced->begin(), step.replaced->end());
      ++i;
    } else if (c.kernel == StepChange::kFuse) {
      steps.push_back(*step.fused);
      i += step.fused->replaced->size();
    } else {
      const StepKernel k = step.alternatives[static_cast<size_t>(c.kernel)];
      step.kernel = k.kernel;
      step.config = k.config.empty() ? "chosen in the whole plan" : k.config + ", chosen in the whole plan";
      step.launch = k.launch;
      step.launch_from_host = k.launch_from_host;
      step.signals_done = k.signals_done;
      steps.push_back(std::move(step));
      ++i;
    }
  }
  out.steps = std::move(steps);
  place_arena(out);
  return out;
}

}  // namespace cnnrt::plan
