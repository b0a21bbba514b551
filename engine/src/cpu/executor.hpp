// The CPU executor: runs a bound graph node by node with the reference kernels.
#pragma once

#include <vector>

#include "ir/graph.hpp"

namespace cnnrt::cpu {

// Runs a bound graph (after passes::bind_shapes). `inputs` in Graph::inputs order, shapes must equal the
// bound shapes (else InvalidInput naming the input and both shapes). Returns Graph::outputs in order.
// Intermediate tensors are freed after their last reader. Unknown op -> Internal error naming the node.
std::vector<ir::HostTensor> run_graph(const ir::Graph& graph, const std::vector<ir::HostTensor>& inputs);

// The most bytes of intermediate and output tensors run_graph holds at once for this bound graph (inputs
// and constants not counted), saturating at INT64_MAX. Checked against Limits::max_activation_bytes at
// plan time so that a hostile shape is refused before anything is allocated.
int64_t peak_activation_bytes(const ir::Graph& graph);

}  // namespace cnnrt::cpu
