#include "plan/gpu/planner.hpp"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <optional>

#include "core/error.hpp"
#include "core/log.hpp"
#include "gpu/device_info.hpp"
#include "ir/fused.hpp"
#include "ir/ops.hpp"
#include "passes/chain_match.hpp"
#include "plan/gpu/lower_chain.hpp"
#include "plan/gpu/lower_net.hpp"
#include "plan/memory_plan.hpp"

namespace cnnrt::plan {

namespace {

int64_t float_bytes(const ir::Shape& shape) { return ir::numel(shape) * static_cast<int64_t>(sizeof(float)); }

struct UnionFind {
  std::vector<int> parent;
  explicit UnionFind(size_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  int find(int x) { return parent[x] == x ? x : parent[x] = find(parent[x]); }
  void unite(int a, int b) { parent[find(a)] = find(b); }
};

LaunchFn device_copy(int64_t bytes) {
  return [bytes](const float* const* in, float* const* out, Stream stream) {
    // Default: either side may be mapped pinned memory (Executor::run_host binds small inputs and outputs there).
    cudaMemcpyAsync(out[0], in[0], static_cast<size_t>(bytes), cudaMemcpyDefault, stream);
  };
}

}  // namespace

int LowerContext::slot(int value) {
  CNNRT_CHECK(value >= 0, ErrorCode::Internal, "lowering asked for an omitted input");
  int& s = value_slots_[value];
  if (s >= 0) return s;
  const ir::Value& v = graph.values[value];
  Slot slot;
  slot.name = v.name;
  if (v.is_constant()) {
    slot.kind = SlotKind::Weight;
    slot.weight = context.weights.upload(*v.constant);
    slot.bytes = v.constant->numel() * static_cast<int64_t>(sizeof(float));
  } else {
    slot.kind = SlotKind::Arena;
    slot.bytes = float_bytes(graph.shape_of(value));
  }
  plan_.slots.push_back(std::move(slot));
  return s = static_cast<int>(plan_.slots.size()) - 1;
}

const float* LowerContext::weight(int value) {
  CNNRT_CHECK(value >= 0 && graph.values[value].is_constant(), ErrorCode::Internal, "'{}' is not a constant",
              value >= 0 ? graph.values[value].name : "(omitted)");
  return plan_.slots[slot(value)].weight;
}

int LowerContext::workspace(int64_t bytes, const std::string& name) {
  Slot slot;
  slot.kind = SlotKind::Arena;
  slot.bytes = bytes;
  slot.name = name;
  plan_.slots.push_back(std::move(slot));
  return static_cast<int>(plan_.slots.size()) - 1;
}

Step LowerContext::make_step(const ir::Node& node, std::string kernel, std::string config, std::vector<int> inputs,
                             std::vector<int> outputs, LaunchFn launch) const {
  Step step;
  step.label = fmt::format("{}", fmt::join(node.covers, "+"));
  step.nodes = node.covers;
  step.op = node.op;
  step.kernel = std::move(kernel);
  step.config = std::move(config);
  step.inputs = std::move(inputs);
  step.outputs = std::move(outputs);
  if (!node.outputs.empty() && node.outputs[0] >= 0 && graph.values[node.outputs[0]].shape) {
    step.output_shape = graph.shape_of(node.outputs[0]);
  }
  step.launch = std::move(launch);
  return step;
}

Step& LowerContext::add_step(const ir::Node& node, std::string kernel, std::string config, std::vector<int> inputs,
                             std::vector<int> outputs, LaunchFn launch) {
  sink_->push_back(make_step(node, std::move(kernel), std::move(config), std::move(inputs), std::move(outputs),
                             std::move(launch)));
  return sink_->back();
}

std::vector<Step> LowerContext::lower_apart(const std::function<void()>& lower) {
  std::vector<Step> apart;
  std::vector<Step>* const saved = sink_;
  sink_ = &apart;
  try {
    lower();
  } catch (...) {
    sink_ = saved;
    throw;
  }
  sink_ = saved;
  return apart;
}

void LowerContext::append_steps(std::vector<Step> steps) {
  for (Step& step : steps) sink_->push_back(std::move(step));
}

namespace {

struct DeviceMemory {
  size_t free_bytes = 0, total_bytes = 0;
};

// The current device's free and total memory; none where the driver cannot say (the checks then pass, and an
// allocation that fails later still names itself).
std::optional<DeviceMemory> device_memory() {
  DeviceMemory m;
  if (cudaMemGetInfo(&m.free_bytes, &m.total_bytes) != cudaSuccess) {
    cudaGetLastError();
    return std::nullopt;
  }
  return m;
}

// The memory a plan needs, checked before anything is measured or allocated (a batch of millions must fail
// at once, not after tuning kernels on buffers that do not fit): the largest intermediate tensor against the
// arena limit, and the largest step's tensors (inputs and outputs included) against the device's memory.
void check_memory_before_planning(const Prepared& prepared, const PlanContext& context) {
  const ir::Graph& g = prepared.graph;
  std::vector<bool> io(g.values.size(), false);
  for (int v : g.inputs) io[static_cast<size_t>(v)] = true;
  for (int v : g.outputs) io[static_cast<size_t>(v)] = true;
  int64_t largest = 0, step_peak = 0;
  for (const ir::Node& node : g.nodes) {
    if (ir::is_view_op(node)) continue;
    int64_t step = 0;
    for (const std::vector<int>* list : {&node.inputs, &node.outputs}) {
      for (int v : *list) {
        if (v < 0 || g.values[static_cast<size_t>(v)].is_constant() || !g.values[static_cast<size_t>(v)].shape) continue;
        const int64_t bytes = float_bytes(g.shape_of(v));
        step += bytes;
        if (!io[static_cast<size_t>(v)]) largest = std::max(largest, bytes);
      }
    }
    step_peak = std::max(step_peak, step);
  }
  const std::string shapes = fmt::format("{}", fmt::join(prepared.input_shapes.empty() ? std::vector<int64_t>{}
                                                                                      : prepared.input_shapes[0], "x"));
  CNNRT_CHECK(largest <= context.options.limits.max_activation_bytes, ErrorCode::LimitExceeded,
              "'{}' needs at least {} bytes of activations for input shapes [{}], over the limit of {} bytes "
              "(Limits::max_activation_bytes; raise it with --max-activation-bytes or use a smaller batch)",
              g.model_name, largest, shapes, context.options.limits.max_activation_bytes);
  const gpu::DeviceInfo& device = context.device;
  CNNRT_CHECK(device.total_memory_bytes == 0 || step_peak <= static_cast<int64_t>(device.total_memory_bytes),
              ErrorCode::LimitExceeded,
              "'{}' needs at least {} bytes of device memory at input shapes [{}]; GPU {} ({}) has {} bytes in all: "
              "use a smaller batch",
              g.model_name, step_peak, shapes, device.ordinal, device.name, device.total_memory_bytes);
  const std::optional<DeviceMemory> memory = device_memory();
  if (!memory) return;
  CNNRT_CHECK(step_peak <= static_cast<int64_t>(memory->free_bytes), ErrorCode::DeviceUnavailable,
              "GPU {} ({}) is out of memory: '{}' needs at least {} bytes at input shapes [{}] and {} bytes are free",
              device.ordinal, device.name, g.model_name, step_peak, shapes, memory->free_bytes);
}

// The arena against the memory free now: a GPU that has it in all but not now cannot run the plan.
void check_free_memory(const GpuPlan& plan, const PlanContext& context, const std::string& model_name) {
  const std::optional<DeviceMemory> memory = device_memory();
  if (!memory) return;
  const gpu::DeviceInfo& device = context.device;
  CNNRT_CHECK(plan.arena_bytes <= static_cast<int64_t>(memory->total_bytes), ErrorCode::LimitExceeded,
              "'{}' needs a {}-byte activation arena; GPU {} ({}) has {} bytes in all: use a smaller batch",
              model_name, plan.arena_bytes, device.ordinal, device.name, memory->total_bytes);
  CNNRT_CHECK(plan.arena_bytes <= static_cast<int64_t>(memory->free_bytes), ErrorCode::DeviceUnavailable,
              "GPU {} ({}) is out of memory: '{}' needs a {}-byte activation arena and {} bytes are free",
              device.ordinal, device.name, model_name, plan.arena_bytes, memory->free_bytes);
}

// A Concat runs in place where its inputs' producers can write straight into their blocks of its output: the
// Concat is then no step at all. At batch 1 (nothing but extents of 1 before the axis) every block is contiguous,
// and any producer writes it. With more before the axis (a channel Concat at batch > 1) a block is strided: image
// n of input k lies at its offset plus n times the outermost Concat output's image. There a block must be written
// so by its producer and read so by its other readers: produced by a convolution without a residual (which writes
// through Epilogue::out_image_floats, in the families that honour it; a fused pooling too, where the pooling
// kernel writes it), a MaxPool or AveragePool, or an in-place Concat (nested: DenseNet's running stack); read,
// besides the Concat, only by BatchNormalizations (whose kernel, and the convolution reading through one, read an
// input image stride). Decided per group of values that share storage (views): a group is a block of one Concat
// at most, and Concats nest (DenseNet: each layer's Concat holds the previous one as its first block). A block
// must start on 64 bytes (kBlockAlignment: more than the 16 bytes that kernels' vector accesses, cp.async and TMA
// need of a pointer; ShuffleNet's later blocks, 120 x 14 x 14 and 240 x 7 x 7 floats in, are not 256-byte aligned,
// the second not 128); graph inputs and outputs (the caller's buffers), constants and an input given twice keep the
// copy.
constexpr int64_t kBlockAlignment = 64;
static_assert(kArenaAlignment % kBlockAlignment == 0, "a buffer's start is a block's start");

struct ConcatsInPlace {
  std::vector<int> parent;              // per group root: the root of the Concat output it is a block of, or -1
  std::vector<int64_t> byte_offset;     // where that block starts in the Concat's output (its first image)
  std::vector<int64_t> image_floats;    // per group root: the floats an image of the buffer it lies in when the
                                        // block is strided (the outermost strided Concat output's), else 0
  std::vector<bool> no_step;            // per node: a Concat that runs in place
  std::vector<std::string> names;       // those Concats, for the plan's notes
};

ConcatsInPlace find_concats_in_place(const ir::Graph& g, UnionFind& groups, const std::vector<int>& group_slot) {
  ConcatsInPlace found;
  found.parent.assign(g.values.size(), -1);
  found.byte_offset.assign(g.values.size(), 0);
  found.image_floats.assign(g.values.size(), 0);
  found.no_step.assign(g.nodes.size(), false);
  auto storable = [&](int v) { return v >= 0 && !g.values[v].is_constant() && g.values[v].shape.has_value(); };
  // Per value: the nodes that read it, and how many values share its storage.
  std::vector<std::vector<int>> readers(g.values.size());
  std::vector<int> group_size(g.values.size(), 0);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (int v : g.nodes[i].inputs) {
      if (v >= 0) readers[static_cast<size_t>(v)].push_back(static_cast<int>(i));
    }
  }
  for (size_t v = 0; v < g.values.size(); ++v) ++group_size[static_cast<size_t>(groups.find(static_cast<int>(v)))];
  std::vector<int64_t> concat_image(g.values.size(), 0);  // per in-place Concat output at batch > 1: its floats an image
  // Whether value v can lie as a strided block of Concat `concat`: see above.
  auto strided_block = [&](int v, int concat) {
    const int p = g.values[static_cast<size_t>(v)].producer;
    if (p < 0 || groups.find(v) != v || group_size[static_cast<size_t>(v)] != 1) return false;
    for (int r : readers[static_cast<size_t>(v)]) {
      const std::string& op = g.nodes[static_cast<size_t>(r)].op;
      if (r != concat && op != "BatchNormalization" && op != ir::fused::kFusedBatchNorm) return false;
    }
    if (std::count(readers[static_cast<size_t>(v)].begin(), readers[static_cast<size_t>(v)].end(), concat) != 1) {
      return false;
    }
    const ir::Node& producer = g.nodes[static_cast<size_t>(p)];
    if (producer.outputs.size() != 1) return false;
    if (producer.op == "Conv" || producer.op == "MaxPool" || producer.op == "AveragePool") return true;
    if (producer.op == ir::fused::kFusedConv) return !producer.has_input(ir::fused::kResidualInput);
    return producer.op == "Concat" && found.no_step[static_cast<size_t>(p)] && concat_image[static_cast<size_t>(v)] != 0;
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& node = g.nodes[i];
    if (node.op != "Concat" || node.outputs.size() != 1 || !storable(node.outputs[0])) continue;
    const ir::Shape& shape = g.shape_of(node.outputs[0]);
    const auto axis = static_cast<size_t>(node.attrs.get_int("axis", 0));
    int64_t outer = 1, inner = 1;
    for (size_t d = 0; d < axis; ++d) outer *= shape[d];
    for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
    const int out_root = groups.find(node.outputs[0]);
    if (group_slot[out_root] >= 0) continue;
    // Strided blocks: only along the channel axis (what an image stride describes).
    const bool strided = outer != 1;
    if (strided && axis != 1) continue;
    std::vector<int> roots;
    std::vector<int64_t> offsets;
    int64_t at = 0;  // along the axis
    for (int v : node.inputs) {
      if (!storable(v)) break;
      const int root = groups.find(v);
      const int64_t bytes = at * inner * static_cast<int64_t>(sizeof(float));
      if (group_slot[root] >= 0 || found.parent[root] >= 0 || root == out_root || bytes % kBlockAlignment != 0 ||
          std::find(roots.begin(), roots.end(), root) != roots.end() ||
          (strided && !strided_block(v, static_cast<int>(i)))) {
        break;
      }
      roots.push_back(root);
      offsets.push_back(bytes);
      at += g.shape_of(v)[axis];
    }
    if (roots.size() != node.inputs.size()) continue;
    for (size_t k = 0; k < roots.size(); ++k) {
      found.parent[roots[k]] = out_root;
      found.byte_offset[roots[k]] = offsets[k];
      if (strided) found.image_floats[roots[k]] = shape[1] * inner;
    }
    if (strided) concat_image[static_cast<size_t>(node.outputs[0])] = shape[1] * inner;
    found.no_step[i] = true;
    found.names.push_back(ir::node_short_name(node));
  }
  // A strided block of a strided block lies in the outer one's buffer: its images are the outermost's apart.
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (found.image_floats[v] == 0) continue;
    int outer = found.parent[v];
    while (found.image_floats[static_cast<size_t>(outer)] != 0) outer = found.parent[static_cast<size_t>(outer)];
    found.image_floats[v] = concat_image[static_cast<size_t>(outer)];
  }
  return found;
}

}  // namespace

std::shared_ptr<GpuPlan> build_gpu_plan(const Prepared& prepared, PlanContext& context) {
  const ir::Graph& g = prepared.graph;
  check_memory_before_planning(prepared, context);
  auto plan = std::make_shared<GpuPlan>();
  plan->device = fmt::format("GPU {}: {}, compute capability {}.{}", context.device.ordinal, context.device.name,
                             context.device.cc_major, context.device.cc_minor);
  const size_t n_values = g.values.size();

  // 1. Views share storage with their source.
  UnionFind groups(n_values);
  std::vector<std::string> views;
  for (const ir::Node& node : g.nodes) {
    if (ir::is_view_op(node) && node.has_input(0) && !g.values[node.input(0)].is_constant()) {
      groups.unite(node.outputs[0], node.input(0));
      views.push_back(ir::node_short_name(node));
    }
  }

  // 2. Graph inputs and outputs get their own slot kinds; the rest of a group shares its slot.
  std::vector<int> group_slot(n_values, -1);
  std::vector<int> value_slots(n_values, -1);
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    Slot s;
    s.kind = SlotKind::Input;
    s.io_index = static_cast<int>(i);
    s.bytes = float_bytes(prepared.input_shapes[i]);
    s.name = g.values[g.inputs[i]].name;
    plan->slots.push_back(s);
    group_slot[groups.find(g.inputs[i])] = static_cast<int>(plan->slots.size()) - 1;
    plan->input_slots.push_back(static_cast<int>(plan->slots.size()) - 1);
  }
  struct OutputCopy {
    int from_value;
    int to_slot;
  };
  std::vector<OutputCopy> output_copies;
  for (size_t j = 0; j < g.outputs.size(); ++j) {
    const int v = g.outputs[j];
    Slot s;
    s.kind = SlotKind::Output;
    s.io_index = static_cast<int>(j);
    s.bytes = float_bytes(prepared.output_shapes[j]);
    s.name = g.values[v].name;
    plan->slots.push_back(s);
    const int slot_id = static_cast<int>(plan->slots.size()) - 1;
    plan->output_slots.push_back(slot_id);
    const int root = groups.find(v);
    if (!g.values[v].is_constant() && group_slot[root] < 0) {
      group_slot[root] = slot_id;  // the producing kernel writes straight into the output buffer
    } else {
      output_copies.push_back({v, slot_id});  // a constant, an input, or a second output of one group
    }
  }
  for (size_t v = 0; v < n_values; ++v) {
    const int root = groups.find(static_cast<int>(v));
    if (group_slot[root] >= 0 && !g.values[v].is_constant()) value_slots[v] = group_slot[root];
  }
  const ConcatsInPlace in_place = find_concats_in_place(g, groups, group_slot);
  // Remaining groups get one arena slot, created on first use and shared by the group's members.
  // A strided block's value is its group's root (writes_strided_block): its image stride is the Concat output's.
  LowerContext lower(g, context, *plan, value_slots, in_place.image_floats);
  for (size_t v = 0; v < n_values; ++v) {
    const int root = groups.find(static_cast<int>(v));
    if (value_slots[v] < 0 && !g.values[v].is_constant() && g.values[v].shape && root != static_cast<int>(v)) {
      value_slots[v] = lower.slot(root);
    }
  }

  // 3. Lower every node that is not a view. A LeNet-class chain (conv, conv, views, Gemm, Gemms) is lowered node by
  // node apart from the plan, and offered with those steps to the one-launch chain kernel: the plan gets
  // whichever measures faster; a dense head (two or three Gemms in a row, or a global average pool and Gemms)
  // likewise to the dense chain kernel, a squeeze-and-excitation gate (pool, two 1x1 convs, Mul) to its kernel, a
  // depthwise convolution with the pointwise one after it to the pair kernel, an inverted residual block (expand,
  // depthwise, gate, project) to the block kernel, against its steps with the gate's and pair's fusions inside, and
  // convolutions of one input whose outputs are concatenated (SqueezeNet's expand layers) to one merged convolution,
  // and a channel shuffle or a BatchNormalization (DenseNet's pre-activation) to the convolution after it, read
  // through the shuffle or the affine; ShuffleNet's shuffle, depthwise and grouped pointwise convolutions to the pair
  // kernel reading through the shuffle, against the shuffled depthwise convolution's steps and the pointwise one's.
  auto lower_node = [&](const ir::Node& node) {
    const LowerFn fn = find_lowering(node.op);
    CNNRT_CHECK(fn != nullptr, ErrorCode::Unsupported, "{}: no GPU kernel for {} (run with --device cpu)",
                ir::node_label(node), node.op);
    try {
      fn(node, lower);
    } catch (const Error& e) {
      rethrow_with_prefix(e, ir::node_label(node));
    }
  };
  std::vector<bool> lowered(g.nodes.size(), false);
  std::vector<BlockStep> block_steps;  // the inverted residual blocks that run on the block kernel
  // For the network kernel, offered the nodes from some node on once all are lowered: where each node's steps
  // start, and whether a node lowered before its turn (fused with an earlier one) lies at or after it.
  NetOffer net;
  net.step_at.assign(g.nodes.size(), 0);
  net.clean_cut.assign(g.nodes.size(), false);
  int furthest_lowered = -1;
  auto mark_lowered = [&](int n) {
    lowered[static_cast<size_t>(n)] = true;
    furthest_lowered = std::max(furthest_lowered, n);
  };
  // Lowers `nodes` apart from the plan and appends what `fuse` makes of their steps (one fused step, or the steps).
  auto lower_fused = [&](const ir::Node& first, const std::vector<int>& nodes, auto&& fuse) {
    std::vector<Step> steps = lower.lower_apart([&] {
      for (int n : nodes) lower_node(g.nodes[static_cast<size_t>(n)]);
    });
    for (int n : nodes) mark_lowered(n);
    try {
      lower.append_steps(fuse(std::move(steps)));
    } catch (const Error& e) {
      rethrow_with_prefix(e, ir::node_label(first));
    }
  };
  // Sibling convolutions joined by a Concat (`s`; `first`, the first of them in graph order): merged where that wins.
  auto lower_siblings = [&](const ir::Node& first, const passes::SiblingConvsMatch& s) {
    const bool in_place_concat = in_place.no_step[static_cast<size_t>(s.concat)];
    std::vector<int> nodes = s.convs;
    if (!in_place_concat) nodes.push_back(s.concat);
    lower_fused(first, nodes, [&](std::vector<Step> steps) {
      return lower_sibling_convs(s, std::move(steps), in_place_concat, lower);
    });
    mark_lowered(s.concat);
  };
  // Whether one of `nodes` writes a strided block of an in-place Concat's output: only the convolution families
  // write those (the block and pair kernels write dense outputs), so such nodes are lowered one by one.
  auto writes_strided_block = [&](const std::vector<int>& nodes) {
    return std::any_of(nodes.begin(), nodes.end(), [&](int n) {
      const std::vector<int>& outputs = g.nodes[static_cast<size_t>(n)].outputs;
      return std::any_of(outputs.begin(), outputs.end(), [&](int v) { return lower.image_floats(v) != 0; });
    });
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& node = g.nodes[i];
    net.step_at[i] = plan->steps.size();
    net.clean_cut[i] = furthest_lowered < static_cast<int>(i);
    if (in_place.no_step[i] || (ir::is_view_op(node) && node.has_input(0) && !g.values[node.input(0)].is_constant())) {
      continue;
    }
    net.nodes.push_back(static_cast<int>(i));
    if (lowered[i]) continue;
    if (const std::optional<passes::InvertedResidualMatch> block = passes::match_inverted_residual(g, static_cast<int>(i));
        block && !writes_strided_block(block->nodes())) {
      // Measured against its nodes' steps with the gate and pair kernels' fusions inside it, where they win.
      std::vector<Step> inner = lower.lower_apart([&] {
        for (int n : block->nodes()) {
          if (lowered[static_cast<size_t>(n)]) continue;
          const ir::Node& member = g.nodes[static_cast<size_t>(n)];
          if (block->gate && n == block->gate->pool) {
            const passes::SqueezeExciteMatch& se = *block->gate;
            lower_fused(member, {se.pool, se.fc1, se.fc2, se.mul},
                        [&](std::vector<Step> steps) { return lower_squeeze_excite(se, std::move(steps), lower); });
            continue;
          }
          const std::optional<passes::DwPwMatch> pair = passes::match_dw_pw(g, n);
          if (pair && pair->pw == block->project) {
            lower_fused(member, {pair->dw, pair->pw},
                        [&](std::vector<Step> steps) { return lower_dw_pw(*pair, std::move(steps), lower); });
            continue;
          }
          lower_node(member);
          mark_lowered(n);
        }
      });
      try {
        lower.append_steps(lower_inverted_residual(*block, std::move(inner), lower, block_steps));
      } catch (const Error& e) {
        rethrow_with_prefix(e, ir::node_label(node));
      }
      continue;
    }
    if (const std::optional<passes::SqueezeExciteMatch> se = passes::match_squeeze_excite(g, static_cast<int>(i))) {
      lower_fused(node, {se->pool, se->fc1, se->fc2, se->mul},
                  [&](std::vector<Step> steps) { return lower_squeeze_excite(*se, std::move(steps), lower); });
      continue;
    }
    if (const std::optional<passes::DwPwMatch> pair = passes::match_dw_pw(g, static_cast<int>(i));
        pair && !writes_strided_block({pair->pw})) {
      lower_fused(node, {pair->dw, pair->pw},
                  [&](std::vector<Step> steps) { return lower_dw_pw(*pair, std::move(steps), lower); });
      continue;
    }
    if (const std::optional<passes::ShuffledDwPwMatch> unit = passes::match_shuffled_dw_pw(g, static_cast<int>(i));
        unit && !lowered[static_cast<size_t>(unit->shuffle.dw)] && !lowered[static_cast<size_t>(unit->pair.pw)] &&
        !writes_strided_block({unit->pair.pw})) {
      // Measured against the shuffled depthwise convolution's steps (where reading through the shuffle wins) and
      // the pointwise convolution's.
      const passes::ShuffledDepthwiseMatch& shuffled = unit->shuffle;
      std::vector<Step> inner = lower.lower_apart([&] {
        lower_fused(node, {shuffled.transpose, shuffled.dw}, [&](std::vector<Step> steps) {
          return lower_shuffled_depthwise(shuffled, std::move(steps), lower);
        });
        lower_node(g.nodes[static_cast<size_t>(unit->pair.pw)]);
        mark_lowered(unit->pair.pw);
      });
      try {
        lower.append_steps(lower_dw_pw(unit->pair, std::move(inner), lower, &shuffled));
      } catch (const Error& e) {
        rethrow_with_prefix(e, ir::node_label(node));
      }
      continue;
    }
    if (const std::optional<passes::ShuffledDepthwiseMatch> shuffled =
            passes::match_shuffled_depthwise(g, static_cast<int>(i));
        shuffled && !lowered[static_cast<size_t>(shuffled->dw)]) {
      lower_fused(node, {shuffled->transpose, shuffled->dw}, [&](std::vector<Step> steps) {
        return lower_shuffled_depthwise(*shuffled, std::move(steps), lower);
      });
      continue;
    }
    if (const std::optional<passes::DenseLayerMatch> layer = passes::match_dense_layer(g, static_cast<int>(i));
        layer && !lowered[static_cast<size_t>(layer->pw)] && !lowered[static_cast<size_t>(layer->conv)]) {
      // Measured against the normalization and 1x1 convolution (read through where that wins) and the 3x3's step.
      std::vector<Step> inner = lower.lower_apart([&] {
        const passes::AffineConvMatch pair{layer->affine, layer->pw};
        lower_fused(node, {pair.affine, pair.conv},
                    [&](std::vector<Step> steps) { return lower_affine_conv(pair, std::move(steps), lower); });
        lower_node(g.nodes[static_cast<size_t>(layer->conv)]);
        mark_lowered(layer->conv);
      });
      try {
        lower.append_steps(lower_dense_layer(*layer, std::move(inner), lower));
      } catch (const Error& e) {
        rethrow_with_prefix(e, ir::node_label(node));
      }
      continue;
    }
    if (const std::optional<passes::AffineConvMatch> affine = passes::match_affine_conv(g, static_cast<int>(i));
        affine && !lowered[static_cast<size_t>(affine->conv)]) {
      lower_fused(node, {affine->affine, affine->conv},
                  [&](std::vector<Step> steps) { return lower_affine_conv(*affine, std::move(steps), lower); });
      continue;
    }
    if (const std::optional<passes::ConvPointwiseMatch> pair = passes::match_conv_pointwise(g, static_cast<int>(i));
        pair && !lowered[static_cast<size_t>(pair->pw)] && !writes_strided_block({pair->pw}) &&
        std::none_of(pair->convs.begin(), pair->convs.end(), [&](int n) { return lowered[static_cast<size_t>(n)]; })) {
      // Measured against the first layer's steps as the plan would run them (siblings merged where that wins) and
      // the 1x1 convolution's.
      const bool in_place_concat = pair->concat >= 0 && in_place.no_step[static_cast<size_t>(pair->concat)];
      std::vector<Step> inner = lower.lower_apart([&] {
        if (pair->concat >= 0) {
          lower_siblings(node, passes::SiblingConvsMatch{pair->convs, pair->concat});
        } else {
          lower_node(node);
          mark_lowered(static_cast<int>(i));
        }
        lower_node(g.nodes[static_cast<size_t>(pair->pw)]);
        mark_lowered(pair->pw);
      });
      try {
        lower.append_steps(lower_conv_pointwise(*pair, std::move(inner), in_place_concat, lower));
      } catch (const Error& e) {
        rethrow_with_prefix(e, ir::node_label(node));
      }
      continue;
    }
    const std::optional<passes::SiblingConvsMatch> siblings = passes::match_sibling_convs(g, static_cast<int>(i));
    if (siblings && std::none_of(siblings->convs.begin(), siblings->convs.end(),
                                 [&](int n) { return lowered[static_cast<size_t>(n)]; })) {
      lower_siblings(node, *siblings);
      continue;
    }
    const std::optional<passes::ConvChainMatch> chain = passes::match_conv_chain(g, static_cast<int>(i));
    if (!chain) {
      std::optional<passes::DenseChainMatch> head = passes::match_dense_chain(g, static_cast<int>(i));
      if (!head) {
        lower_node(node);
        continue;
      }
      head->layers.resize(dense_chain_layers_that_fit(*head, lower));  // the later layers: steps of their own
      std::vector<int> nodes = head->layers;
      if (head->pool >= 0) nodes.insert(nodes.begin(), head->pool);
      if (head->conv < 0) {
        lower_fused(node, nodes,
                    [&](std::vector<Step> steps) { return lower_dense_chain(*head, std::move(steps), lower); });
        continue;
      }
      // Measured against the convolution's step and the pool's dense head as the plan would run it.
      passes::DenseChainMatch pooled = *head;
      pooled.conv = -1;
      std::vector<Step> inner = lower.lower_apart([&] {
        lower_node(node);
        mark_lowered(static_cast<int>(i));
        lower_fused(g.nodes[static_cast<size_t>(head->pool)], nodes,
                    [&](std::vector<Step> steps) { return lower_dense_chain(pooled, std::move(steps), lower); });
      });
      try {
        lower.append_steps(lower_dense_chain(*head, std::move(inner), lower));
      } catch (const Error& e) {
        rethrow_with_prefix(e, ir::node_label(node));
      }
      continue;
    }
    std::vector<Step> steps = lower.lower_apart([&] {
      for (int n : {chain->conv_a, chain->conv_b, chain->dense}) lower_node(g.nodes[static_cast<size_t>(n)]);
    });
    std::vector<Step> tail_steps = lower.lower_apart([&] {
      for (int n : chain->tail) lower_node(g.nodes[static_cast<size_t>(n)]);
    });
    for (int n : {chain->conv_a, chain->conv_b, chain->dense}) mark_lowered(n);
    for (int n : chain->tail) mark_lowered(n);
    try {
      lower.append_steps(lower_conv_chain(*chain, std::move(steps), std::move(tail_steps), lower));
    } catch (const Error& e) {
      rethrow_with_prefix(e, ir::node_label(node));
    }
  }
  // The blocks of in-place Concats, each within its outermost buffer.
  for (size_t v = 0; v < n_values; ++v) {
    if (in_place.parent[v] < 0) continue;
    net.aliases[lower.slot(static_cast<int>(v))] = {lower.slot(in_place.parent[v]), in_place.byte_offset[v]};
  }
  for (auto& [slot, at] : net.aliases) {
    for (auto outer = net.aliases.find(at.first); outer != net.aliases.end(); outer = net.aliases.find(at.first)) {
      at = {outer->second.first, at.second + outer->second.second};
    }
  }
  offer_net_kernel(net, lower, *plan);
  offer_block_chains(block_steps, lower, *plan);
  for (const OutputCopy& copy : output_copies) {
    ir::Node node;
    node.op = "Copy";
    node.covers = {fmt::format("output '{}'", g.values[copy.from_value].name)};
    const int from = lower.slot(copy.from_value);
    lower.add_step(node, "device_copy", "cudaMemcpyAsync", {from}, {copy.to_slot},
                   device_copy(plan->slots[copy.to_slot].bytes));
  }

  // 4. Lifetimes of arena slots -> offsets. A block of an in-place Concat is no buffer of its own: it lies at its
  // offset in the outermost Concat's output.
  for (size_t v = 0; v < n_values; ++v) {
    if (in_place.parent[v] < 0) continue;
    // slot() also creates the slot of an in-place Concat's output that no step reads.
    const int block = lower.slot(static_cast<int>(v));
    const int within = lower.slot(in_place.parent[v]);
    plan->slots[block].within = within;
    plan->slots[block].within_offset = in_place.byte_offset[v];
    if (in_place.image_floats[v] != 0) {
      plan->slots[block].image_stride = in_place.image_floats[v] * static_cast<int64_t>(sizeof(float));
      plan->slots[block].images = g.shape_of(static_cast<int>(v))[0];
    }
  }
  place_arena(*plan);
  CNNRT_CHECK(plan->arena_bytes <= context.options.limits.max_activation_bytes, ErrorCode::LimitExceeded,
              "'{}' needs a {}-byte activation arena for input shapes [{}], over the limit of {} bytes "
              "(Limits::max_activation_bytes; raise it with --max-activation-bytes or use a smaller batch)",
              g.model_name, plan->arena_bytes, fmt::join(prepared.input_shapes.empty() ? std::vector<int64_t>{}
                                                                                       : prepared.input_shapes[0], "x"),
              context.options.limits.max_activation_bytes);
  check_free_memory(*plan, context, g.model_name);
  for (const Slot& s : plan->slots) plan->weight_bytes += s.kind == SlotKind::Weight ? s.bytes : 0;
  if (!views.empty()) plan->notes.push_back(fmt::format("views (no copy): {}", fmt::join(views, ", ")));
  if (!in_place.names.empty()) {
    plan->notes.push_back(fmt::format("concats in place (no copy): {}", fmt::join(in_place.names, ", ")));
  }
  return plan;
}

}  // namespace cnnrt::plan
