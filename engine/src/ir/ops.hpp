// The table of ONNX ops cnnrt understands: arity, a load-time support check, and shape inference.
//
// Life of a node: the loader calls OpInfo::check on every node (all problems are reported at once);
// binding input shapes runs OpInfo::infer in topological order, which sets each output's dtype and shape
// and rewrites the node into its canonical form, so that backends read attributes only:
//   - attribute-like inputs that moved across opsets (Reshape shape, Clip min/max, Squeeze/Unsqueeze axes,
//     Pad pads/value, Slice starts/ends/axes/steps, Reduce* axes, Expand shape) are read from their constant
//     input and written as attributes with normalized (non-negative, complete) values;
//   - defaults are made explicit (Softmax axis, Gemm alpha/beta/transA/transB, Concat/Gather axis >= 0);
//   - ops whose output follows from shapes alone (Shape, Size, ConstantOfShape, ...) set Value::constant.
// Canonical attributes are documented at the top of each family file (ops_views.cpp, ops_elementwise.cpp,
// ops_window.cpp, ops_matrix.cpp, ops_fold.cpp) and in docs/ops.md.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.hpp"

namespace cnnrt::ir {

struct OpInfo {
  std::string_view name;
  int min_inputs = 1;
  int max_inputs = 1;   // -1: variadic
  int min_outputs = 1;
  int max_outputs = 1;
  // Appends one message per thing this node asks for that cnnrt cannot run (an attribute value, an
  // input type, a mode). Runs before shapes are known; must not throw for unsupported features.
  void (*check)(const Node& node, const Graph& graph, int64_t opset, std::vector<std::string>& problems) = nullptr;
  // Sets output dtypes and shapes from input shapes (and constant inputs where the op needs their values)
  // and canonicalizes the node (see above). Throws Error (InvalidModel for inconsistent shapes, Unsupported
  // when a value cnnrt needs at load time is only known at run time).
  void (*infer)(Node& node, Graph& graph, int64_t opset) = nullptr;
  // True when the op reads only its input shapes, never the data (Shape, Size): folding needs no values.
  bool shape_only = false;
  // True for cnnrt's own fused ops (ir/fused.hpp): written by the passes, rejected in model files, not listed
  // by supported_ops().
  bool internal = false;
};

// nullptr when cnnrt does not know the op (default ONNX domain only).
const OpInfo* find_op(std::string_view op_type);
// Names of all supported ONNX ops (internal ones left out), sorted, for messages and `cnnrt --list-ops`.
std::vector<std::string_view> supported_ops();

// Ops whose output is the input's elements in the same order (ops_views.cpp): backends may alias the output
// with the input's storage instead of running a step.
bool is_view_op(const Node& node);

}  // namespace cnnrt::ir
