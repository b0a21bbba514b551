// What the rewriting passes share: who reads a value, adding constants, and replacing a chain of nodes by
// one node that covers them all. Internal to engine/src/passes.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/graph.hpp"

namespace cnnrt::passes {

// For each value, the indices of the nodes that read it (a node reading it twice is listed twice).
std::vector<std::vector<int>> value_readers(const ir::Graph& graph);

bool is_graph_output(const ir::Graph& graph, int value);

// The one node that reads `value`, when exactly one node reads it exactly once and it is no graph output:
// the condition for folding its producer into that reader. -1 otherwise.
int sole_reader(const ir::Graph& graph, const std::vector<std::vector<int>>& readers, int value);

// The node that produces `value`; nullptr for inputs, constants and absent values.
const ir::Node* producer_of(const ir::Graph& graph, int value);

// `base`, or `base` with the first suffix _2, _3, ... that no value of the graph has yet.
std::string unique_value_name(const ir::Graph& graph, const std::string& base);

// Adds a new float32 constant named after `base` (made unique) and returns its id. The constants a pass
// rewrites are never changed in place: another node may share them.
int add_constant(ir::Graph& graph, const std::string& base, ir::HostTensor tensor);

// Replaces the nodes `covered` (indices into graph.nodes) by `replacement`, which takes the place of the last
// of them (its inputs are all produced by then; its name is the caller's choice) and covers the ONNX nodes of
// all of them, in order. Runs the replacement's shape inference and checks that its output shape is the one
// the chain produced. Relinks.
void replace_nodes(ir::Graph& graph, std::vector<int> covered, ir::Node replacement);

// Removes node `index`, whose one output holds the same values as its input (an Identity; a Relu of a value that
// cannot be negative): its readers read the input instead, or, where the output is a graph output, the input's
// producer writes it. That producer covers the removed node from then on (plans and profiles name it). Returns how
// ("its readers read 'x'", "Conv 'c' writes 'y'"), or nullopt, the graph unchanged, where neither is possible (a
// graph input or constant straight to a graph output, or an input that is a graph output too). Relinks.
std::optional<std::string> bypass_node(ir::Graph& graph, int index);

// Offers every node, in order, to `try_rewrite(graph, readers, node_index) -> bool`; after a rewrite (true)
// the readers are recomputed and the scan starts over, until a whole scan rewrites nothing.
template <class TryRewrite>
void rewrite_until_done(ir::Graph& graph, TryRewrite try_rewrite) {
  for (bool rewritten = true; rewritten;) {
    rewritten = false;
    const std::vector<std::vector<int>> readers = value_readers(graph);
    for (size_t n = 0; n < graph.nodes.size() && !rewritten; ++n) {
      rewritten = try_rewrite(graph, readers, static_cast<int>(n));
    }
  }
}

// "Conv 'conv1'": how a log line names a node.
std::string log_name(const ir::Node& node);

// Values of a constant that is per-channel for a tensor of shape `out` ([N, C, ...]) under numpy
// broadcasting: after right-aligning, every dim is 1 except axis 1, which is C or 1. Returns C values
// (a broadcast single value repeated); nullopt for any other shape or a non-float constant.
// Note a [C] constant is not per-channel for a rank >= 3 tensor: numpy aligns it with the last axis.
std::optional<std::vector<float>> per_channel_values(const ir::HostTensor& constant, const ir::Shape& out);

// When node `add_index` is Add(P, C) or Add(C, P), where P is the output of a MatMul of two matrices or of a
// Gemm without C, only this Add reads P, and C is a float constant that broadcasts to [M, N] without changing
// the output shape: the Gemm computing both (P's producer's name and index), with `*producer_index` set to P's
// producer. nullopt otherwise.
std::optional<ir::Node> gemm_with_bias(const ir::Graph& graph, const std::vector<std::vector<int>>& readers,
                                       int add_index, int* producer_index);

}  // namespace cnnrt::passes
