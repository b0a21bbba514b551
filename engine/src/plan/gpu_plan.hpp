// The GPU plan: an ordered list of steps, each a kernel launch with its configuration, over tensor slots
// that the executor resolves to device pointers (arena offsets, uploaded weights, or the caller's buffers).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cnnrt/cnnrt.hpp"
#include "ir/graph.hpp"
#include "kernels/layer.hpp"

namespace cnnrt::plan {

enum class SlotKind {
  Arena,   // an activation (or workspace) at `offset` in the context's arena
  Weight,  // a constant uploaded once per model (`weight`)
  Input,   // graph input `io_index`: the caller's device buffer, or the context's copy of a host buffer
  Output,  // graph output `io_index`: likewise
};

struct Slot {
  SlotKind kind = SlotKind::Arena;
  int64_t offset = 0;              // Arena: bytes from the arena base
  const float* weight = nullptr;   // Weight: device pointer owned by the model
  int io_index = -1;               // Input/Output
  int64_t bytes = 0;
  std::string name;                // the IR value, for plans and errors
  // Arena: a block of an in-place Concat lies in another slot's bytes, `within` (the outermost Concat's output), at
  // `within_offset`; -1: a buffer of its own (place_arena).
  int within = -1;
  int64_t within_offset = 0;
  // Arena: a strided block (an in-place Concat's block at batch > 1): its `images` images, bytes / images each, lie
  // `image_stride` bytes apart from `offset` on; 0: its bytes are contiguous.
  int64_t image_stride = 0;
  int64_t images = 1;
};

// Launches one step on `stream`. `in`/`out` hold the resolved device pointers of Step::inputs/outputs.
using LaunchFn = std::function<void(const float* const* in, float* const* out, Stream stream)>;
// The same for inputs in mapped pinned host memory (Step::launch_from_host); `done` is null, or the device
// address of a mapped host word the launch sets to 1 once its outputs are written (Step::signals_done).
using HostLaunchFn = std::function<void(const float* const* in, float* const* out, unsigned* done, Stream stream)>;

struct Candidate {
  std::string kernel;
  double median_us = 0;  // measured on the real shapes; < 0 when it failed its check and was dropped
  double error = -1;     // relative 2-norm distance of its output from the reference's on the tuning inputs (< 0:
                         // not known: it did not run, or was measured before errors were recorded)
};

// A convolution step's layer (geometry and fused epilogue) and weights, kept for `cnnrt bench` to run cuDNN on
// the same layer.
struct ConvStepInfo {
  kernels::ConvLayer layer;
  const float* weights = nullptr;  // device, [F][C / groups][KH][KW]
  int64_t workspace_floats = 0;    // scratch the chosen kernel needs: the step's last input (0: none)
};

// Another kernel that can run a step in place of the one the planner chose: measured on its own within a few percent
// of it (plan/gpu/lower_util.hpp, close_alternatives). The whole plan may run faster with it
// (runtime::measure_plan_choices).
struct StepKernel {
  std::string kernel;
  std::string config;
  LaunchFn launch;
  HostLaunchFn launch_from_host;
  bool signals_done = false;
};

struct Step {
  std::string label;               // "conv1+relu1+pool1"
  std::vector<std::string> nodes;  // the ONNX nodes it covers
  std::string op;                  // IR op it lowers
  std::string kernel;              // the kernel that runs it
  std::string config;              // launch configuration, for `cnnrt plan`
  std::vector<int> inputs;         // slot ids, in the order `launch` expects
  std::vector<int> outputs;
  ir::Shape output_shape;
  double flops = 0;                // useful floating-point operations (multiply-add = 2)
  double min_bytes = 0;            // bytes a perfect kernel moves: inputs read once, outputs written once
  std::vector<Candidate> candidates;  // tuning results, fastest first (cnnrt plan --explain)
  std::vector<std::string> not_eligible;  // "family: why not", for the families that declined the step
  std::shared_ptr<const ConvStepInfo> conv;  // convolution steps only
  // Launched while the step before drains (PDL, where the GPU and the switch allow it); false: launched only
  // once the step before has finished, where the whole network measured faster so (runtime/gpu_executor.hpp).
  bool overlap = true;
  LaunchFn launch;
  // Optional: the launch in a run on the context's mapped pinned buffers (Executor::run_host's in-place path for
  // small inputs and outputs), with the same results wherever its inputs live. It reads graph inputs in mapped
  // memory once where `launch` may read them many times (the chain kernel: every block of a cluster reads the
  // whole image, cheap from L2, not over PCIe), and sets `done` where signals_done says it does.
  HostLaunchFn launch_from_host;
  // launch_from_host sets `done` once its outputs are written: as the plan's last step, writing every graph
  // output, the host waiting for them spins on that word, a microsecond before the stream reports the launch
  // complete.
  bool signals_done = false;
  // A fused step (one launch for several nodes): the steps it replaced, lowered and ready to run, which the
  // planner measured it against. The whole network may run faster with them (runtime::measure_plan_choices).
  std::shared_ptr<const std::vector<Step>> replaced;
  std::vector<StepKernel> alternatives;
  // The first of steps that won alone against fusing them: the fastest fused launch measured close to them (its
  // `replaced` are this step and the ones after it), which the whole network may run faster.
  std::shared_ptr<const Step> fused;
};

struct GpuPlan {
  std::string device;             // "GPU 0: NVIDIA H100 80GB HBM3, compute capability 9.0" (as planned for)
  std::vector<Slot> slots;
  std::vector<Step> steps;
  std::vector<int> input_slots;   // per graph input
  std::vector<int> output_slots;  // per graph output
  int64_t arena_bytes = 0;        // the activation arena one context allocates
  int64_t activation_bytes = 0;   // what one buffer per activation would take
  int64_t weight_bytes = 0;       // uploaded constants this plan reads
  std::vector<std::string> notes; // planner decisions worth showing (tuning cache hits, fallbacks)
  // A captured graph runs the side steps (side_steps) on a second stream; false: every step in order, where the
  // whole plan measured faster so.
  bool side_streams = true;
};

// A step the plan's CUDA graph runs beside the others, on a second stream: it reads and writes nothing that a step
// between `fork` and `join` writes or reads, so it starts once step `fork` is launched (-1: with the first step) and
// step `join` waits for it, while the steps between run on the main stream. ResNet's projection shortcut beside the
// block's first convolution; ShuffleNet's average pool of a stride-2 unit's input beside the unit's convolutions.
struct SideStep {
  size_t step = 0;
  int fork = -1;
  size_t join = 0;
};

// The steps of `plan` that can run beside the others (as above), in order, their spans disjoint (the longest kept
// first): each with at least one other step between its fork and its join, never the last step. Memory is compared
// byte by byte (arena slots by their placed offsets, a strided block image by image, inputs and outputs by index);
// an arena slot that no step writes (a kernel's workspace) is taken as written by each step that is given it.
std::vector<SideStep> side_steps(const GpuPlan& plan);

// Places the arena slots that the steps use: offsets from the steps' lifetimes (memory_plan.hpp), an in-place
// Concat's blocks inside their Concat's output; sets arena_bytes and activation_bytes. The buffers of a step that
// could run beside others (side_steps, with no two buffers sharing bytes) live from its fork to its join, so that
// placing them keeps it a side step.
void place_arena(GpuPlan& plan);

// A change the whole-plan search (runtime::measure_plan_choices) makes to step `step`: another of its kernels
// (Step::alternatives[kernel]); with kernel kUnfuse the steps it replaced (Step::replaced); with kFuse one launch
// for it and the steps after it (Step::fused).
struct StepChange {
  static constexpr int kUnfuse = -1;
  static constexpr int kFuse = -2;
  int step = 0;
  int kernel = kUnfuse;
};

// How many of `plan`'s steps a change covers from its step: a fusion's span, else 1; 0 where it cannot be made
// (no fused launch there, or the steps from there are not the ones it replaces).
size_t change_span(const GpuPlan& plan, const StepChange& change);

// Why `changes` cannot be made to `plan`: a change names no step, no alternative kernel, no fused step or no fusion
// that fits, or two cover one step; "" where they can.
std::string changes_problem(const GpuPlan& plan, const std::vector<StepChange>& changes);

// `plan` with `changes` made (indices of `plan`'s steps), the arena placed anew. Throws where changes_problem names
// a problem.
GpuPlan change_steps(const GpuPlan& plan, const std::vector<StepChange>& changes);

std::string describe_gpu_plan(const GpuPlan& plan, const ir::Graph& graph, bool explain);

}  // namespace cnnrt::plan
