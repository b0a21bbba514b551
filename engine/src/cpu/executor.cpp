#include "cpu/executor.hpp"

#include <algorithm>
#include <cstdint>
#include <new>
#include <optional>
#include <stdexcept>

#include "core/error.hpp"
#include "cpu/ops.hpp"

namespace cnnrt::cpu {
namespace {

using ir::Graph;
using ir::HostTensor;

// Where each value's tensor lives during a run: constants in the graph, inputs with the caller, the rest
// in `computed` from the node that writes it until its last reader has run.
class TensorStore {
 public:
  TensorStore(const Graph& graph, const std::vector<HostTensor>& inputs)
      : graph_(graph), input_slot_(graph.values.size(), -1), computed_(graph.values.size()) {
    for (size_t i = 0; i < graph.inputs.size(); ++i) input_slot_[graph.inputs[i]] = static_cast<int>(i);
    inputs_ = &inputs;
  }

  const HostTensor& get(int id) const {
    if (const HostTensor* constant = graph_.constant_of(id)) return *constant;
    if (input_slot_[id] >= 0) return (*inputs_)[input_slot_[id]];
    CNNRT_CHECK(computed_[id].has_value(), ErrorCode::Internal, "'{}' is read before it is computed or after it "
                "was freed", graph_.values[id].name);
    return *computed_[id];
  }

  HostTensor& allocate(int id) {
    const ir::Value& value = graph_.values[id];
    CNNRT_CHECK(value.shape.has_value(), ErrorCode::Internal, "'{}' has no shape: was the graph bound?", value.name);
    computed_[id].emplace(value.dtype, *value.shape);
    return *computed_[id];
  }

  void release(int id) { computed_[id].reset(); }

 private:
  const Graph& graph_;
  const std::vector<HostTensor>* inputs_ = nullptr;
  std::vector<int> input_slot_;  // value id -> index in `inputs`, -1 for other values
  std::vector<std::optional<HostTensor>> computed_;
};

void check_inputs(const Graph& graph, const std::vector<HostTensor>& inputs) {
  CNNRT_CHECK(inputs.size() == graph.inputs.size(), ErrorCode::InvalidInput, "{} inputs given, the model takes {}",
              inputs.size(), graph.inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ir::Value& declared = graph.values[graph.inputs[i]];
    CNNRT_CHECK(inputs[i].dtype() == declared.dtype, ErrorCode::InvalidInput, "input '{}' has type {}, expected {}",
                declared.name, ir::dtype_name(inputs[i].dtype()), ir::dtype_name(declared.dtype));
    CNNRT_CHECK(declared.shape.has_value() && inputs[i].shape() == *declared.shape, ErrorCode::InvalidInput,
                "input '{}' has shape {}, but the model was bound to {}", declared.name,
                ir::shape_str(inputs[i].shape()), declared.shape ? ir::shape_str(*declared.shape) : "no shape");
  }
}

constexpr size_t kNeverRead = SIZE_MAX;

// For each value, the index of the last node that reads it; graph outputs are read "after" every node.
std::vector<size_t> last_readers(const Graph& graph) {
  std::vector<size_t> last(graph.values.size(), kNeverRead);
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    for (int id : graph.nodes[n].inputs) {
      if (id != ir::kNoValue) last[id] = n;
    }
  }
  for (int id : graph.outputs) last[id] = graph.nodes.size();
  return last;
}

// Bytes of one tensor of this value as the CPU backend stores it (float32 or int64), saturating.
int64_t value_bytes(const ir::Value& value) {
  if (!value.shape) return 0;
  const int64_t count = ir::numel(*value.shape);
  const int64_t elem = value.dtype == ir::DType::Float32 ? 4 : 8;
  return count > INT64_MAX / elem ? INT64_MAX : count * elem;
}

int64_t saturating_add(int64_t a, int64_t b) { return a > INT64_MAX - b ? INT64_MAX : a + b; }

}  // namespace

int64_t peak_activation_bytes(const Graph& graph) {
  const std::vector<size_t> last_reader = last_readers(graph);
  std::vector<bool> held(graph.values.size(), false);  // allocated by a node and not yet released
  int64_t live = 0;
  int64_t peak = 0;
  auto release = [&](int id) {
    if (id == ir::kNoValue || !held[id]) return;
    held[id] = false;
    live -= std::min(live, value_bytes(graph.values[id]));
  };
  // Mirrors run_graph: a node's outputs are allocated while its inputs are still held, then released.
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const ir::Node& node = graph.nodes[n];
    for (int id : node.outputs) {
      if (id == ir::kNoValue) continue;
      held[id] = true;
      live = saturating_add(live, value_bytes(graph.values[id]));
    }
    peak = std::max(peak, live);
    for (int id : node.inputs) {
      if (id != ir::kNoValue && last_reader[id] == n) release(id);
    }
    for (int id : node.outputs) {
      if (id != ir::kNoValue && last_reader[id] == kNeverRead) release(id);
    }
  }
  return peak;
}

std::vector<HostTensor> run_graph(const Graph& graph, const std::vector<HostTensor>& inputs) {
  check_inputs(graph, inputs);
  TensorStore store(graph, inputs);
  const std::vector<size_t> last_reader = last_readers(graph);
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const ir::Node& node = graph.nodes[n];
    try {
      const KernelFn kernel = find_kernel(node.op);
      CNNRT_CHECK(kernel != nullptr, ErrorCode::Internal, "the CPU backend has no kernel for {}", node.op);
      Inputs in;
      for (int id : node.inputs) in.push_back(id == ir::kNoValue ? nullptr : &store.get(id));
      Outputs out;
      for (int id : node.outputs) out.push_back(id == ir::kNoValue ? nullptr : &store.allocate(id));
      kernel(node, in, out);
    } catch (const Error& e) {
      rethrow_with_prefix(e, ir::node_label(node));
    } catch (const std::bad_alloc&) {
      fail(ErrorCode::LimitExceeded, "{}: out of host memory for its outputs", ir::node_label(node));
    } catch (const std::length_error&) {
      fail(ErrorCode::LimitExceeded, "{}: outputs too large for host memory", ir::node_label(node));
    }
    // Free what no later node reads: inputs read for the last time and outputs nobody reads.
    for (int id : node.inputs) {
      if (id != ir::kNoValue && last_reader[id] == n) store.release(id);
    }
    for (int id : node.outputs) {
      if (id != ir::kNoValue && last_reader[id] == kNeverRead) store.release(id);
    }
  }
  std::vector<HostTensor> outputs;
  for (int id : graph.outputs) outputs.push_back(store.get(id));
  return outputs;
}

}  // namespace cnnrt::cpu
