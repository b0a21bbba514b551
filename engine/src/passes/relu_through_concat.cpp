// relu_through_concat: a Relu whose input is non-negative is removed; a Relu that is the only reader of a
// channel Concat moves in front of it, onto the Concat's one input that may be negative, where fuse_activation
// then takes it into that input's producer (a Conv, after fold_batchnorm):
//   Relu(Concat(AveragePool(relu'd x), Conv(...)))  ->  Concat(AveragePool(relu'd x), Relu(Conv(...)))
// ShuffleNet's stride-2 units end so; each Relu there is a whole memory pass of its own on the GPU.
// Non-negative: the output of Relu, Sigmoid, Abs, a Clip whose minimum is a constant >= 0, and a MaxPool,
// AveragePool, global pool or Concat of non-negative values (a pool's window always holds an element of its
// input; an AveragePool's counted padding is zeros). A Concat with more than one input that may be negative, or
// whose such input is read by another node too, stays as it is.
#include <fmt/format.h>

#include <optional>
#include <string>

#include "passes/passes.hpp"
#include "passes/rewrite.hpp"

namespace cnnrt::passes {
namespace {

bool is_default(const ir::Node& node, const char* op) { return node.domain.empty() && node.op == op; }

// Whether `value` is >= 0 (or NaN) by how it is computed, looking through at most `depth` producers.
bool non_negative(const ir::Graph& graph, int value, int depth = 8) {
  if (depth == 0) return false;
  const ir::Node* p = producer_of(graph, value);
  if (p == nullptr || !p->domain.empty() || p->outputs.size() != 1) return false;
  if (p->op == "Relu" || p->op == "Sigmoid" || p->op == "Abs") return true;
  if (p->op == "Clip") {
    // The loader's canonical Clip: min and max as attributes (inputs past the first are gone).
    return !p->has_input(1) && p->attrs.get_float("min", -1.0f) >= 0.0f;
  }
  if (p->op == "MaxPool" || p->op == "AveragePool" || p->op == "GlobalMaxPool" || p->op == "GlobalAveragePool") {
    return non_negative(graph, p->input(0), depth - 1);
  }
  if (p->op == "Concat") {
    for (const int in : p->inputs) {
      if (!non_negative(graph, in, depth - 1)) return false;
    }
    return true;
  }
  return false;
}

bool rewrite_one(ir::Graph& graph, const std::vector<std::vector<int>>& readers, int relu_index,
                 std::vector<std::string>& log) {
  const ir::Node& relu = graph.nodes[relu_index];
  if (!is_default(relu, "Relu") || relu.inputs.size() != 1 || relu.outputs.size() != 1) return false;
  const int in = relu.input(0), out = relu.outputs[0];
  const ir::Node relu_copy = relu;

  // A Relu of a non-negative value: its readers read the value (or its producer writes the graph output).
  if (non_negative(graph, in)) {
    const std::string name = log_name(relu_copy), value = graph.values[in].name;
    const std::optional<std::string> how = bypass_node(graph, relu_index);
    if (!how) return false;
    log.push_back(fmt::format("{} removed ('{}' is not negative): {}", name, value, *how));
    return true;
  }

  // The only reader of a Concat: onto its one input that may be negative.
  const int concat_index = graph.values[in].producer;
  if (concat_index < 0 || !is_default(graph.nodes[concat_index], "Concat")) return false;
  if (sole_reader(graph, readers, in) != relu_index) return false;
  const ir::Node& concat = graph.nodes[concat_index];
  int signed_slot = -1;
  for (size_t i = 0; i < concat.inputs.size(); ++i) {
    if (non_negative(graph, concat.inputs[i])) continue;
    if (signed_slot >= 0) return false;
    signed_slot = static_cast<int>(i);
  }
  if (signed_slot < 0) return false;  // a non-negative Concat: the first case took it
  const int operand = concat.inputs[static_cast<size_t>(signed_slot)];
  // (sole_reader is -1 for a graph output.)
  if (sole_reader(graph, readers, operand) != concat_index || graph.values[operand].is_constant()) return false;
  ir::Value activated = graph.values[operand];
  activated.name = unique_value_name(graph, graph.values[operand].name + "/relu");
  activated.producer = -1;
  activated.dim_params.clear();
  activated.declared.reset();
  activated.constant.reset();
  const int moved = graph.add_value(std::move(activated));
  log.push_back(fmt::format("{} moved before Concat '{}' onto '{}'", log_name(relu_copy),
                            ir::node_short_name(concat), graph.values[operand].name));
  ir::Node& c = graph.nodes[concat_index];
  c.inputs[static_cast<size_t>(signed_slot)] = moved;
  c.outputs[0] = out;  // the Concat writes what the Relu wrote; its own output is left unread
  ir::Node front = relu_copy;
  front.inputs = {operand};
  front.outputs = {moved};
  graph.nodes.erase(graph.nodes.begin() + relu_index);
  graph.nodes.insert(graph.nodes.begin() + concat_index, std::move(front));
  graph.relink();
  return true;
}

}  // namespace

void relu_through_concat(ir::Graph& graph, const Target&, std::vector<std::string>& log) {
  rewrite_until_done(graph, [&](ir::Graph& g, const std::vector<std::vector<int>>& readers, int n) {
    return rewrite_one(g, readers, n, log);
  });
}

}  // namespace cnnrt::passes
