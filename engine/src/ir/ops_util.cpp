#include "ir/ops_util.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.hpp"
#include "ir/window.hpp"

namespace cnnrt::ir {

const Value& input_value(const Node& node, const Graph& graph, size_t i) {
  const int id = node.input(i);
  CNNRT_CHECK(id >= 0 && id < static_cast<int>(graph.values.size()), ErrorCode::Internal,
              "input {} is absent", i);
  return graph.values[id];
}

const Shape& input_shape(const Node& node, const Graph& graph, size_t i) {
  const Value& value = input_value(node, graph, i);
  CNNRT_CHECK(value.shape.has_value(), ErrorCode::Internal, "the shape of input '{}' is not known yet", value.name);
  return *value.shape;
}

const HostTensor* input_constant(const Node& node, const Graph& graph, size_t i) {
  return node.has_input(i) ? graph.constant_of(node.input(i)) : nullptr;
}

Shape broadcast_input_shapes(const Node& node, const Graph& graph, size_t first) {
  Shape out;
  for (size_t i = first; i < node.inputs.size(); ++i) {
    if (node.has_input(i)) out = broadcast_shapes(out, input_shape(node, graph, i));
  }
  return out;
}

void set_output(Node& node, Graph& graph, size_t i, DType dtype, Shape shape) {
  if (i >= node.outputs.size() || node.outputs[i] == kNoValue) return;
  Value& value = graph.values[node.outputs[i]];
  value.dtype = dtype;
  value.shape = std::move(shape);
}

void set_output_constant(Node& node, Graph& graph, size_t i, HostTensor tensor) {
  if (i >= node.outputs.size() || node.outputs[i] == kNoValue) return;
  set_output(node, graph, i, tensor.dtype(), tensor.shape());
  graph.values[node.outputs[i]].constant = std::make_shared<const HostTensor>(std::move(tensor));
}

bool value_is_used(const Graph& graph, int value) {
  if (value == kNoValue) return false;
  if (std::find(graph.outputs.begin(), graph.outputs.end(), value) != graph.outputs.end()) return true;
  for (const Node& node : graph.nodes) {
    if (std::find(node.inputs.begin(), node.inputs.end(), value) != node.inputs.end()) return true;
  }
  return false;
}

bool is_graph_input(const Graph& graph, int value) {
  return value != kNoValue && std::find(graph.inputs.begin(), graph.inputs.end(), value) != graph.inputs.end();
}

const HostTensor& require_constant_input(const Node& node, const Graph& graph, size_t i, const char* what) {
  const Value& value = input_value(node, graph, i);
  if (value.constant == nullptr) {
    fail(ErrorCode::Unsupported, "the {} comes from '{}' which is computed at run time; cnnrt needs it constant",
         what, value.name);
  }
  return *value.constant;
}

static std::vector<int64_t> int_values(const HostTensor& tensor, const std::string& name, const char* what) {
  CNNRT_CHECK(tensor.dtype() == DType::Int64, ErrorCode::InvalidModel, "the {} '{}' has type {}, expected int64",
              what, name, dtype_name(tensor.dtype()));
  CNNRT_CHECK(tensor.rank() <= 1, ErrorCode::InvalidModel, "the {} '{}' has shape {}, expected a 1-D list", what,
              name, shape_str(tensor.shape()));
  return tensor.int_values();
}

std::optional<std::vector<int64_t>> ints_from_input_or_attr(const Node& node, const Graph& graph, size_t i,
                                                            const char* attr, const char* what) {
  if (node.has_input(i)) {
    const HostTensor& tensor = require_constant_input(node, graph, i, what);
    return int_values(tensor, input_value(node, graph, i).name, what);
  }
  if (node.attrs.has(attr)) return node.attrs.get_ints(attr);
  return std::nullopt;
}

std::optional<float> float_from_input(const Node& node, const Graph& graph, size_t i, const char* what) {
  if (!node.has_input(i)) return std::nullopt;
  const HostTensor& tensor = require_constant_input(node, graph, i, what);
  CNNRT_CHECK(tensor.numel() == 1, ErrorCode::InvalidModel, "the {} '{}' has shape {}, expected one value", what,
              input_value(node, graph, i).name, shape_str(tensor.shape()));
  return static_cast<float>(tensor.value_at(0));
}

void keep_inputs(Node& node, size_t count) {
  if (node.inputs.size() > count) node.inputs.resize(count);
}

void keep_outputs(Node& node, const Graph& graph, size_t count, const char* what) {
  for (size_t i = count; i < node.outputs.size(); ++i) {
    if (value_is_used(graph, node.outputs[i])) {
      fail(ErrorCode::Unsupported, "the {} output '{}' is not supported", what, graph.values[node.outputs[i]].name);
    }
  }
  if (node.outputs.size() > count) node.outputs.resize(count);
}

int64_t normalize_axis(int64_t axis, int64_t rank, const char* what) {
  CNNRT_CHECK(axis >= -rank && axis < rank, ErrorCode::InvalidModel, "{} {} is out of range for rank {}", what,
              axis, rank);
  return axis < 0 ? axis + rank : axis;
}

std::vector<int64_t> normalize_axes(const std::vector<int64_t>& axes, int64_t rank, const char* what) {
  std::vector<int64_t> normalized;
  normalized.reserve(axes.size());
  for (int64_t axis : axes) normalized.push_back(normalize_axis(axis, rank, what));
  std::sort(normalized.begin(), normalized.end());
  const auto repeat = std::adjacent_find(normalized.begin(), normalized.end());
  CNNRT_CHECK(repeat == normalized.end(), ErrorCode::InvalidModel, "{} names axis {} twice", what, *repeat);
  return normalized;
}

int64_t add_dims(int64_t a, int64_t b) {
  int64_t sum = 0;
  CNNRT_CHECK(!__builtin_add_overflow(a, b, &sum), ErrorCode::InvalidModel, "dimension {} + {} overflows int64", a, b);
  return sum;
}

void require_float_input(const Node& node, const Graph& graph, size_t i) {
  const Value& value = input_value(node, graph, i);
  if (value.dtype != DType::Float32) {
    fail(ErrorCode::Unsupported, "input '{}' has type {}; {} computes in float32 only", value.name,
         dtype_name(value.dtype), node.op);
  }
}

const Value& numeric_input(const Node& node, const Graph& graph, size_t i) {
  const Value& value = input_value(node, graph, i);
  if (!dtype_supported(value.dtype)) {
    fail(ErrorCode::Unsupported, "input '{}' has type {}; {} takes float32 or int64", value.name,
         dtype_name(value.dtype), node.op);
  }
  return value;
}

DType common_numeric_dtype(const Node& node, const Graph& graph) {
  DType common = DType::Undefined;
  std::string first_name;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    if (!node.has_input(i)) continue;
    const Value& value = input_value(node, graph, i);
    if (!dtype_supported(value.dtype)) {
      fail(ErrorCode::Unsupported, "input '{}' has type {}; {} computes in float32 or int64", value.name,
           dtype_name(value.dtype), node.op);
    }
    if (common == DType::Undefined) {
      common = value.dtype;
      first_name = value.name;
    } else if (value.dtype != common) {
      fail(ErrorCode::InvalidModel, "inputs '{}' ({}) and '{}' ({}) have different types", first_name,
           dtype_name(common), value.name, dtype_name(value.dtype));
    }
  }
  return common;
}

void check_input_dtypes(const Node& node, const Graph& graph, std::vector<std::string>& problems,
                        const std::vector<size_t>& bool_ok) {
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    if (!node.has_input(i) || node.input(i) >= static_cast<int>(graph.values.size())) continue;
    const Value& value = graph.values[node.input(i)];
    if (value.dtype == DType::Undefined || dtype_supported(value.dtype)) continue;  // Undefined: not known yet
    const bool is_bool_ok = std::find(bool_ok.begin(), bool_ok.end(), i) != bool_ok.end();
    if (value.dtype == DType::Bool && is_bool_ok) continue;
    problems.push_back(fmt::format("input '{}' has type {}, which is not supported (float32 and int64 are)",
                                   value.name, dtype_name(value.dtype)));
  }
}

void check_constant_inputs(const Node& node, const Graph& graph, std::vector<std::string>& problems,
                           std::initializer_list<ConstantSlot> slots) {
  std::vector<size_t> read_as_values;  // a bool there (Dropout's training_mode) is a value cnnrt reads, fine
  for (const ConstantSlot& slot : slots) read_as_values.push_back(slot.slot);
  check_input_dtypes(node, graph, problems, read_as_values);
  for (const ConstantSlot& slot : slots) {
    if (node.has_input(slot.slot) && is_graph_input(graph, node.input(slot.slot))) {
      problems.push_back(fmt::format("the {} comes from the model input '{}'; cnnrt needs it constant", slot.what,
                                     graph.values[node.input(slot.slot)].name));
    }
  }
}

void check_output_unused(const Node& node, const Graph& graph, size_t i, const char* what,
                         std::vector<std::string>& problems) {
  if (i < node.outputs.size() && value_is_used(graph, node.outputs[i])) {
    problems.push_back(fmt::format("the {} output '{}' is not supported", what, graph.values[node.outputs[i]].name));
  }
}

void check_dtypes_only(const Node& node, const Graph& graph, int64_t opset, std::vector<std::string>& problems) {
  check_input_dtypes(node, graph, problems);
}

}  // namespace cnnrt::ir
