#include "runtime/gpu_model.hpp"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <tuple>

#include "core/error.hpp"
#include "core/log.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/device_info.hpp"
#include "gpu/weight_store.hpp"
#include "kernels/launch.cuh"
#include "plan/gpu/planner.hpp"
#include "plan/gpu/tuner.hpp"
#include "runtime/device.hpp"
#include "runtime/gpu_executor.hpp"

namespace cnnrt::runtime {

namespace {

// Whether the environment variable `name` is set to anything but "0".
bool switched_on(const char* name) {
  const char* v = std::getenv(name);
  return v && std::strcmp(v, "0") != 0;
}

// CNNRT_NO_LAUNCH_TUNING=1: every step overlaps the one before, unmeasured (for comparison).
bool launch_tuning_off() { return switched_on("CNNRT_NO_LAUNCH_TUNING"); }

// CNNRT_NO_PLAN_TUNING=1: the planner's kernel and fusion choices stay, unmeasured in the whole plan (for
// comparison).
bool plan_tuning_off() { return switched_on("CNNRT_NO_PLAN_TUNING"); }

// The 64-bit FNV-1a hash of the texts mixed in, each ended by a newline: what the cache keys of whole-plan choices
// carry to tell plans apart.
struct PlanHash {
  uint64_t value = 14695981039346656037ull;
  void operator()(const std::string& text) {
    for (const char c : text + "\n") {
      value ^= static_cast<unsigned char>(c);
      value *= 1099511628211ull;
    }
  }
};

// What identifies a plan's launch sequence for the cache: every step's nodes, kernel and output shape (not its
// config text, which says whether its kernel was measured or came from the cache).
std::string overlap_signature(const plan::GpuPlan& plan) {
  PlanHash mix;
  for (const plan::Step& s : plan.steps) {
    mix(s.label);
    mix(s.kernel);
    mix(fmt::format("{}", fmt::join(s.output_shape, "x")));
  }
  // v2: the search of measure_step_overlap; a change to it (or to where kernels release the next grid)
  // bumps this, so that choices it made before are measured again.
  return fmt::format("launch-overlap-v2|{} steps|{:016x}", plan.steps.size(), mix.value);
}

// What identifies a plan's options for the whole-plan search, for the cache: every step's nodes, kernel and output
// shape, its other kernels, the steps a fused step replaced, and a fusion offered to steps that won alone. The key
// names the steps with options.
std::string plan_choices_signature(const plan::GpuPlan& plan) {
  PlanHash mix;
  const auto mix_step = [&mix](const plan::Step& s) {
    mix(fmt::format("{}|{}|{}", s.label, s.kernel, fmt::join(s.output_shape, "x")));
  };
  std::vector<size_t> fused, other, fusions;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const plan::Step& s = plan.steps[i];
    mix_step(s);
    for (const plan::StepKernel& k : s.alternatives) mix("or " + k.kernel);
    if (s.fused) mix_step(*s.fused);
    if (!s.alternatives.empty()) other.push_back(i);
    if (s.fused) fusions.push_back(i);
    if (!s.replaced) continue;
    fused.push_back(i);
    for (const plan::Step& r : *s.replaced) mix_step(r);
  }
  return fmt::format("plan-choices-v2|{} steps|fused {}|other kernels {}|fusions {}|{:016x}", plan.steps.size(),
                     fmt::join(fused, ","), fmt::join(other, ","), fmt::join(fusions, ","), mix.value);
}

// A cached search result, "changed:3=steps,7=1,9=fused" (step 3 as the steps it replaced, step 7 by its other kernel
// 1, steps 9 on in one launch; "changed:" for none); nullopt for anything else (an entry edited by hand, or written
// by another version).
std::optional<std::vector<plan::StepChange>> parse_changes(const std::string& text) {
  const std::string prefix = "changed:";
  if (text.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  std::vector<plan::StepChange> changes;
  const char* p = text.c_str() + prefix.size();
  while (*p) {
    char* end = nullptr;
    const long step = std::strtol(p, &end, 10);
    if (end == p || step < 0 || *end != '=') return std::nullopt;
    p = end + 1;
    plan::StepChange c;
    c.step = static_cast<int>(step);
    if (std::strncmp(p, "steps", 5) == 0) {
      end = const_cast<char*>(p + 5);
    } else if (std::strncmp(p, "fused", 5) == 0) {
      c.kernel = plan::StepChange::kFuse;
      end = const_cast<char*>(p + 5);
    } else {
      const long kernel = std::strtol(p, &end, 10);
      if (end == p || kernel < 0) return std::nullopt;
      c.kernel = static_cast<int>(kernel);
    }
    if (*end != ',' && *end != '\0') return std::nullopt;
    changes.push_back(c);
    p = *end == ',' ? end + 1 : end;
  }
  return changes;
}

std::string format_changes(const std::vector<plan::StepChange>& changes) {
  std::vector<std::string> parts;
  for (const plan::StepChange& c : changes) {
    parts.push_back(c.kernel == plan::StepChange::kUnfuse ? fmt::format("{}=steps", c.step)
                    : c.kernel == plan::StepChange::kFuse ? fmt::format("{}=fused", c.step)
                                                          : fmt::format("{}={}", c.step, c.kernel));
  }
  return fmt::format("changed:{}", fmt::join(parts, ","));
}

// The step list of a cached choice, "plain:3,7,12" ("plain:" for none); nullopt for anything else (an entry
// edited by hand, or written by another version): it is measured again.
std::optional<std::vector<int>> parse_plain_steps(const std::string& text) {
  const std::string prefix = "plain:";
  if (text.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  std::vector<int> steps;
  const char* p = text.c_str() + prefix.size();
  while (*p) {
    char* end = nullptr;
    const long step = std::strtol(p, &end, 10);
    if (end == p || step < 0 || (*end != ',' && *end != '\0')) return std::nullopt;
    steps.push_back(static_cast<int>(step));
    p = *end == ',' ? end + 1 : end;
  }
  return steps;
}

class GpuModelImpl final : public GpuModel {
 public:
  explicit GpuModelImpl(const Options& options)
      : options_(options), device_(gpu::current_device()), tuner_(plan::make_tuner(options, device_)) {
    plan::check_forced_kernel(options.force_kernel);
    kernels::set_programmatic_launch_for_device(device_.ordinal, device_.arch() >= 90);
    log().info("GPU: {} ({} SMs, compute capability {}.{})", device_.name, device_.sm_count, device_.cc_major,
               device_.cc_minor);
  }

  passes::Target pass_target() const override {
    passes::Target target;
    target.dense_head_kernel = device_.arch() >= 90;  // the dense chain kernel (plan/gpu/lower_chain.cpp)
    return target;
  }

  // The planner's plan, then the whole-plan search's changes to it (measure_plan_choices), each step's launch
  // (measure_step_overlap) and whether side steps run beside the others (choose_side_streams), all cached.
  std::shared_ptr<const plan::GpuPlan> plan(const plan::Prepared& prepared) override {
    std::shared_ptr<plan::GpuPlan> chosen = choose_plan(prepared);
    choose_side_streams(chosen, prepared.graph.model_name);
    return chosen;
  }

  // The search compares plans with every step overlapped, so a changed plan is kept only where, with its own launch
  // choice, it still beats the plan as planned with its own (keep_changes).
  std::shared_ptr<plan::GpuPlan> choose_plan(const plan::Prepared& prepared) {
    plan::PlanContext context{device_, weights_, options_, tuner_.get()};
    std::shared_ptr<plan::GpuPlan> planned = plan::build_gpu_plan(prepared, context);
    const std::string& name = prepared.graph.model_name;
    const FoundChanges found = find_plan_changes(*planned, name);
    if (found.choice.changes.empty()) {
      if (found.how == "measured") remember_plan_changes(found);
      choose_step_overlap(planned, name);
      return planned;
    }
    auto changed = std::make_shared<plan::GpuPlan>(plan::change_steps(*planned, found.choice.changes));
    changed->notes.push_back(describe_changes(*planned, found));
    choose_step_overlap(changed, name);
    if (found.how == "measured" && !keep_changes(planned, changed, name)) {
      remember_plan_changes({found.signature, PlanChoice{{}, found.choice.planned_us, found.choice.planned_us, true},
                             found.how});
      return planned;  // its launch overlap chosen by keep_changes
    }
    if (found.how == "measured") remember_plan_changes(found);
    return changed;
  }

  std::unique_ptr<Executor> make_executor(std::shared_ptr<const plan::Prepared> prepared, Stream stream) override {
    return make_gpu_executor(std::move(prepared), stream, options_.cuda_graphs);
  }

  Stream create_stream() override {
    cudaStream_t stream = nullptr;
    CNNRT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    return stream;
  }

  void destroy_stream(Stream stream) noexcept override {
    if (stream) cudaStreamDestroy(stream);
  }

 private:
  struct FoundChanges {
    std::string signature;
    PlanChoice choice;
    std::string how;  // "measured", "cache", or "" where not searched
  };

  // The whole-plan search's changes to the planner's choices (measure_plan_choices), from the cache when this plan
  // was measured on this device before. Only where measured choices are wanted (tuning on, no forced kernel) and
  // the plan runs as a CUDA graph.
  FoundChanges find_plan_changes(const plan::GpuPlan& plan, const std::string& model_name) {
    const auto has_options = [](const plan::Step& s) { return s.replaced || s.fused || !s.alternatives.empty(); };
    FoundChanges found;
    if (!options_.tuning || !options_.cuda_graphs || !options_.force_kernel.empty() || plan_tuning_off() ||
        std::none_of(plan.steps.begin(), plan.steps.end(), has_options)) {
      return found;
    }
    found.signature = plan_choices_signature(plan);
    const std::optional<plan::CachedChoice> cached = tuner_->recall(found.signature);
    const std::optional<std::vector<plan::StepChange>> cached_changes =
        cached ? parse_changes(cached->kernel) : std::nullopt;
    if (cached_changes && plan::changes_problem(plan, *cached_changes).empty()) {
      found.how = "cache";
      found.choice.changes = *cached_changes;
      for (const auto& [what, us] : cached->timings) {
        (what == "planned" ? found.choice.planned_us : found.choice.chosen_us) = us;
      }
      return found;
    }
    try {
      found.choice = measure_plan_choices(plan, model_name, options_.limits.max_activation_bytes);
    } catch (const std::exception& e) {
      // Only a speed choice: the plan as planned runs as well. A broken CUDA context fails the load's next CUDA
      // call with its own error.
      cudaGetLastError();
      log().warn("'{}': measuring the planner's choices in the whole plan failed ({}); they stay as planned",
                 model_name, e.what());
      return {};
    }
    if (found.choice.measured) found.how = "measured";
    return found;
  }

  void remember_plan_changes(const FoundChanges& found) {
    plan::CachedChoice store;
    store.kernel = format_changes(found.choice.changes);
    store.timings = {{"planned", found.choice.planned_us}, {"chosen", found.choice.chosen_us}};
    tuner_->remember(found.signature, store);
  }

  // The plan's note on what changed (`plan` as planned, before the changes).
  static std::string describe_changes(const plan::GpuPlan& plan, const FoundChanges& found) {
    std::vector<std::string> what;
    for (const plan::StepChange& c : found.choice.changes) {
      const plan::Step& s = plan.steps[static_cast<size_t>(c.step)];
      if (c.kernel == plan::StepChange::kUnfuse) {
        what.push_back(fmt::format("{} as its {} steps", s.label, s.replaced->size()));
      } else if (c.kernel == plan::StepChange::kFuse) {
        what.push_back(fmt::format("{} steps from {} in one launch of {}", s.fused->replaced->size(), s.label,
                                   s.fused->kernel));
      } else {
        what.push_back(fmt::format("{} by {}", s.label, s.alternatives[static_cast<size_t>(c.kernel)].kernel));
      }
    }
    return fmt::format("changed in the whole plan, which runs faster so ({}: a run {:.1f} us, as planned {:.1f} us): "
                       "{}", found.how, found.choice.chosen_us, found.choice.planned_us, fmt::join(what, "; "));
  }

  // The search compares plans with every step overlapped; each plan's own launch choice (choose_step_overlap) can
  // change the order. Whether the changed plan, with its launch choice, still beats the plan as planned with its
  // own, in alternating runs (which sets `planned`'s launch choice too).
  bool keep_changes(const std::shared_ptr<plan::GpuPlan>& planned, const std::shared_ptr<plan::GpuPlan>& changed,
                    const std::string& model_name) {
    choose_step_overlap(planned, model_name);
    try {
      const auto [planned_us, changed_us] = time_plans_alternating(*planned, *changed, model_name);
      return changed_us < planned_us - search_margin(planned_us);
    } catch (const std::exception& e) {
      cudaGetLastError();
      log().warn("'{}': timing the plan's changes failed ({}); they stay", model_name, e.what());
      return true;
    }
  }

  // Which steps launch without overlapping the step before (measure_step_overlap), from the cache when this
  // launch sequence was measured on this device before. Only where overlapping is possible and measured
  // choices are wanted: PDL on, CUDA graphs on, tuning on.
  void choose_step_overlap(const std::shared_ptr<plan::GpuPlan>& plan, const std::string& model_name) {
    if (!options_.tuning || !options_.cuda_graphs || launch_tuning_off() || !kernels::programmatic_launch() ||
        plan->steps.size() < 2) {
      return;
    }
    const std::string signature = overlap_signature(*plan);
    OverlapChoice choice;
    std::string how = "measured";
    const std::optional<plan::CachedChoice> cached = tuner_->recall(signature);
    const std::optional<std::vector<int>> cached_steps = cached ? parse_plain_steps(cached->kernel) : std::nullopt;
    if (cached_steps) {
      how = "cache";
      choice.plain_steps = *cached_steps;
      for (const auto& [what, us] : cached->timings) {
        (what == "overlapped" ? choice.overlapped_us : choice.chosen_us) = us;
      }
      apply_step_overlap(*plan, choice.plain_steps);
    } else {
      try {
        choice = measure_step_overlap(plan, model_name);
      } catch (const std::exception& e) {
        // Only a speed choice: the plan runs as well with every step overlapped (as the search leaves it). A
        // broken CUDA context fails the load's next CUDA call with its own error.
        cudaGetLastError();
        log().warn("'{}': measuring which steps to launch plainly failed ({}); every step overlaps", model_name,
                   e.what());
        return;
      }
      if (choice.overlapped_us <= 0) return;  // not timed (see measure_step_overlap)
      plan::CachedChoice store;
      store.kernel = fmt::format("plain:{}", fmt::join(choice.plain_steps, ","));
      store.timings = {{"overlapped", choice.overlapped_us}, {"chosen", choice.chosen_us}};
      tuner_->remember(signature, store);
    }
    if (choice.plain_steps.empty()) return;
    plan->notes.push_back(fmt::format(
        "steps launched without overlapping the step before ({}: a run {:.1f} us, all overlapped {:.1f} us): {}", how,
        choice.chosen_us, choice.overlapped_us, fmt::join(choice.plain_steps, ", ")));
  }

  // Whether the plan's side steps (plan::side_steps) run on a second stream of its graph or in order: both timed in
  // alternating runs (time_plans_alternating), in order kept only where it gains more than the noise (search_margin),
  // the choice cached per launch sequence. Only where there are side steps and measured choices are wanted.
  void choose_side_streams(const std::shared_ptr<plan::GpuPlan>& plan, const std::string& model_name) {
    if (!options_.tuning || !options_.cuda_graphs || !side_steps_enabled() || plan_tuning_off() ||
        !timed_whole(*plan) || plan::side_steps(*plan).empty()) {
      return;
    }
    PlanHash mix;
    mix(overlap_signature(*plan));
    for (const plan::Step& s : plan->steps) mix(s.overlap ? "overlapped" : "plain");
    const std::string signature = fmt::format("side-streams-v1|{} steps|{:016x}", plan->steps.size(), mix.value);
    double beside_us = 0, in_order_us = 0;
    std::string how = "cache";
    const std::optional<plan::CachedChoice> cached = tuner_->recall(signature);
    if (cached && (cached->kernel == "beside" || cached->kernel == "in order")) {
      plan->side_streams = cached->kernel == "beside";
      for (const auto& [what, us] : cached->timings) (what == "beside" ? beside_us : in_order_us) = us;
    } else {
      plan::GpuPlan in_order = *plan;
      in_order.side_streams = false;
      try {
        std::tie(beside_us, in_order_us) = time_plans_alternating(*plan, in_order, model_name);
      } catch (const std::exception& e) {
        cudaGetLastError();
        log().warn("'{}': timing the plan's side steps failed ({}); they run beside the others", model_name,
                   e.what());
        return;
      }
      how = "measured";
      plan->side_streams = !(in_order_us < beside_us - search_margin(beside_us));
      plan::CachedChoice store;
      store.kernel = plan->side_streams ? "beside" : "in order";
      store.timings = {{"beside", beside_us}, {"in order", in_order_us}};
      tuner_->remember(signature, store);
    }
    plan->notes.push_back(plan->side_streams
                              ? fmt::format("side steps beside the others ({}: a run {:.1f} us, in order {:.1f} us)",
                                            how, beside_us, in_order_us)
                              : fmt::format("side steps in order ({}: a run {:.1f} us, beside the others {:.1f} us)",
                                            how, in_order_us, beside_us));
  }

  Options options_;
  const gpu::DeviceInfo& device_;
  gpu::WeightStore weights_;
  std::unique_ptr<plan::Tuner> tuner_;
};

}  // namespace

std::shared_ptr<GpuModel> GpuModel::create(const Options& options) {
  std::string why;
  CNNRT_CHECK(cuda_device_available(&why), ErrorCode::DeviceUnavailable, "no usable CUDA device: {}", why);
  return std::make_shared<GpuModelImpl>(options);
}

}  // namespace cnnrt::runtime
