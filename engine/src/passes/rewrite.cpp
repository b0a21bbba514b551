#include "passes/rewrite.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "core/error.hpp"
#include "ir/ops.hpp"

namespace cnnrt::passes {

std::vector<std::vector<int>> value_readers(const ir::Graph& graph) {
  std::vector<std::vector<int>> readers(graph.values.size());
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    for (int in : graph.nodes[n].inputs) {
      if (in != ir::kNoValue) readers[in].push_back(static_cast<int>(n));
    }
  }
  return readers;
}

bool is_graph_output(const ir::Graph& graph, int value) {
  return std::find(graph.outputs.begin(), graph.outputs.end(), value) != graph.outputs.end();
}

int sole_reader(const ir::Graph& graph, const std::vector<std::vector<int>>& readers, int value) {
  if (value == ir::kNoValue || is_graph_output(graph, value) || readers[value].size() != 1) return -1;
  return readers[value][0];
}

const ir::Node* producer_of(const ir::Graph& graph, int value) {
  if (value == ir::kNoValue || graph.values[value].is_constant()) return nullptr;
  const int producer = graph.values[value].producer;
  return producer < 0 ? nullptr : &graph.nodes[producer];
}

namespace {

void replace_uses(ir::Graph& graph, int from, int to) {
  for (ir::Node& node : graph.nodes) std::replace(node.inputs.begin(), node.inputs.end(), from, to);
}

}  // namespace

std::optional<std::string> bypass_node(ir::Graph& graph, int index) {
  const ir::Node node = graph.nodes[index];
  const int in = node.input(0);
  const int out = node.outputs.at(0);
  const int producer = graph.values[in].producer;  // -1 for graph inputs and constants
  std::string how;
  if (!is_graph_output(graph, out)) {
    how = fmt::format("its readers read '{}'", graph.values[in].name);
    replace_uses(graph, out, in);
  } else {
    if (producer < 0 || graph.values[in].is_constant() || is_graph_output(graph, in)) return std::nullopt;
    how = fmt::format("{} writes '{}'", log_name(graph.nodes[producer]), graph.values[out].name);
    replace_uses(graph, in, out);
    for (int& o : graph.nodes[producer].outputs) {
      if (o == in) o = out;
    }
  }
  if (producer >= 0) {
    std::vector<std::string>& covers = graph.nodes[producer].covers;
    covers.insert(covers.end(), node.covers.begin(), node.covers.end());
  }
  graph.nodes.erase(graph.nodes.begin() + index);
  graph.relink();
  return how;
}

std::string unique_value_name(const ir::Graph& graph, const std::string& base) {
  std::string name = base;
  for (int suffix = 2; graph.find_value(name) >= 0; ++suffix) name = fmt::format("{}_{}", base, suffix);
  return name;
}

int add_constant(ir::Graph& graph, const std::string& base, ir::HostTensor tensor) {
  ir::Value value;
  value.name = unique_value_name(graph, base);
  value.dtype = tensor.dtype();
  value.shape = tensor.shape();
  value.constant = std::make_shared<const ir::HostTensor>(std::move(tensor));
  return graph.add_value(std::move(value));
}

void replace_nodes(ir::Graph& graph, std::vector<int> covered, ir::Node replacement) {
  std::sort(covered.begin(), covered.end());
  covered.erase(std::unique(covered.begin(), covered.end()), covered.end());
  replacement.covers.clear();
  for (int n : covered) {
    const std::vector<std::string>& covers = graph.nodes[n].covers;
    replacement.covers.insert(replacement.covers.end(), covers.begin(), covers.end());
  }
  const int out = replacement.outputs.at(0);
  const ir::Shape before = graph.shape_of(out);
  const ir::OpInfo* info = ir::find_op(replacement.op);
  CNNRT_CHECK(info != nullptr, ErrorCode::Internal, "no op table entry for {}", replacement.op);
  info->infer(replacement, graph, graph.opset);
  CNNRT_CHECK(graph.shape_of(out) == before, ErrorCode::Internal,
              "{} computes {} where the nodes it replaces computed {}", ir::node_label(replacement),
              ir::shape_str(graph.shape_of(out)), ir::shape_str(before));
  graph.nodes[covered.back()] = std::move(replacement);
  for (size_t i = covered.size() - 1; i-- > 0;) graph.nodes.erase(graph.nodes.begin() + covered[i]);
  graph.relink();
}

std::string log_name(const ir::Node& node) { return fmt::format("{} '{}'", node.op, ir::node_short_name(node)); }

std::optional<std::vector<float>> per_channel_values(const ir::HostTensor& constant, const ir::Shape& out) {
  const ir::Shape& k = constant.shape();
  if (constant.dtype() != ir::DType::Float32 || out.size() < 2 || k.size() > out.size()) return std::nullopt;
  const int64_t channels = out[1];
  const size_t lead = out.size() - k.size();  // axes the constant lacks
  bool per_channel_axis = false;
  for (size_t i = 0; i < k.size(); ++i) {
    const size_t axis = lead + i;
    if (k[i] == 1) continue;
    if (axis != 1 || k[i] != channels) return std::nullopt;
    per_channel_axis = true;
  }
  std::vector<float> values(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) values[c] = constant.f32()[per_channel_axis ? c : 0];
  return values;
}

std::optional<ir::Node> gemm_with_bias(const ir::Graph& graph, const std::vector<std::vector<int>>& readers,
                                       int add_index, int* producer_index) {
  const ir::Node& add = graph.nodes[add_index];
  if (add.op != "Add" || !add.domain.empty() || add.inputs.size() != 2) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    const int product = add.input(side);
    const ir::HostTensor* bias = graph.constant_of(add.input(1 - side));
    const ir::Node* producer = producer_of(graph, product);
    if (producer == nullptr || bias == nullptr || bias->dtype() != ir::DType::Float32) continue;
    if (sole_reader(graph, readers, product) != add_index) continue;
    const bool matmul = producer->op == "MatMul" && graph.shape_of(producer->input(0)).size() == 2 &&
                        graph.shape_of(producer->input(1)).size() == 2;
    const bool gemm = producer->op == "Gemm" && !producer->has_input(2);
    if (!matmul && !gemm) continue;
    const ir::Shape& out = graph.shape_of(product);
    const ir::Shape& c = bias->shape();
    if (c.size() > 2 || graph.shape_of(add.outputs.at(0)) != out) continue;
    bool broadcasts = true;  // unidirectionally to [M, N]
    for (size_t i = 0; i < c.size(); ++i) {
      broadcasts = broadcasts && (c[i] == 1 || c[i] == out[out.size() - c.size() + i]);
    }
    if (!broadcasts) continue;
    ir::Node result = *producer;
    result.op = "Gemm";
    if (matmul) {
      result.attrs = {};
      result.attrs.set("alpha", 1.0f);
      result.attrs.set("transA", int64_t{0});
      result.attrs.set("transB", int64_t{0});
    }
    result.attrs.set("beta", 1.0f);  // a Gemm without C ignores beta
    result.inputs = {producer->input(0), producer->input(1), add.input(1 - side)};
    result.outputs = add.outputs;
    *producer_index = graph.values[product].producer;
    return result;
  }
  return std::nullopt;
}

}  // namespace cnnrt::passes
