// The arena planner: buffers with overlapping lifetimes never share bytes; disjoint ones may. A GPU plan's steps
// changed by the whole-plan search (another kernel, or a fused step's own steps) get an arena placed anew.
#include <doctest/doctest.h>

#include <random>

#include "core/error.hpp"
#include "plan/gpu_plan.hpp"
#include "plan/memory_plan.hpp"

using namespace cnnrt::plan;

namespace {
bool collide(const ArenaPlan& plan, const std::vector<BufferLifetime>& b, size_t i, size_t j) {
  const bool live_together = b[i].first_step <= b[j].last_step && b[j].first_step <= b[i].last_step;
  const bool bytes_together =
      plan.offsets[i] < plan.offsets[j] + b[j].bytes && plan.offsets[j] < plan.offsets[i] + b[i].bytes;
  return live_together && bytes_together;
}
}  // namespace

TEST_CASE("plan_arena reuses the memory of dead tensors in a chain") {
  // A chain a -> b -> c -> d: each tensor dies when the next step has read it.
  std::vector<BufferLifetime> chain = {{1000, 0, 1}, {1000, 1, 2}, {1000, 2, 3}, {1000, 3, 4}};
  const ArenaPlan plan = plan_arena(chain);
  CHECK(plan.arena_bytes == 2 * 1024);  // two live at a time, each rounded up to 256-byte alignment
  CHECK(plan.sum_bytes == 4 * 1024);
  for (size_t i = 0; i < chain.size(); ++i) CHECK(plan.offsets[i] % kArenaAlignment == 0);
}

TEST_CASE("plan_arena never overlaps live buffers (random lifetimes)") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<BufferLifetime> buffers(1 + rng() % 40);
    for (auto& b : buffers) {
      b.bytes = 1 + rng() % 100000;
      b.first_step = static_cast<int>(rng() % 30) - 1;
      b.last_step = b.first_step + static_cast<int>(rng() % 10);
    }
    const ArenaPlan plan = plan_arena(buffers);
    int64_t peak_live = 0;
    for (int step = -1; step < 45; ++step) {
      int64_t live = 0;
      for (const auto& b : buffers) live += (b.first_step <= step && step <= b.last_step) ? b.bytes : 0;
      peak_live = std::max(peak_live, live);
    }
    CHECK(plan.arena_bytes >= peak_live);
    CHECK(plan.arena_bytes <= plan.sum_bytes);
    for (size_t i = 0; i < buffers.size(); ++i) {
      CHECK(plan.offsets[i] + buffers[i].bytes <= plan.arena_bytes);
      for (size_t j = i + 1; j < buffers.size(); ++j) CHECK_FALSE(collide(plan, buffers, i, j));
    }
  }
}

namespace {

Step step_of(const std::string& label, std::vector<int> inputs, std::vector<int> outputs) {
  Step s;
  s.label = label;
  s.inputs = std::move(inputs);
  s.outputs = std::move(outputs);
  return s;
}

Slot arena_slot(int64_t bytes, int within = -1, int64_t within_offset = 0) {
  Slot s;
  s.bytes = bytes;
  s.within = within;
  s.within_offset = within_offset;
  return s;
}

// Slots: 0 input; 1 a (a convolution's output); 2 b and 3 c, the two blocks of 4 (an in-place Concat, c at 4096
// bytes in); 5 a pointwise convolution's output; 6 the output slot.
std::vector<Slot> concat_block_slots() {
  Slot input;
  input.kind = SlotKind::Input;
  input.bytes = 4096;
  Slot output;
  output.kind = SlotKind::Output;
  output.bytes = 1024;
  return {input, arena_slot(4096), arena_slot(4096, 4, 0), arena_slot(4096, 4, 4096), arena_slot(8192),
          arena_slot(2048), output};
}

bool bytes_overlap(const GpuPlan& p, int a, int b) {
  const Slot& x = p.slots[static_cast<size_t>(a)];
  const Slot& y = p.slots[static_cast<size_t>(b)];
  return x.offset < y.offset + y.bytes && y.offset < x.offset + x.bytes;
}

}  // namespace

TEST_CASE("change_steps: a fused step's own steps in its place, their tensors placed; another kernel for a step") {
  // (concat_block_slots: 5 is the fused step's output.)
  GpuPlan plan;
  plan.slots = concat_block_slots();
  const std::vector<Step> replaced = {step_of("left", {1}, {2}), step_of("right", {1}, {3}),
                                      step_of("pointwise", {4}, {5})};
  plan.steps = {step_of("conv", {0}, {1}), step_of("left+right+pointwise", {1}, {5}), step_of("fc", {5}, {6})};
  plan.steps[1].replaced = std::make_shared<const std::vector<Step>>(replaced);
  place_arena(plan);
  // As planned, the Concat's blocks are read and written by no step: only a and the fused output take bytes.
  CHECK(plan.arena_bytes == 4096 + 2048);
  CHECK_THROWS_AS(change_steps(plan, {{0, StepChange::kUnfuse}}), cnnrt::Error);  // not a fused step
  CHECK_THROWS_AS(change_steps(plan, {{0, 0}}), cnnrt::Error);                    // no other kernel
  CHECK_THROWS_AS(change_steps(plan, {{3, StepChange::kUnfuse}}), cnnrt::Error);  // no step 3

  const GpuPlan unfused = change_steps(plan, {{1, StepChange::kUnfuse}});
  REQUIRE(unfused.steps.size() == 5);
  const std::vector<std::string> labels = {"conv", "left", "right", "pointwise", "fc"};
  for (size_t i = 0; i < labels.size(); ++i) CHECK(unfused.steps[i].label == labels[i]);
  // The Concat lives from its first block's write to the pointwise step's read; its blocks lie inside it.
  CHECK(unfused.slots[2].offset == unfused.slots[4].offset);
  CHECK(unfused.slots[3].offset == unfused.slots[4].offset + 4096);
  CHECK_FALSE(bytes_overlap(unfused, 1, 4));  // a is read while the Concat's blocks are written
  CHECK_FALSE(bytes_overlap(unfused, 4, 5));  // the Concat is read while the output is written
  CHECK(unfused.arena_bytes >= 4096 + 8192);
  CHECK(unfused.arena_bytes > plan.arena_bytes);
  // The plan it came from is as it was.
  CHECK(plan.steps.size() == 3);
  CHECK(plan.arena_bytes == 4096 + 2048);
  // No change: the same steps.
  CHECK(change_steps(plan, {}).steps.size() == 3);

  // Another kernel for the first step (its launch and name), and the fused step unfused, in one call.
  int launched = 0;
  StepKernel other;
  other.kernel = "other_conv";
  other.config = "a block a row";
  other.launch = [&launched](const float* const*, float* const*, cnnrt::Stream) { ++launched; };
  plan.steps[0].alternatives = {other};
  const GpuPlan both = change_steps(plan, {{1, StepChange::kUnfuse}, {0, 0}});
  REQUIRE(both.steps.size() == 5);
  CHECK(both.steps[0].kernel == "other_conv");
  CHECK(both.steps[0].config == "a block a row, chosen in the whole plan");
  both.steps[0].launch(nullptr, nullptr, nullptr);
  CHECK(launched == 1);
  CHECK(both.steps[1].label == "left");
  CHECK(both.arena_bytes == unfused.arena_bytes);
  CHECK_THROWS_AS(change_steps(plan, {{0, 1}}), cnnrt::Error);                          // no other kernel 1
  CHECK_THROWS_AS(change_steps(plan, {{0, 0}, {0, StepChange::kUnfuse}}), cnnrt::Error);  // step 0 twice
}

TEST_CASE("change_steps: steps that won alone against a fusion run as its one launch") {
  GpuPlan plan;
  plan.slots = concat_block_slots();
  plan.steps = {step_of("conv", {0}, {1}), step_of("left", {1}, {2}), step_of("right", {1}, {3}),
                step_of("pointwise", {4}, {5}), step_of("fc", {5}, {6})};
  Step fused = step_of("left+right+pointwise", {1}, {5});
  fused.kernel = "wgr_pw";
  fused.replaced = std::make_shared<const std::vector<Step>>(plan.steps.begin() + 1, plan.steps.begin() + 4);
  plan.steps[1].fused = std::make_shared<const Step>(fused);
  place_arena(plan);
  CHECK(change_span(plan, {1, StepChange::kFuse}) == 3);
  CHECK(change_span(plan, {0, StepChange::kFuse}) == 0);
  CHECK(change_span(plan, {1, StepChange::kUnfuse}) == 0);

  const GpuPlan one = change_steps(plan, {{1, StepChange::kFuse}});
  REQUIRE(one.steps.size() == 3);
  CHECK(one.steps[1].kernel == "wgr_pw");
  CHECK(one.steps[2].label == "fc");
  CHECK(one.arena_bytes == 4096 + 2048);  // the Concat's blocks are no one's any more
  CHECK(one.arena_bytes < plan.arena_bytes);
  // Run as one launch, the fused step can be unfused again (what a cached choice on that plan would do).
  CHECK(change_steps(one, {{1, StepChange::kUnfuse}}).steps.size() == 5);

  // No two changes may cover one step; a fusion whose steps are no longer there is refused.
  StepKernel other;
  other.kernel = "other";
  plan.steps[2].alternatives = {other};
  CHECK_THROWS_AS(change_steps(plan, {{1, StepChange::kFuse}, {2, 0}}), cnnrt::Error);
  CHECK(change_steps(plan, {{2, 0}}).steps[2].kernel == "other");
  plan.steps[3].label = "something else";
  CHECK(change_span(plan, {1, StepChange::kFuse}) == 0);
  CHECK_THROWS_AS(change_steps(plan, {{1, StepChange::kFuse}}), cnnrt::Error);
}

namespace {

// A residual block with a projection shortcut, placed. Slots: 0 input; 1 x; 2 the shortcut's output; 3 conv1's; 4 the
// block's; 5 the output slot.
GpuPlan residual_block_plan() {
  GpuPlan plan;
  Slot input, output;
  input.kind = SlotKind::Input;
  output.kind = SlotKind::Output;
  input.bytes = output.bytes = 1024;
  plan.slots = {input, arena_slot(4096), arena_slot(4096), arena_slot(4096), arena_slot(4096), output};
  plan.steps = {step_of("stem", {0}, {1}), step_of("shortcut", {1}, {2}), step_of("conv1", {1}, {3}),
                step_of("conv2+add", {3, 2}, {4}), step_of("fc", {4}, {5})};
  place_arena(plan);
  return plan;
}

}  // namespace

TEST_CASE("side_steps: a residual block's shortcut beside its first convolution; a chain has none") {
  const GpuPlan plan = residual_block_plan();
  std::vector<SideStep> sides = side_steps(plan);
  REQUIRE(sides.size() == 1);
  CHECK(sides[0].step == 1);  // conv1 could go too; the first of equal spans is kept
  CHECK(sides[0].fork == 0);
  CHECK(sides[0].join == 3);

  // A workspace (an arena slot no step writes) counts as written by the step given it: conv1's here lies in the
  // shortcut's output bytes, so the two are not independent.
  GpuPlan scratch = plan;
  scratch.slots.push_back(arena_slot(256));
  scratch.slots.back().offset = scratch.slots[2].offset;
  scratch.steps[2].inputs.push_back(static_cast<int>(scratch.slots.size()) - 1);
  CHECK(side_steps(scratch).empty());

  // The shortcut's output in x's bytes (as an arena would place it, were x dead): it must wait for conv1's read.
  GpuPlan reused = plan;
  reused.slots[2].offset = reused.slots[1].offset;
  CHECK(side_steps(reused).empty());

  // A chain: every step reads what the one before wrote.
  GpuPlan chain;
  chain.slots = {plan.slots[0], arena_slot(4096), arena_slot(4096), arena_slot(4096), plan.slots[5]};  // in, out
  chain.steps = {step_of("a", {0}, {1}), step_of("b", {1}, {2}), step_of("c", {2}, {3}), step_of("d", {3}, {4})};
  place_arena(chain);
  CHECK(side_steps(chain).empty());
}

TEST_CASE("side_steps: a stride-2 unit's pooled input beside the unit's convolutions, into its own Concat block") {
  // concat_block_slots: 0 input; 1 x; 2 and 3 the blocks of 4 (an in-place Concat); 5 the reduced map; 6 output.
  GpuPlan plan;
  plan.slots = concat_block_slots();
  plan.steps = {step_of("stem", {0}, {1}), step_of("reduce", {1}, {5}), step_of("dw+expand", {5}, {3}),
                step_of("avgpool", {1}, {2}), step_of("fc", {4}, {6})};
  place_arena(plan);
  const std::vector<SideStep> sides = side_steps(plan);
  REQUIRE(sides.size() == 1);
  // The pool, beside both convolutions (dw+expand could go beside the pool alone: a shorter span).
  CHECK(sides[0].step == 3);
  CHECK(sides[0].fork == 0);
  CHECK(sides[0].join == 4);
  // Both blocks of the Concat written by one step's two outputs would make them dependent again.
  GpuPlan same_block = plan;
  same_block.steps[3].outputs = {3};
  const std::vector<SideStep> other = side_steps(same_block);
  CHECK(std::none_of(other.begin(), other.end(), [](const SideStep& s) { return s.step == 3; }));
}

TEST_CASE("side_steps: at batch 2 a pooled block beside the convolution writing the other block, image by image") {
  // Slots as concat_block_slots, at two images: the Concat's output holds image 0 of b, image 0 of c, image 1 of b,
  // image 1 of c (4096 bytes each); b and c are strided blocks.
  GpuPlan plan;
  plan.slots = concat_block_slots();
  plan.slots[4].bytes = 4 * 4096;
  for (int block : {2, 3}) {
    plan.slots[static_cast<size_t>(block)].bytes = 2 * 4096;
    plan.slots[static_cast<size_t>(block)].images = 2;
    plan.slots[static_cast<size_t>(block)].image_stride = 2 * 4096;
  }
  plan.steps = {step_of("stem", {0}, {1}), step_of("reduce", {1}, {5}), step_of("dw+expand", {5}, {3}),
                step_of("avgpool", {1}, {2}), step_of("fc", {4}, {6})};
  place_arena(plan);
  std::vector<SideStep> sides = side_steps(plan);
  REQUIRE(sides.size() == 1);
  CHECK(sides[0].step == 3);
  CHECK(sides[0].fork == 0);
  CHECK(sides[0].join == 4);
  // Taken as contiguous, b's 8192 bytes would cover c's first image: the two steps would be ordered.
  GpuPlan contiguous = plan;
  contiguous.slots[2].image_stride = contiguous.slots[3].image_stride = 0;
  sides = side_steps(contiguous);
  CHECK(std::none_of(sides.begin(), sides.end(), [](const SideStep& s) { return s.step == 3; }));
}

TEST_CASE("place_arena: a side step's buffers live from its fork to its join, so no step between reuses them") {
  // Slots as concat_block_slots, and 7 the depthwise output. The pooled block b is written by the last step before
  // fc, so its Concat would start living only at the expand step and could take the bytes of the reduced map,
  // dead by then: the pool would then wait for the depthwise step that reads them.
  GpuPlan plan;
  plan.slots = concat_block_slots();
  plan.slots[5].bytes = 8192;
  plan.slots.push_back(arena_slot(4096));
  plan.steps = {step_of("stem", {0}, {1}),   step_of("reduce", {1}, {5}),   step_of("dw", {5}, {7}),
                step_of("expand", {7}, {3}), step_of("avgpool", {1}, {2}), step_of("fc", {4}, {6})};
  place_arena(plan);
  const std::vector<SideStep> sides = side_steps(plan);
  REQUIRE(sides.size() == 1);
  CHECK(sides[0].step == 4);
  CHECK(sides[0].fork == 0);
  CHECK(sides[0].join == 5);
  for (int other : {5, 7}) CHECK_FALSE(bytes_overlap(plan, 4, other));
}

TEST_CASE("describe_gpu_plan names a side step only where the plan runs side steps beside the others") {
  GpuPlan plan = residual_block_plan();
  const cnnrt::ir::Graph graph;
  CHECK(describe_gpu_plan(plan, graph, false).find("on a second stream") != std::string::npos);
  plan.side_streams = false;
  CHECK(describe_gpu_plan(plan, graph, false).find("on a second stream") == std::string::npos);
}
