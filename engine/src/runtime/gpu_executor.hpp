#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "plan/gpu_plan.hpp"
#include "runtime/executor.hpp"

namespace cnnrt::runtime {

// Runs a GPU plan: one arena, pinned staging for host runs, CUDA-graph replay unless `use_graphs` is off.
std::unique_ptr<Executor> make_gpu_executor(std::shared_ptr<const plan::Prepared> prepared, Stream stream,
                                            bool use_graphs);

// Which steps launch plainly, not overlapped with the step before (plan::Step::overlap). The planner times
// each kernel alone; in the network, a step launched early (PDL) puts its blocks, waiting, wherever the step
// before leaves room, and for some pairs of steps that is slower than waiting for the SMs to empty (on an H100,
// in this search's medians: two plain steps of 10 took vgg_small at batch 1 from 65.7 to 51.0 us; five of 23,
// resnet20 at batch 16 from 224 to 157 us). This measures the whole plan's CUDA graph (the median of
// single runs on random inputs, in a context of its own), flips each step's launch in turn (plain or
// overlapped), first to last, keeps each change that gains more than the noise (0.4%, at least 0.25 us), revisits
// every step in up to three passes (until a pass changes nothing, within 2 s of GPU time), and keeps the result
// only if it beats all-overlapped again in alternating runs. Plans of runs longer than 2 ms or whose first pass
// would take over 2 s are timed once and not searched; plans of fewer than 2 steps, of an arena over 256 MiB (large
// batches, where a launch gap is noise), or run with CNNRT_SYNC_STEPS are not timed at all. One search at a
// time in the process (other GPU work running meanwhile disturbs it, as it disturbs the kernel tuner). Sets
// `plan`'s steps and returns what it chose; where a CUDA call throws, every step overlaps again and the error
// propagates.
struct OverlapChoice {
  std::vector<int> plain_steps;  // ascending step indices
  double overlapped_us = 0;      // a run with every step overlapped
  double chosen_us = 0;          // a run as chosen
  bool measured = false;         // false: not searched (see above); every step overlaps
};
OverlapChoice measure_step_overlap(const std::shared_ptr<plan::GpuPlan>& plan, const std::string& model_name);

// Changes to the planner's choices that make the whole plan faster: a step run by another of its kernels
// (plan::Step::alternatives), a fused step run as the steps it replaced (plan::Step::replaced), or steps that won
// alone run as the fused launch measured close to them (plan::Step::fused). The planner times
// each kernel on its own, and no one way of timing them ranks every choice as the whole network does: back to back,
// a launch with a long reduction gains from the next launch's overlap, which a network's different next step does
// not give it; one replay at a time, others lose what the network gives them (on an H100, ShuffleNet's clustered
// depthwise + pointwise launches beat their two steps alone and lose to them in the network). This measures the
// whole plan's CUDA graph (the median of single runs on random inputs, each trial in an executor of its own), tries
// each option in turn, first step to last (an option replaces the change its step has), keeps each that gains more
// than the noise (0.4%, at least 0.25 us) in three alternating measurements and whose arena stays within
// `max_arena_bytes`, and keeps the result only if it beats the plan as planned again in alternating runs. Plans of
// runs longer than 2 ms, or whose search would take over 3 s, are timed once and not searched; plans without an
// option, of an arena over 256 MiB, or run with CNNRT_SYNC_STEPS are not timed at all. One search at a time in the
// process, with measure_step_overlap's. Apply the choice with plan::change_steps.
struct PlanChoice {
  std::vector<plan::StepChange> changes;  // by ascending step
  double planned_us = 0;                  // a run as planned
  double chosen_us = 0;                   // a run as chosen
  bool measured = false;                  // false: not searched (see above)
};
PlanChoice measure_plan_choices(const plan::GpuPlan& plan, const std::string& model_name, int64_t max_arena_bytes);

// Whether the whole-plan measurements time `plan` at all: not where its arena is over 256 MiB (large batches, where
// a launch gap is noise, and each timing allocates an arena of its own) or run with CNNRT_SYNC_STEPS (no graphs).
bool timed_whole(const plan::GpuPlan& plan);

// Whether captured graphs run side steps (plan::side_steps) on a second stream: unless CNNRT_NO_SIDE_STEPS is set
// to anything but "0" (every step on one stream, in order).
bool side_steps_enabled();

// What a change must gain over a run of `us` microseconds to be kept by these searches: more than run-to-run noise
// (0.4%, at least 0.25 us).
double search_margin(double us);

// Two plans as they stand (their steps' launch choices too), timed in turn three times, each run in an executor of
// its own on random inputs as measure_plan_choices times its trials: the median GPU time of a run of each.
std::pair<double, double> time_plans_alternating(const plan::GpuPlan& a, const plan::GpuPlan& b,
                                                 const std::string& model_name);

// Sets the steps' `overlap` from a choice (a cached one): every step overlaps but those listed.
void apply_step_overlap(plan::GpuPlan& plan, const std::vector<int>& plain_steps);

}  // namespace cnnrt::runtime
