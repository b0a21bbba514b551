// fuse_residual: Add(conv_out, other), where conv_out comes from a Conv (or a FusedConv with no epilogue
// but its bias) that this Add alone reads and both operands have exactly the output's shape, becomes a
// FusedConv with `other` as its residual input (input 3). When the Add's only reader is an activation
// (Relu, LeakyRelu, Clip, Sigmoid, Tanh), that joins too: the fused epilogue is conv + bias, + residual,
// activation, the order of kernels/conv_common.cuh. When both operands qualify, the later convolution
// takes the other as residual. A constant `other` stays an Add.
#include <fmt/format.h>

#include "ir/fused.hpp"
#include "passes/passes.hpp"
#include "passes/rewrite.hpp"

namespace cnnrt::passes {
namespace {

namespace fused = ir::fused;

// True when the output of `conv` can take a residual in its epilogue.
bool takes_residual(const ir::Node& conv) {
  if (conv.op == "Conv") return conv.domain.empty();
  return conv.op == fused::kFusedConv && !conv.has_input(fused::kResidualInput) && !fused::fused_activation(conv) &&
         !fused::has_pool(conv);
}

bool fuse_one(ir::Graph& graph, const std::vector<std::vector<int>>& readers, int add_index,
              std::vector<std::string>& log) {
  const ir::Node& add = graph.nodes[add_index];
  if (add.op != "Add" || !add.domain.empty() || add.inputs.size() != 2 || add.input(0) == add.input(1)) return false;
  const ir::Shape& out = graph.shape_of(add.outputs.at(0));
  int chosen = -1;  // operand slot of the convolution output
  for (int side = 0; side < 2; ++side) {
    const int value = add.input(side);
    const ir::Node* conv = producer_of(graph, value);
    if (conv == nullptr || !takes_residual(*conv) || sole_reader(graph, readers, value) != add_index) continue;
    const int other = add.input(1 - side);
    if (graph.values[other].is_constant() || graph.shape_of(value) != out || graph.shape_of(other) != out) continue;
    if (chosen < 0 || graph.values[value].producer > graph.values[add.input(chosen)].producer) chosen = side;
  }
  if (chosen < 0) return false;
  const int conv_index = graph.values[add.input(chosen)].producer;
  const ir::Node& conv = graph.nodes[conv_index];
  ir::Node result = conv;
  fused::make_fused(result, fused::kFusedConv);
  result.inputs = {conv.input(0), conv.input(1), conv.input(2), add.input(1 - chosen)};
  result.outputs = add.outputs;
  std::vector<int> covered = {conv_index, add_index};
  std::string line = fmt::format("{} + {} with residual '{}'", log_name(conv), log_name(add),
                                 graph.values[add.input(1 - chosen)].name);
  const int act_index = sole_reader(graph, readers, add.outputs[0]);
  if (act_index >= 0) {
    const ir::Node& act = graph.nodes[act_index];
    if (const std::optional<fused::Activation> activation = fused::activation_of(act)) {
      fused::set_fused_activation(result, *activation);
      result.outputs = act.outputs;
      covered.push_back(act_index);
      line += fmt::format(" + {}", log_name(act));
    }
  }
  replace_nodes(graph, covered, std::move(result));
  log.push_back(line + " -> FusedConv");
  return true;
}

}  // namespace

void fuse_residual(ir::Graph& graph, const Target&, std::vector<std::string>& log) {
  rewrite_until_done(graph, [&](ir::Graph& g, const std::vector<std::vector<int>>& readers, int n) {
    return fuse_one(g, readers, n, log);
  });
}

}  // namespace cnnrt::passes
