// The CPU executor: runs a bound graph node by node with the reference kernels.
#pragma once

#include <vector>

#include "ir/graph.hpp"

namespace cnnrt::cpu {

// Runs a bound graph (after passes::bind_shapes). `inputs` in Graph::inputs order, shapes must equal the
// bound shapes (else InvalidInput naming the input and both shapes). Returns Graph::outputs in order.
// Intermediate tensors are freed after their last reader. Unknown op -> Internal error naming the node.
std::vector<ir::HostTensor> run_graph(const ir::Graph& graph, const std::vector<ir::HostTensor>& inputs);

}  // namespace cnnrt::cpu
