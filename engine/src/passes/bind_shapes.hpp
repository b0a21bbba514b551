// Binding: concrete input shapes in, every value's shape out, with constant subgraphs folded away.
#pragma once

#include <vector>

#include "ir/graph.hpp"

namespace cnnrt::passes {

// Gives every graph input its concrete shape (symbolic dims from `input_shapes`, checked against the
// declared fixed dims: mismatch -> InvalidInput naming input, dim, declared and given sizes), then walks
// the nodes in order running OpInfo::infer, and folds every node whose inputs are all constant (or whose
// op is shape_only) by running its CPU kernel: its outputs become constants and the node is removed.
// Errors from a node are re-thrown with the node label prefixed (rethrow_with_prefix(e, ir::node_label(n))).
// Finally removes dead nodes and checks that every graph output has a shape.
//
// The graph is rewritten in place (nodes canonicalized, folded nodes removed): bind a copy of the loaded
// graph for each set of input shapes. A node left in the graph computes float32 at run time; one that
// would compute int64 at run time is rejected as Unsupported, naming the value that would need to be
// constant.
void bind_shapes(ir::Graph& graph, const std::vector<ir::Shape>& input_shapes);

}  // namespace cnnrt::passes
