// fuse_activation: an activation (Relu, LeakyRelu, Clip, Sigmoid, Tanh, HardSigmoid, HardSwish, Swish, exact
// Gelu) that is the only reader of
//   a Conv, or a FusedConv with no activation and no pool       -> FusedConv with the activation
//   a Gemm, a MatMul of two matrices, or MatMul + bias Add (the bias as in fold_bias_add), or a FusedGemm
//   with no activation                                           -> FusedGemm with the activation
//   a ConvTranspose                                              -> FusedConvTranspose with the activation
//   an inference BatchNormalization (one output; one not folded   -> FusedBatchNormalization with the
//   into a conv, such as DenseNet's after each Concat)               activation
// A pooled FusedConv keeps its activation outside: the pool would have to run after it.
#include <fmt/format.h>

#include "ir/fused.hpp"
#include "passes/passes.hpp"
#include "passes/rewrite.hpp"

namespace cnnrt::passes {
namespace {

namespace fused = ir::fused;

// The fused node computing `producer` (as the producer of the activation's input) then `activation`, or
// nullopt when the producer cannot take it.
std::optional<ir::Node> with_activation(const ir::Graph& graph, const ir::Node& producer,
                                        const fused::Activation& activation) {
  if (!producer.domain.empty() && producer.domain != fused::kDomain) return std::nullopt;
  ir::Node result = producer;
  if (producer.op == "Conv") {
    fused::make_fused(result, fused::kFusedConv);
  } else if (producer.op == fused::kFusedConv) {
    if (fused::fused_activation(producer) || fused::has_pool(producer)) return std::nullopt;
  } else if (producer.op == "Gemm") {
    fused::make_fused(result, fused::kFusedGemm);
  } else if (producer.op == "MatMul" && graph.shape_of(producer.input(0)).size() == 2 &&
             graph.shape_of(producer.input(1)).size() == 2) {
    fused::make_fused(result, fused::kFusedGemm);
    result.attrs = {};
    result.attrs.set("alpha", 1.0f);
    result.attrs.set("beta", 1.0f);
    result.attrs.set("transA", int64_t{0});
    result.attrs.set("transB", int64_t{0});
  } else if (producer.op == fused::kFusedGemm) {
    if (fused::fused_activation(producer)) return std::nullopt;
  } else if (producer.op == "ConvTranspose") {
    fused::make_fused(result, fused::kFusedConvTranspose);
  } else if (producer.op == "BatchNormalization") {
    if (producer.outputs.size() != 1 || producer.attrs.get_int("training_mode", 0) != 0) return std::nullopt;
    fused::make_fused(result, fused::kFusedBatchNorm);
  } else {
    return std::nullopt;
  }
  fused::set_fused_activation(result, activation);
  return result;
}

bool fuse_one(ir::Graph& graph, const std::vector<std::vector<int>>& readers, int act_index,
              std::vector<std::string>& log) {
  const ir::Node& act = graph.nodes[act_index];
  const std::optional<fused::Activation> activation = fused::activation_of(act);
  if (!activation) return false;
  const int x = act.input(0);
  const ir::Node* producer = producer_of(graph, x);
  if (producer == nullptr || sole_reader(graph, readers, x) != act_index) return false;
  std::vector<int> covered = {graph.values[x].producer};
  std::optional<ir::Node> base = *producer;
  int matmul_index = -1;
  if (producer->op == "Add") {
    // MatMul + bias Add + activation: one FusedGemm even when fold_bias_add is off.
    base = gemm_with_bias(graph, readers, covered[0], &matmul_index);
    if (!base) return false;
    covered.push_back(matmul_index);
  }
  std::optional<ir::Node> result = with_activation(graph, *base, *activation);
  if (!result) return false;
  std::vector<std::string> names;
  for (int n : covered) names.push_back(log_name(graph.nodes[n]));
  const std::string line = fmt::format("{} + {} -> {}", fmt::join(names.rbegin(), names.rend(), " + "),
                                       log_name(act), result->op);
  result->outputs = act.outputs;
  covered.push_back(act_index);
  replace_nodes(graph, covered, std::move(*result));
  log.push_back(line);
  return true;
}

}  // namespace

void fuse_activation(ir::Graph& graph, const Target&, std::vector<std::string>& log) {
  rewrite_until_done(graph, [&](ir::Graph& g, const std::vector<std::vector<int>>& readers, int n) {
    return fuse_one(g, readers, n, log);
  });
}

}  // namespace cnnrt::passes
