// Shared pieces of the op table (ops*.cpp): reading inputs, attribute-like constant inputs, axes, and the
// checks most ops make. Internal to engine/src/ir; the public face of the table is ir/ops.hpp.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "ir/ops.hpp"

namespace cnnrt::ir {

// Each family file adds its ops to the table that ops.cpp assembles.
void add_view_ops(std::vector<OpInfo>& table);         // ops_views.cpp
void add_elementwise_ops(std::vector<OpInfo>& table);  // ops_elementwise.cpp
void add_window_ops(std::vector<OpInfo>& table);       // ops_window.cpp (conv, pooling, reductions, softmax)
void add_matrix_ops(std::vector<OpInfo>& table);       // ops_matrix.cpp (matmul, data movement)
void add_fold_ops(std::vector<OpInfo>& table);         // ops_fold.cpp (shape arithmetic, fold-only)
void add_fused_ops(std::vector<OpInfo>& table);        // ops_fused.cpp (FusedConv, FusedGemm: written by passes)
void add_resize_ops(std::vector<OpInfo>& table);       // ops_resize.cpp (Resize, Upsample)

// ---- reading a node's values -------------------------------------------------------------------------

// The Value at input/output slot `i`; Internal error when the slot is empty (callers check has_input first).
const Value& input_value(const Node& node, const Graph& graph, size_t i);
const Shape& input_shape(const Node& node, const Graph& graph, size_t i);
// The constant behind input `i`, or nullptr when the slot is empty or the value is computed at run time.
const HostTensor* input_constant(const Node& node, const Graph& graph, size_t i);
// numpy broadcast of the shapes of inputs first.. (absent inputs skipped).
Shape broadcast_input_shapes(const Node& node, const Graph& graph, size_t first = 0);
// Sets dtype and shape of output `i` when the node has that output.
void set_output(Node& node, Graph& graph, size_t i, DType dtype, Shape shape);
// Sets output `i` to a constant computed at inference time (Shape, Size): the node then folds away.
void set_output_constant(Node& node, Graph& graph, size_t i, HostTensor value);

// True when some node reads `value` or it is a graph output (an optional output the model really uses).
bool value_is_used(const Graph& graph, int value);
// True when `value` is one of the graph's run-time inputs.
bool is_graph_input(const Graph& graph, int value);

// ---- attribute-like inputs ---------------------------------------------------------------------------

// The constant behind input `i`; Unsupported naming the value when it is computed at run time:
// "the <what> comes from 'x' which is computed at run time; cnnrt needs it constant".
const HostTensor& require_constant_input(const Node& node, const Graph& graph, size_t i, const char* what);
// Integer values of input `i` when present (int64 constant), else of attribute `attr` when present, else
// nullopt. Opset differences need no branch here: older opsets have the attribute, newer ones the input.
std::optional<std::vector<int64_t>> ints_from_input_or_attr(const Node& node, const Graph& graph, size_t i,
                                                            const char* attr, const char* what);
// The one float of constant scalar input `i` (Clip min/max, Pad constant_value); nullopt when absent.
std::optional<float> float_from_input(const Node& node, const Graph& graph, size_t i, const char* what);
// Keeps only the first `count` inputs: canonical nodes list data inputs only.
void keep_inputs(Node& node, size_t count);
// Keeps only the first `count` outputs after checking that the ones dropped are unused.
void keep_outputs(Node& node, const Graph& graph, size_t count, const char* what);

// ---- axes --------------------------------------------------------------------------------------------

// Maps an axis in [-rank, rank) to [0, rank); InvalidModel naming `what` otherwise.
int64_t normalize_axis(int64_t axis, int64_t rank, const char* what);
// Normalizes, sorts and checks for repeats.
std::vector<int64_t> normalize_axes(const std::vector<int64_t>& axes, int64_t rank, const char* what);

// a + b for two non-negative dims; InvalidModel when the sum overflows int64.
int64_t add_dims(int64_t a, int64_t b);

// ---- dtypes ------------------------------------------------------------------------------------------

// Unsupported unless input `i` is float32: for ops that only compute on activations.
void require_float_input(const Node& node, const Graph& graph, size_t i);
// Input `i` after checking that it is float32 or int64 (data movement handles both); Unsupported otherwise.
const Value& numeric_input(const Node& node, const Graph& graph, size_t i);
// Unsupported unless every present input is float32 or int64, and all of them share one type.
DType common_numeric_dtype(const Node& node, const Graph& graph);

// ---- checks (never throw for unsupported features) ---------------------------------------------------

// One problem per input whose type is known now (inputs, initializers) and is not float32 or int64.
// `bool_ok` lists input slots where a bool is fine too (Where's condition).
void check_input_dtypes(const Node& node, const Graph& graph, std::vector<std::string>& problems,
                        const std::vector<size_t>& bool_ok = {});
// An input slot whose value cnnrt needs at load time (weights, shapes, axes), named for messages.
struct ConstantSlot {
  size_t slot;
  const char* what;  // "target shape", "weight", ...
};
// check_input_dtypes (bools allowed in the listed slots), plus one problem per listed slot that a run-time
// model input feeds.
void check_constant_inputs(const Node& node, const Graph& graph, std::vector<std::string>& problems,
                           std::initializer_list<ConstantSlot> slots);
// One problem when output `i` exists and is used (an optional output cnnrt does not compute).
void check_output_unused(const Node& node, const Graph& graph, size_t i, const char* what,
                         std::vector<std::string>& problems);
// The check for ops with nothing to check beyond input types.
void check_dtypes_only(const Node& node, const Graph& graph, int64_t opset, std::vector<std::string>& problems);

}  // namespace cnnrt::ir
