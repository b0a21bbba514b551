// fold_batchnorm: an inference BatchNormalization that reads a Conv's output (and is that output's only
// reader) becomes part of the convolution: per output channel f, with s = scale[f] / sqrt(var[f] + epsilon),
//   W'[f] = W[f] * s,   B'[f] = (B[f] - mean[f]) * s + bias[f]   (B = 0 when the conv has none).
// W' and B' are new constants; the originals may be shared and stay as they are.
#include <fmt/format.h>

#include <cmath>

#include "passes/passes.hpp"
#include "passes/rewrite.hpp"

namespace cnnrt::passes {
namespace {

bool fold_one(ir::Graph& graph, const std::vector<std::vector<int>>& readers, int bn_index,
              std::vector<std::string>& log) {
  const ir::Node& bn = graph.nodes[bn_index];
  if (bn.op != "BatchNormalization" || !bn.domain.empty() || bn.outputs.size() != 1) return false;
  const ir::Node* conv = producer_of(graph, bn.input(0));
  if (conv == nullptr || conv->op != "Conv" || sole_reader(graph, readers, bn.input(0)) != bn_index) return false;
  const ir::HostTensor* w = graph.constant_of(conv->input(1));
  const ir::HostTensor* b = graph.constant_of(conv->input(2));
  const ir::HostTensor* scale = graph.constant_of(bn.input(1));
  const ir::HostTensor* shift = graph.constant_of(bn.input(2));
  const ir::HostTensor* mean = graph.constant_of(bn.input(3));
  const ir::HostTensor* var = graph.constant_of(bn.input(4));
  if (w == nullptr || scale == nullptr || shift == nullptr || mean == nullptr || var == nullptr) return false;
  const int64_t filters = w->shape()[0];
  for (const ir::HostTensor* p : {scale, shift, mean, var}) {
    if (p->dtype() != ir::DType::Float32 || p->numel() != filters) return false;
  }
  const double epsilon = bn.attrs.get_float("epsilon", 1e-5f);
  const int64_t per_filter = w->numel() / filters;
  ir::HostTensor new_w(ir::DType::Float32, w->shape());
  ir::HostTensor new_b(ir::DType::Float32, {filters});
  for (int64_t f = 0; f < filters; ++f) {
    const double s = scale->f32()[f] / std::sqrt(static_cast<double>(var->f32()[f]) + epsilon);
    for (int64_t i = 0; i < per_filter; ++i) {
      new_w.f32()[f * per_filter + i] = static_cast<float>(w->f32()[f * per_filter + i] * s);
    }
    const double bias = b != nullptr ? b->f32()[f] : 0.0;
    new_b.f32()[f] = static_cast<float>((bias - mean->f32()[f]) * s + shift->f32()[f]);
  }
  ir::Node folded = *conv;
  const std::string line = fmt::format("{} + {} -> Conv with the batch norm in its weights and bias",
                                       log_name(*conv), log_name(bn));
  const std::string bn_name = ir::node_short_name(bn);
  const int new_w_id = add_constant(graph, fmt::format("{}/folded_weights", bn_name), std::move(new_w));
  const int new_b_id = add_constant(graph, fmt::format("{}/folded_bias", bn_name), std::move(new_b));
  folded.inputs = {conv->input(0), new_w_id, new_b_id};  // add_constant grows graph.values, never graph.nodes
  folded.outputs = bn.outputs;
  const int conv_index = graph.values[conv->outputs[0]].producer;
  replace_nodes(graph, {conv_index, bn_index}, std::move(folded));
  log.push_back(line);
  return true;
}

}  // namespace

void fold_batchnorm(ir::Graph& graph, const Target&, std::vector<std::string>& log) {
  rewrite_until_done(graph, [&](ir::Graph& g, const std::vector<std::vector<int>>& readers, int n) {
    return fold_one(g, readers, n, log);
  });
}

}  // namespace cnnrt::passes
