// fold_bias_add: constants that exporters apply after a layer instead of in it.
//   Conv -> Add(per-channel constant k)   B'[f] = B[f] + k[f]                     (CNTK, TensorFlow biases)
//   Conv -> Mul(per-channel constant k)   W'[f] = W[f] * k[f], B'[f] = B[f] * k[f]
//   MatMul (2-D) or C-less Gemm -> Add(constant C broadcasting to [M, N])   Gemm with C
// Per-channel means numpy broadcasting over axis 1 only: [F, 1, 1] or [1, F, 1, 1] (or a single value) for a
// 2-D convolution. A [F] constant broadcasts along the last axis, so it is not a per-channel bias and stays.
// In every case the layer's output must have no other reader. New weights and biases are new constants.
#include <fmt/format.h>

#include "passes/passes.hpp"
#include "passes/rewrite.hpp"

namespace cnnrt::passes {
namespace {

bool fold_into_conv(ir::Graph& graph, const std::vector<std::vector<int>>& readers, int op_index,
                    std::vector<std::string>& log) {
  const ir::Node& op = graph.nodes[op_index];
  const bool is_add = op.op == "Add";
  if ((!is_add && op.op != "Mul") || !op.domain.empty() || op.inputs.size() != 2) return false;
  for (int side = 0; side < 2; ++side) {
    const int conv_out = op.input(side);
    const ir::Node* conv = producer_of(graph, conv_out);
    const ir::HostTensor* k = graph.constant_of(op.input(1 - side));
    if (conv == nullptr || conv->op != "Conv" || k == nullptr) continue;
    if (sole_reader(graph, readers, conv_out) != op_index) continue;
    const ir::Shape& out = graph.shape_of(conv_out);
    if (graph.shape_of(op.outputs.at(0)) != out) continue;
    const std::optional<std::vector<float>> per_channel = per_channel_values(*k, out);
    const ir::HostTensor* w = graph.constant_of(conv->input(1));
    if (!per_channel || w == nullptr) continue;
    const ir::HostTensor* b = graph.constant_of(conv->input(2));
    const int64_t filters = out[1];
    ir::HostTensor new_b(ir::DType::Float32, {filters});
    for (int64_t f = 0; f < filters; ++f) {
      const float bias = b != nullptr ? b->f32()[f] : 0.0f;
      new_b.f32()[f] = is_add ? bias + (*per_channel)[f] : bias * (*per_channel)[f];
    }
    ir::Node folded = *conv;
    const std::string line = fmt::format("{} + {} of '{}' -> Conv with it in its {}", log_name(*conv), log_name(op),
                                         graph.values[op.input(1 - side)].name, is_add ? "bias" : "weights and bias");
    const std::string name = ir::node_short_name(op);
    int weights = conv->input(1);
    if (!is_add) {
      const int64_t per_filter = w->numel() / filters;
      ir::HostTensor new_w(ir::DType::Float32, w->shape());
      for (int64_t i = 0; i < w->numel(); ++i) new_w.f32()[i] = w->f32()[i] * (*per_channel)[i / per_filter];
      weights = add_constant(graph, fmt::format("{}/folded_weights", name), std::move(new_w));
    }
    const int bias = add_constant(graph, fmt::format("{}/folded_bias", name), std::move(new_b));
    folded.inputs = {conv->input(0), weights, bias};
    folded.outputs = op.outputs;
    const int conv_index = graph.values[conv_out].producer;
    replace_nodes(graph, {conv_index, op_index}, std::move(folded));
    log.push_back(line);
    return true;
  }
  return false;
}

bool fold_into_gemm(ir::Graph& graph, const std::vector<std::vector<int>>& readers, int add_index,
                    std::vector<std::string>& log) {
  int producer_index = -1;
  std::optional<ir::Node> gemm = gemm_with_bias(graph, readers, add_index, &producer_index);
  if (!gemm) return false;
  const std::string line = fmt::format("{} + {} -> Gemm with C '{}'", log_name(graph.nodes[producer_index]),
                                       log_name(graph.nodes[add_index]), graph.values[gemm->input(2)].name);
  replace_nodes(graph, {producer_index, add_index}, std::move(*gemm));
  log.push_back(line);
  return true;
}

}  // namespace

void fold_bias_add(ir::Graph& graph, const Target&, std::vector<std::string>& log) {
  rewrite_until_done(graph, [&](ir::Graph& g, const std::vector<std::vector<int>>& readers, int n) {
    return fold_into_conv(g, readers, n, log) || fold_into_gemm(g, readers, n, log);
  });
}

}  // namespace cnnrt::passes
