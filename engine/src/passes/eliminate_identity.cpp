// eliminate_identity: nodes that compute nothing leave the graph, so that the fusions see through them.
//   Identity, Dropout (inference: the canonical node has one output and no mask), a float32 -> float32 Cast,
//   a Pad of zeros on every axis (exporters write one before each AveragePool), and
//   Reshape/Flatten/Squeeze/Unsqueeze whose output shape is the input's: readers read the input instead.
//   A view of a view (Reshape/Flatten/Squeeze/Unsqueeze of one, when it is that view's only reader) becomes
//   one Reshape of the first view's input: exporters' shape chains collapse to one step.
// The GPU planner already aliases every view's output with its input (ir::is_view_op, ir/ops.hpp), so
// views that do change the shape stay as they are: they cost no copy there.
// When the removed node's output is a graph output, the input's producer writes that output instead; a node
// between a graph input (or a constant) and a graph output stays. The input's producer covers the removed
// node's ONNX name from then on.
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string>

#include "passes/passes.hpp"
#include "passes/rewrite.hpp"

namespace cnnrt::passes {
namespace {

bool is_reshape_like(const ir::Node& node) {
  return node.domain.empty() &&
         (node.op == "Reshape" || node.op == "Flatten" || node.op == "Squeeze" || node.op == "Unsqueeze");
}

// A Pad whose pads (the constant input, or the attribute before opset 11) are all zero.
bool pads_nothing(const ir::Graph& graph, const ir::Node& node) {
  if (node.op != "Pad" || !node.domain.empty()) return false;
  std::vector<int64_t> pads;
  if (node.has_input(1)) {
    const ir::HostTensor* given = graph.constant_of(node.input(1));
    if (given == nullptr) return false;
    for (int64_t i = 0; i < given->numel(); ++i) pads.push_back(given->int_at(i));
  } else {
    pads = node.attrs.get_ints("pads", {});
  }
  return std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; });
}

bool computes_nothing(const ir::Graph& graph, const ir::Node& node) {
  const bool zero_pad = pads_nothing(graph, node);
  if (!node.domain.empty() || (node.inputs.size() != 1 && !zero_pad) || node.outputs.size() != 1 ||
      !node.has_input(0)) {
    return false;
  }
  const ir::Value& in = graph.values[node.input(0)];
  const ir::Value& out = graph.values[node.outputs[0]];
  if (in.dtype != out.dtype || !in.shape || !out.shape) return false;
  if (zero_pad) return *in.shape == *out.shape;
  if (node.op == "Identity" || node.op == "Dropout" || node.op == "Cast") return true;
  return is_reshape_like(node) && *in.shape == *out.shape;
}

bool remove_one(ir::Graph& graph, int index, std::vector<std::string>& log) {
  if (!computes_nothing(graph, graph.nodes[index])) return false;
  const std::string name = log_name(graph.nodes[index]);
  const std::optional<std::string> how = bypass_node(graph, index);
  if (!how) return false;
  log.push_back(fmt::format("{} removed: {}", name, *how));
  return true;
}

// view(view(x)) -> Reshape(x), when the inner view's output has no other reader.
bool collapse_views(ir::Graph& graph, const std::vector<std::vector<int>>& readers, int outer_index,
                    std::vector<std::string>& log) {
  const ir::Node& outer = graph.nodes[outer_index];
  if (!is_reshape_like(outer) || outer.inputs.size() != 1) return false;
  const ir::Node* inner = producer_of(graph, outer.input(0));
  if (inner == nullptr || !is_reshape_like(*inner) || inner->inputs.size() != 1) return false;
  if (sole_reader(graph, readers, outer.input(0)) != outer_index) return false;
  ir::Node reshape = *inner;
  reshape.op = "Reshape";
  reshape.attrs = {};
  reshape.outputs = outer.outputs;
  // The target shape as an attribute for Reshape's inference, which reads and then drops it.
  reshape.attrs.set("shape", graph.shape_of(outer.outputs[0]));
  reshape.attrs.set("allowzero", int64_t{1});
  const std::string line = fmt::format("{} + {} -> one Reshape", log_name(*inner), log_name(outer));
  replace_nodes(graph, {graph.values[outer.input(0)].producer, outer_index}, std::move(reshape));
  log.push_back(line);
  return true;
}

}  // namespace

void eliminate_identity(ir::Graph& graph, const Target&, std::vector<std::string>& log) {
  rewrite_until_done(graph, [&](ir::Graph& g, const std::vector<std::vector<int>>& readers, int n) {
    return remove_one(g, n, log) || collapse_views(g, readers, n, log);
  });
}

}  // namespace cnnrt::passes
