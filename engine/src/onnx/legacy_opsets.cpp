#include "onnx/legacy_opsets.hpp"

#include <fmt/format.h>

#include <set>

namespace cnnrt::onnx_io {

namespace {

const std::set<std::string> kLegacyBroadcastOps = {"Add", "Sub", "Mul", "Div", "Pow", "And", "Or", "Xor",
                                                    "Equal", "Greater", "Less"};

// Rank of a value known before shape inference: constants and graph inputs with declared shapes.
int known_rank(const ir::Graph& graph, int value, const std::unordered_map<int, ir::Shape>& declared) {
  if (value < 0) return -1;
  if (graph.values[value].is_constant()) return graph.values[value].constant->rank();
  auto it = declared.find(value);
  return it == declared.end() ? -1 : static_cast<int>(it->second.size());
}

// Legacy broadcast aligns B's dims with A's starting at `axis`; numpy aligns trailing dims. Appending
// ones to a constant B makes the two agree.
void upgrade_axis_broadcast(ir::Node& node, ir::Graph& graph, const std::unordered_map<int, ir::Shape>& declared,
                            std::vector<std::string>& issues) {
  const int64_t axis = node.attrs.get_int("axis", -1);
  const int rank_a = known_rank(graph, node.input(0), declared);
  const int b = node.input(1);
  const int rank_b = known_rank(graph, b, declared);
  if (rank_a < 0 || rank_b < 0) {
    issues.push_back(fmt::format("legacy broadcast with axis={} needs both operand ranks at load time", axis));
    return;
  }
  const int64_t start = axis < 0 ? axis + rank_a : axis;
  const int64_t trailing = rank_a - start - rank_b;
  if (start < 0 || trailing < 0) {
    issues.push_back(fmt::format("legacy broadcast axis {} does not fit ranks {} and {}", axis, rank_a, rank_b));
    return;
  }
  if (trailing == 0) return;  // already aligned at the end: numpy agrees
  if (!graph.values[b].is_constant()) {
    issues.push_back(fmt::format("legacy broadcast with axis={} of a run-time operand is not supported", axis));
    return;
  }
  ir::HostTensor reshaped = *graph.values[b].constant;
  ir::Shape shape = reshaped.shape();
  shape.insert(shape.end(), static_cast<size_t>(trailing), 1);
  reshaped.reshape(shape);
  ir::Value v;
  v.name = graph.values[b].name + "/legacy_broadcast_" + std::to_string(node.onnx_index);
  v.dtype = reshaped.dtype();
  v.shape = shape;
  v.constant = std::make_shared<const ir::HostTensor>(std::move(reshaped));
  node.inputs[1] = graph.add_value(std::move(v));
}

// PRelu before opset 7 applies a slope of shape [C] per channel (axis 1); opset 7 broadcasts numpy-style
// from the last axis. Reshaping the constant slope to [C, 1, ..., 1] keeps the old meaning.
void upgrade_channel_slope(ir::Node& node, ir::Graph& graph, const std::unordered_map<int, ir::Shape>& declared,
                           std::vector<std::string>& issues) {
  const int slope = node.input(1);
  if (slope < 0 || !graph.values[slope].is_constant()) return;
  const ir::HostTensor& s = *graph.values[slope].constant;
  if (s.rank() != 1 || s.numel() == 1) return;
  const int rank_x = known_rank(graph, node.input(0), declared);
  if (rank_x < 0) {
    issues.push_back("a per-channel PRelu slope (opset 6) needs the input's rank at load time");
    return;
  }
  if (rank_x < 3) return;  // [N, C]: the last axis is the channel axis; numpy agrees
  ir::HostTensor reshaped = s;
  ir::Shape shape = {s.numel()};
  shape.insert(shape.end(), static_cast<size_t>(rank_x - 2), 1);
  reshaped.reshape(shape);
  ir::Value v;
  v.name = graph.values[slope].name + "/channel_slope_" + std::to_string(node.onnx_index);
  v.dtype = reshaped.dtype();
  v.shape = shape;
  v.constant = std::make_shared<const ir::HostTensor>(std::move(reshaped));
  node.inputs[1] = graph.add_value(std::move(v));
}

}  // namespace

void upgrade_legacy_node(ir::Node& node, ir::Graph& graph, int64_t file_opset,
                         const std::unordered_map<int, ir::Shape>& declared_input_dims,
                         std::vector<std::string>& issues) {
  if (file_opset >= 7) return;
  node.attrs.erase("consumed_inputs");
  if (kLegacyBroadcastOps.count(node.op) || node.op == "Gemm") {
    if (node.op != "Gemm" && node.attrs.get_int("broadcast", 0) != 0 && node.attrs.has("axis")) {
      upgrade_axis_broadcast(node, graph, declared_input_dims, issues);
    }
    node.attrs.erase("broadcast");
    if (node.op != "Gemm") node.attrs.erase("axis");
  }
  if (node.op == "PRelu") upgrade_channel_slope(node, graph, declared_input_dims, issues);
  if (node.op == "BatchNormalization" || node.op == "Dropout") {
    if (node.attrs.has("is_test") && node.attrs.get_int("is_test", 0) == 0) {
      issues.push_back("is_test=0 (training mode) is not supported; cnnrt runs inference");
    }
    node.attrs.erase("is_test");
  }
  if (node.op == "BatchNormalization") {
    if (node.attrs.get_int("spatial", 1) != 1) issues.push_back("spatial=0 is not supported");
    node.attrs.erase("spatial");
  }
}

}  // namespace cnnrt::onnx_io
