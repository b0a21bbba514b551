// Fold-only ops: shape arithmetic that binding computes once (passes/bind_shapes.cpp folds them). With an
// input computed at run time they are Unsupported. Booleans are int64 0/1 (HostTensor has no bool).
//
//   Shape            start, end (clamped to 0..rank); output constant from the input's shape alone
//   Size             -   output constant from the input's shape alone
//   ConstantOfShape  value (a one-element tensor, float32 0 by default)
//   Range            -   start, limit, delta scalars
//   Equal, Less, Greater, Where, Not   numpy broadcasting; results are int64 0/1
#include <fmt/format.h>

#include <cmath>

#include "core/error.hpp"
#include "ir/ops_util.hpp"

namespace cnnrt::ir {
namespace {

void require_constant_inputs(const Node& node, const Graph& graph) {
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    if (node.has_input(i) && !input_value(node, graph, i).is_constant()) {
      fail(ErrorCode::Unsupported, "{} needs constant inputs, but '{}' is computed at run time", node.op,
           input_value(node, graph, i).name);
    }
  }
}

// ---- Shape / Size (from shapes alone) ----------------------------------------------------------------

void infer_shape_op(Node& node, Graph& graph, int64_t opset) {
  const Shape& x = input_shape(node, graph, 0);
  const int64_t rank = static_cast<int64_t>(x.size());
  // Opset 15 adds start/end; out-of-range values are clamped, negative ones count from the end.
  auto clamp_to_rank = [rank](int64_t axis) {
    if (axis < 0) axis += rank;
    return std::max<int64_t>(0, std::min(rank, axis));
  };
  const int64_t start = clamp_to_rank(node.attrs.get_int("start", 0));
  const int64_t end = std::max(start, clamp_to_rank(node.attrs.get_int("end", rank)));
  node.attrs.set("start", start);
  node.attrs.set("end", end);
  std::vector<int64_t> dims(x.begin() + start, x.begin() + end);
  const int64_t count = end - start;
  set_output_constant(node, graph, 0, HostTensor::ints({count}, std::move(dims)));
}

void infer_size(Node& node, Graph& graph, int64_t opset) {
  set_output_constant(node, graph, 0, HostTensor::ints({}, {numel(input_shape(node, graph, 0))}));
}

// ---- ConstantOfShape / Range -------------------------------------------------------------------------

void infer_constant_of_shape(Node& node, Graph& graph, int64_t opset) {
  const auto dims = ints_from_input_or_attr(node, graph, 0, "", "output shape");
  CNNRT_CHECK(dims.has_value(), ErrorCode::InvalidModel, "the output shape is missing (input 0)");
  numel(*dims);  // rejects negative dims and overflow
  HostTensor value = HostTensor::floats({1}, {0.0f});
  if (node.attrs.has("value")) value = node.attrs.get_tensor("value");
  CNNRT_CHECK(value.numel() == 1, ErrorCode::InvalidModel, "attribute 'value' has shape {}, expected one element",
              shape_str(value.shape()));
  node.attrs.set("value", value);
  set_output(node, graph, 0, value.dtype(), *dims);
}

void infer_range(Node& node, Graph& graph, int64_t opset) {
  require_constant_inputs(node, graph);
  const DType dtype = common_numeric_dtype(node, graph);
  const char* names[] = {"start", "limit", "delta"};
  for (size_t i = 0; i < 3; ++i) {
    CNNRT_CHECK(graph.constant_of(node.input(i))->numel() == 1, ErrorCode::InvalidModel,
                "{} '{}' has shape {}, expected one value", names[i], input_value(node, graph, i).name,
                shape_str(input_shape(node, graph, i)));
  }
  const double start = input_constant(node, graph, 0)->value_at(0);
  const double limit = input_constant(node, graph, 1)->value_at(0);
  const double delta = input_constant(node, graph, 2)->value_at(0);
  CNNRT_CHECK(delta != 0, ErrorCode::InvalidModel, "delta is 0");
  const double count = std::max(0.0, std::ceil((limit - start) / delta));
  // 2^40 elements are far beyond any shape chain; the bound keeps the conversion below defined.
  CNNRT_CHECK(std::isfinite(count) && count < 0x1p40, ErrorCode::InvalidModel,
              "Range({}, {}, {}) has too many elements", start, limit, delta);
  set_output(node, graph, 0, dtype, {static_cast<int64_t>(count)});
}

// ---- comparisons and logic ---------------------------------------------------------------------------

// Shape and Size read any input's shape; bools are fine anywhere in these ops.
void check_shape_only(const Node& node, const Graph& graph, int64_t opset, std::vector<std::string>& problems) {
  check_input_dtypes(node, graph, problems, {0});
}

// Every input of a fold-only op must be constant: one problem per input fed by a run-time model input.
void check_fold_only(const Node& node, const Graph& graph, int64_t opset, std::vector<std::string>& problems) {
  std::vector<size_t> all_slots(node.inputs.size());
  for (size_t i = 0; i < all_slots.size(); ++i) all_slots[i] = i;
  check_input_dtypes(node, graph, problems, all_slots);
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    if (is_graph_input(graph, node.input(i))) {
      problems.push_back(fmt::format("{} needs constant inputs, but '{}' is a model input", node.op,
                                     graph.values[node.input(i)].name));
    }
  }
}

void infer_compare(Node& node, Graph& graph, int64_t opset) {
  require_constant_inputs(node, graph);
  common_numeric_dtype(node, graph);
  set_output(node, graph, 0, DType::Int64, broadcast_input_shapes(node, graph));
}

void infer_where(Node& node, Graph& graph, int64_t opset) {
  require_constant_inputs(node, graph);
  const Value& x = input_value(node, graph, 1);
  const Value& y = input_value(node, graph, 2);
  CNNRT_CHECK(input_constant(node, graph, 0)->dtype() == DType::Int64, ErrorCode::InvalidModel,
              "condition '{}' is not boolean", input_value(node, graph, 0).name);  // bools are int64 0/1
  CNNRT_CHECK(x.dtype == y.dtype, ErrorCode::InvalidModel, "inputs '{}' ({}) and '{}' ({}) have different types",
              x.name, dtype_name(x.dtype), y.name, dtype_name(y.dtype));
  set_output(node, graph, 0, x.dtype, broadcast_input_shapes(node, graph));
}

void infer_not(Node& node, Graph& graph, int64_t opset) {
  require_constant_inputs(node, graph);
  CNNRT_CHECK(input_constant(node, graph, 0)->dtype() == DType::Int64, ErrorCode::InvalidModel,
              "input '{}' is not boolean", input_value(node, graph, 0).name);
  set_output(node, graph, 0, DType::Int64, input_shape(node, graph, 0));
}

}  // namespace

void add_fold_ops(std::vector<OpInfo>& table) {
  // name, inputs min..max, outputs min..max, check, infer, shape_only
  table.push_back({"Shape", 1, 1, 1, 1, check_shape_only, infer_shape_op, true});
  table.push_back({"Size", 1, 1, 1, 1, check_shape_only, infer_size, true});
  table.push_back({"ConstantOfShape", 1, 1, 1, 1, check_fold_only, infer_constant_of_shape});
  table.push_back({"Range", 3, 3, 1, 1, check_fold_only, infer_range});
  for (const char* op : {"Equal", "Less", "Greater"}) {
    table.push_back({op, 2, 2, 1, 1, check_fold_only, infer_compare});
  }
  table.push_back({"Where", 3, 3, 1, 1, check_fold_only, infer_where});
  table.push_back({"Not", 1, 1, 1, 1, check_fold_only, infer_not});
}

}  // namespace cnnrt::ir
