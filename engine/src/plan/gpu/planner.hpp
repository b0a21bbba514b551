// The GPU planner: lowers a prepared graph to steps (kernel + launch configuration per node, measured
// where there is a choice), assigns every tensor a slot (views share their source's), plans the arena.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cnnrt/cnnrt.hpp"
#include "gpu/device_info.hpp"
#include "gpu/weight_store.hpp"
#include "plan/gpu_plan.hpp"
#include "plan/prepared.hpp"

namespace cnnrt::plan {

class Tuner;

struct PlanContext {
  const gpu::DeviceInfo& device;
  gpu::WeightStore& weights;
  const Options& options;
  Tuner* tuner = nullptr;  // measures candidate kernels; nullptr: heuristic choice
};

std::shared_ptr<GpuPlan> build_gpu_plan(const Prepared& prepared, PlanContext& context);

// What lowering functions get: slots for the node's values, weights, and a way to add steps.
class LowerContext {
 public:
  // `image_floats`: per IR value, its buffer's floats an image where the value is a strided block of an in-place
  // Concat's output, else 0 (or empty: none is).
  LowerContext(const ir::Graph& graph_in, PlanContext& context_in, GpuPlan& plan, std::vector<int>& value_slots,
               std::vector<int64_t> image_floats = {})
      : graph(graph_in),
        context(context_in),
        plan_(plan),
        value_slots_(value_slots),
        image_floats_(std::move(image_floats)) {}

  // The slot holding IR value `value` (constants become weight slots, uploaded on first use).
  int slot(int value);
  // Device pointer of a constant input.
  const float* weight(int value);
  // A scratch arena slot live only during the steps of the node being lowered.
  int workspace(int64_t bytes, const std::string& name);
  // A step covering `node`; add_step appends it (to the plan, or to what lower_apart collects).
  Step make_step(const ir::Node& node, std::string kernel, std::string config, std::vector<int> inputs,
                 std::vector<int> outputs, LaunchFn launch) const;
  Step& add_step(const ir::Node& node, std::string kernel, std::string config, std::vector<int> inputs,
                 std::vector<int> outputs, LaunchFn launch);
  // The steps `lower` adds, collected apart from the plan (for a whole-network kernel to be measured against);
  // append_steps puts steps into the plan.
  std::vector<Step> lower_apart(const std::function<void()>& lower);
  void append_steps(std::vector<Step> steps);
  // The floats from one image of `value` to the next where it lies as a strided block of a Concat's output (its
  // producer writes it so, Epilogue::out_image_floats, and its readers read it so, InputPrologue::image_floats),
  // else 0: dense.
  int64_t image_floats(int value) const {
    return value >= 0 && static_cast<size_t>(value) < image_floats_.size() ? image_floats_[static_cast<size_t>(value)] : 0;
  }
  // A slot's description; a line for the plan's notes.
  const Slot& slot_info(int slot) const { return plan_.slots.at(static_cast<size_t>(slot)); }
  void note(std::string text) { plan_.notes.push_back(std::move(text)); }

  const ir::Graph& graph;
  PlanContext& context;

 private:
  GpuPlan& plan_;
  std::vector<int>& value_slots_;
  std::vector<int64_t> image_floats_;
  std::vector<Step>* sink_ = &plan_.steps;  // where add_step appends
};

using LowerFn = void (*)(const ir::Node& node, LowerContext& lower);
// nullptr when no GPU kernel exists for the op (the planner then reports Unsupported, naming the node).
LowerFn find_lowering(std::string_view op);

}  // namespace cnnrt::plan
