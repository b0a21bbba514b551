// Views: ops whose output holds the input's elements in the same order under a new shape.
//
// Canonical forms (inputs list the data input only):
//   Identity, Dropout   -                 Dropout keeps one output; ratio/training_mode inputs dropped
//   Reshape             -                 the output shape is the value's shape
//   Flatten             axis (0..rank)
//   Squeeze, Unsqueeze  axes (sorted, >= 0; Unsqueeze's against the output rank)
//   Cast                to                bool results are stored as int64 0/1
#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "core/error.hpp"
#include "ir/ops.hpp"
#include "ir/ops_util.hpp"

namespace cnnrt::ir {
namespace {

void infer_identity(Node& node, Graph& graph, int64_t opset) {
  const Value& in = input_value(node, graph, 0);
  set_output(node, graph, 0, in.dtype, *in.shape);
}

// ---- Dropout -----------------------------------------------------------------------------------------

constexpr size_t kDropoutTrainingMode = 2;  // input slot (opset >= 12)

void check_dropout(const Node& node, const Graph& graph, int64_t opset, std::vector<std::string>& problems) {
  check_constant_inputs(node, graph, problems, {{kDropoutTrainingMode, "training_mode"}});
  const HostTensor* mode = input_constant(node, graph, kDropoutTrainingMode);
  if (mode != nullptr && mode->numel() == 1 && mode->value_at(0) != 0) {
    problems.push_back("training_mode=1 is not supported (inference only)");
  }
  check_output_unused(node, graph, 1, "mask", problems);
}

void infer_dropout(Node& node, Graph& graph, int64_t opset) {
  if (node.has_input(kDropoutTrainingMode)) {
    const HostTensor& mode = require_constant_input(node, graph, kDropoutTrainingMode, "training_mode");
    CNNRT_CHECK(mode.numel() == 1, ErrorCode::InvalidModel, "training_mode has shape {}, expected one value",
                shape_str(mode.shape()));
    CNNRT_CHECK(mode.value_at(0) == 0, ErrorCode::Unsupported, "training_mode=1 is not supported (inference only)");
  }
  keep_inputs(node, 1);
  keep_outputs(node, graph, 1, "mask");
  for (const char* unused : {"ratio", "seed", "is_test"}) node.attrs.erase(unused);
  infer_identity(node, graph, opset);
}

// ---- Reshape -----------------------------------------------------------------------------------------

// ONNX Reshape: 0 copies the input dim at that index (unless allowzero), -1 takes what is left.
Shape reshape_target(const Shape& input, const std::vector<int64_t>& target, bool allowzero) {
  Shape out(target.size());
  int inferred_axis = -1;
  for (size_t i = 0; i < target.size(); ++i) {
    const int64_t dim = target[i];
    if (dim == -1) {
      CNNRT_CHECK(inferred_axis < 0, ErrorCode::InvalidModel, "target shape [{}] has more than one -1",
                  fmt::join(target, ", "));
      inferred_axis = static_cast<int>(i);
      out[i] = 1;
    } else if (dim == 0 && !allowzero) {
      CNNRT_CHECK(i < input.size(), ErrorCode::InvalidModel,
                  "target shape [{}] copies dim {} (0) but the input {} has rank {}", fmt::join(target, ", "), i,
                  shape_str(input), input.size());
      out[i] = input[i];
    } else {
      CNNRT_CHECK(dim >= 0, ErrorCode::InvalidModel, "target shape [{}] has a negative dim {}",
                  fmt::join(target, ", "), dim);
      out[i] = dim;
    }
  }
  const int64_t input_count = numel(input);
  const int64_t known_count = numel(out);
  if (inferred_axis >= 0) {
    CNNRT_CHECK(known_count != 0 && input_count % known_count == 0, ErrorCode::InvalidModel,
                "cannot reshape {} to [{}]: the -1 has no integer size", shape_str(input), fmt::join(target, ", "));
    out[inferred_axis] = input_count / known_count;
  } else {
    CNNRT_CHECK(known_count == input_count, ErrorCode::InvalidModel,
                "cannot reshape {} ({} elements) to {} ({} elements)", shape_str(input), input_count,
                shape_str(out), known_count);
  }
  return out;
}

void check_reshape(const Node& node, const Graph& graph, int64_t opset, std::vector<std::string>& problems) {
  check_constant_inputs(node, graph, problems, {{1, "target shape"}});
}

void infer_reshape(Node& node, Graph& graph, int64_t opset) {
  const auto target = ints_from_input_or_attr(node, graph, 1, "shape", "target shape");
  CNNRT_CHECK(target.has_value(), ErrorCode::InvalidModel, "the target shape is missing (input 1)");
  const bool allowzero = node.attrs.get_int("allowzero", 0) != 0;
  const Value& in = input_value(node, graph, 0);
  Shape out = reshape_target(*in.shape, *target, allowzero);
  keep_inputs(node, 1);
  node.attrs.erase("shape");
  node.attrs.erase("allowzero");
  set_output(node, graph, 0, in.dtype, std::move(out));
}

// ---- Flatten -----------------------------------------------------------------------------------------

void infer_flatten(Node& node, Graph& graph, int64_t opset) {
  const Value& in = input_value(node, graph, 0);
  const Shape& shape = *in.shape;
  const int64_t rank = static_cast<int64_t>(shape.size());
  int64_t axis = node.attrs.get_int("axis", 1);
  // Flatten's axis may equal the rank (everything goes to the outer dim): the range is [-rank, rank].
  CNNRT_CHECK(axis >= -rank && axis <= rank, ErrorCode::InvalidModel, "axis {} is out of range for rank {}", axis,
              rank);
  if (axis < 0) axis += rank;
  const Shape outer(shape.begin(), shape.begin() + axis);
  const Shape inner(shape.begin() + axis, shape.end());
  node.attrs.set("axis", axis);
  set_output(node, graph, 0, in.dtype, {numel(outer), numel(inner)});
}

// ---- Squeeze / Unsqueeze -----------------------------------------------------------------------------

void check_axes_input(const Node& node, const Graph& graph, int64_t opset, std::vector<std::string>& problems) {
  check_constant_inputs(node, graph, problems, {{1, "axes"}});
}

void infer_squeeze(Node& node, Graph& graph, int64_t opset) {
  const Value& in = input_value(node, graph, 0);
  const Shape& shape = *in.shape;
  const int64_t rank = static_cast<int64_t>(shape.size());
  std::vector<int64_t> axes;
  const auto given = ints_from_input_or_attr(node, graph, 1, "axes", "axes");
  if (given && !given->empty()) {
    axes = normalize_axes(*given, rank, "squeeze axis");
  } else {  // no axes (or an empty list): every unit dim, as ONNX Runtime reads it
    for (int64_t axis = 0; axis < rank; ++axis) {
      if (shape[axis] == 1) axes.push_back(axis);
    }
  }
  Shape out;
  size_t next = 0;  // index into the sorted axes
  for (int64_t axis = 0; axis < rank; ++axis) {
    if (next < axes.size() && axes[next] == axis) {
      CNNRT_CHECK(shape[axis] == 1, ErrorCode::InvalidModel, "cannot squeeze axis {} of size {} (input {})", axis,
                  shape[axis], shape_str(shape));
      ++next;
    } else {
      out.push_back(shape[axis]);
    }
  }
  keep_inputs(node, 1);
  node.attrs.set("axes", axes);
  set_output(node, graph, 0, in.dtype, std::move(out));
}

void infer_unsqueeze(Node& node, Graph& graph, int64_t opset) {
  const Value& in = input_value(node, graph, 0);
  const Shape& shape = *in.shape;
  const auto given = ints_from_input_or_attr(node, graph, 1, "axes", "axes");
  CNNRT_CHECK(given.has_value(), ErrorCode::InvalidModel, "the axes are missing");
  const int64_t out_rank = static_cast<int64_t>(shape.size() + given->size());
  const std::vector<int64_t> axes = normalize_axes(*given, out_rank, "unsqueeze axis");
  Shape out;
  size_t next_axis = 0;
  size_t next_dim = 0;
  for (int64_t axis = 0; axis < out_rank; ++axis) {
    if (next_axis < axes.size() && axes[next_axis] == axis) {
      out.push_back(1);
      ++next_axis;
    } else {
      out.push_back(shape[next_dim++]);
    }
  }
  keep_inputs(node, 1);
  node.attrs.set("axes", axes);
  set_output(node, graph, 0, in.dtype, std::move(out));
}

// ---- Cast --------------------------------------------------------------------------------------------

bool cast_target_supported(DType to) { return to == DType::Float32 || to == DType::Int64 || to == DType::Bool; }

void check_cast(const Node& node, const Graph& graph, int64_t opset, std::vector<std::string>& problems) {
  check_input_dtypes(node, graph, problems, {0});
  if (!node.attrs.has("to")) return;  // infer reports the missing attribute
  const auto to = static_cast<DType>(node.attrs.get_int("to", 0));
  if (!cast_target_supported(to)) {
    problems.push_back(fmt::format("Cast to {} is not supported (float32, int64 and bool are)", dtype_name(to)));
  }
}

void infer_cast(Node& node, Graph& graph, int64_t opset) {
  CNNRT_CHECK(node.attrs.has("to"), ErrorCode::InvalidModel, "attribute 'to' is missing");
  const auto to = static_cast<DType>(node.attrs.get_int("to", 0));
  CNNRT_CHECK(cast_target_supported(to), ErrorCode::Unsupported,
              "Cast to {} is not supported (float32, int64 and bool are)", dtype_name(to));
  const Value& in = input_value(node, graph, 0);
  const bool is_view = in.dtype == DType::Float32 && to == DType::Float32;
  if (!in.is_constant() && !is_view) {
    fail(ErrorCode::Unsupported, "casting '{}' from {} to {} at run time is not supported (only float32 to float32 "
         "is; constants fold)", in.name, dtype_name(in.dtype), dtype_name(to));
  }
  const DType stored = to == DType::Bool ? DType::Int64 : to;  // HostTensor keeps bools as int64 0/1
  set_output(node, graph, 0, stored, *in.shape);
}

}  // namespace

void add_view_ops(std::vector<OpInfo>& table) {
  // name, inputs min..max, outputs min..max, check, infer
  table.push_back({"Identity", 1, 1, 1, 1, check_dtypes_only, infer_identity});
  table.push_back({"Dropout", 1, 3, 1, 2, check_dropout, infer_dropout});
  table.push_back({"Reshape", 1, 2, 1, 1, check_reshape, infer_reshape});
  table.push_back({"Flatten", 1, 1, 1, 1, check_dtypes_only, infer_flatten});
  table.push_back({"Squeeze", 1, 2, 1, 1, check_axes_input, infer_squeeze});
  table.push_back({"Unsqueeze", 1, 2, 1, 1, check_axes_input, infer_unsqueeze});
  table.push_back({"Cast", 1, 1, 1, 1, check_cast, infer_cast});
}

bool is_view_op(const Node& node) {
  static const char* const kViews[] = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout", "Cast"};
  return std::find_if(std::begin(kViews), std::end(kViews), [&](const char* op) { return node.op == op; }) !=
         std::end(kViews);
}

}  // namespace cnnrt::ir
