// Elementwise ops: unary activations, Clip, numpy-broadcast arithmetic, PRelu, variadic Max/Min/Sum/Mean,
// and inference-mode BatchNormalization.
//
// Canonical forms:
//   unary activations     the ONNX defaults written out: LeakyRelu alpha, Elu alpha, Selu alpha/gamma,
//                         HardSigmoid alpha/beta
//   Clip                  min, max (floats, -inf/+inf when absent); the min/max inputs are dropped
//   Add Sub Mul Div Pow   two inputs, numpy broadcasting (int64 allowed except for Pow, for folding)
//   Max Min Sum Mean      one or more inputs, numpy broadcasting
//   PRelu                 slope broadcast unidirectionally to X
//   BatchNormalization    epsilon; inputs X, scale, B, mean, var (the last four constant); one output
#include <fmt/format.h>

#include <limits>

#include "core/error.hpp"
#include "ir/ops_util.hpp"
#include "ir/window.hpp"

namespace cnnrt::ir {
namespace {

// ---- unary activations -------------------------------------------------------------------------------

struct FloatDefault {
  const char* attr;
  float value;
};

// The ONNX defaults of the activations that have parameters (opset 6 and later).
std::vector<FloatDefault> activation_defaults(const std::string& op) {
  if (op == "LeakyRelu") return {{"alpha", 0.01f}};
  if (op == "Elu") return {{"alpha", 1.0f}};
  if (op == "Selu") return {{"alpha", 1.67326319217681884765625f}, {"gamma", 1.05070102214813232421875f}};
  if (op == "HardSigmoid") return {{"alpha", 0.2f}, {"beta", 0.5f}};
  if (op == "Swish") return {{"alpha", 1.0f}};
  return {};
}

// Gelu (opset 20): the exact form or tanh's approximation.
void check_gelu(const Node& node, const Graph& graph, int64_t opset, std::vector<std::string>& problems) {
  const std::string approximate = node.attrs.get_string("approximate", "none");
  if (approximate != "none" && approximate != "tanh") {
    problems.push_back("approximate='" + approximate + "' (ONNX allows 'none' and 'tanh')");
  }
}

void infer_unary(Node& node, Graph& graph, int64_t opset) {
  require_float_input(node, graph, 0);
  for (const FloatDefault& param : activation_defaults(node.op)) {
    node.attrs.set(param.attr, node.attrs.get_float(param.attr, param.value));
  }
  node.attrs.erase("consumed_inputs");  // opset 1 bookkeeping, meaningless here
  set_output(node, graph, 0, DType::Float32, input_shape(node, graph, 0));
}

// ---- Clip --------------------------------------------------------------------------------------------

void check_clip(const Node& node, const Graph& graph, int64_t opset, std::vector<std::string>& problems) {
  check_constant_inputs(node, graph, problems, {{1, "min"}, {2, "max"}});
}

void infer_clip(Node& node, Graph& graph, int64_t opset) {
  require_float_input(node, graph, 0);
  constexpr float kInfinity = std::numeric_limits<float>::infinity();
  // Opset < 11 has min/max attributes, later opsets optional inputs.
  const float min = float_from_input(node, graph, 1, "min").value_or(node.attrs.get_float("min", -kInfinity));
  const float max = float_from_input(node, graph, 2, "max").value_or(node.attrs.get_float("max", kInfinity));
  keep_inputs(node, 1);
  node.attrs.set("min", min);
  node.attrs.set("max", max);
  set_output(node, graph, 0, DType::Float32, input_shape(node, graph, 0));
}

// ---- numpy-broadcast arithmetic ----------------------------------------------------------------------

void check_broadcast(const Node& node, const Graph& graph, int64_t opset, std::vector<std::string>& problems) {
  check_input_dtypes(node, graph, problems);
  if (node.attrs.has("axis")) {
    problems.push_back("broadcasting with an 'axis' attribute (opset < 7) is not supported");
  }
}

// Add, Sub, Mul, Div, Max, Min, Sum: float32, or int64 for shape arithmetic.
void infer_broadcast(Node& node, Graph& graph, int64_t opset) {
  const DType dtype = common_numeric_dtype(node, graph);
  node.attrs.erase("broadcast");  // opset < 7: numpy broadcasting is the only kind we accept
  set_output(node, graph, 0, dtype, broadcast_input_shapes(node, graph));
}

void infer_broadcast_float(Node& node, Graph& graph, int64_t opset) {
  for (size_t i = 0; i < node.inputs.size(); ++i) require_float_input(node, graph, i);
  infer_broadcast(node, graph, opset);
}

// Pow: float32 base; the exponent may be float32 or int64 (opset 12 allows integer exponents).
void infer_pow(Node& node, Graph& graph, int64_t opset) {
  require_float_input(node, graph, 0);
  const Value& exponent = input_value(node, graph, 1);
  CNNRT_CHECK(dtype_supported(exponent.dtype), ErrorCode::Unsupported,
              "exponent '{}' has type {}; Pow takes float32 or int64 exponents", exponent.name,
              dtype_name(exponent.dtype));
  node.attrs.erase("broadcast");
  set_output(node, graph, 0, DType::Float32, broadcast_input_shapes(node, graph));
}

void infer_prelu(Node& node, Graph& graph, int64_t opset) {
  require_float_input(node, graph, 0);
  require_float_input(node, graph, 1);
  const Shape& x = input_shape(node, graph, 0);
  const Shape& slope = input_shape(node, graph, 1);
  CNNRT_CHECK(broadcast_shapes(x, slope) == x, ErrorCode::InvalidModel,
              "slope {} does not broadcast to the input {}", shape_str(slope), shape_str(x));
  set_output(node, graph, 0, DType::Float32, x);
}

// ---- BatchNormalization ------------------------------------------------------------------------------

constexpr const char* kBatchNormParams[] = {"", "scale", "bias", "mean", "variance"};  // by input slot

void check_batch_norm(const Node& node, const Graph& graph, int64_t opset, std::vector<std::string>& problems) {
  check_constant_inputs(node, graph, problems, {{1, "scale"}, {2, "bias"}, {3, "mean"}, {4, "variance"}});
  if (node.attrs.get_int("spatial", 1) != 1) {
    problems.push_back("spatial=0 is not supported (one scale per channel only)");
  }
  if (node.attrs.get_int("training_mode", 0) != 0) {
    problems.push_back("training_mode=1 is not supported (inference only)");
  }
  for (size_t i = 1; i < node.outputs.size(); ++i) check_output_unused(node, graph, i, "training statistics", problems);
}

void infer_batch_norm(Node& node, Graph& graph, int64_t opset) {
  require_float_input(node, graph, 0);
  CNNRT_CHECK(node.attrs.get_int("spatial", 1) == 1, ErrorCode::Unsupported,
              "spatial=0 is not supported (one scale per channel only)");
  CNNRT_CHECK(node.attrs.get_int("training_mode", 0) == 0, ErrorCode::Unsupported,
              "training_mode=1 is not supported (inference only)");
  const Shape& x = input_shape(node, graph, 0);
  CNNRT_CHECK(x.size() >= 2, ErrorCode::InvalidModel, "input {} has no channel axis (rank < 2)", shape_str(x));
  const int64_t channels = x[1];
  for (size_t i = 1; i < 5; ++i) {
    const HostTensor& param = require_constant_input(node, graph, i, kBatchNormParams[i]);
    CNNRT_CHECK(param.dtype() == DType::Float32, ErrorCode::Unsupported, "{} '{}' has type {}, expected float32",
                kBatchNormParams[i], input_value(node, graph, i).name, dtype_name(param.dtype()));
    CNNRT_CHECK(param.shape() == Shape{channels}, ErrorCode::InvalidModel,
                "{} '{}' has shape {}, expected {} (one per channel of input {})", kBatchNormParams[i],
                input_value(node, graph, i).name, shape_str(param.shape()), channels, shape_str(x));
  }
  keep_outputs(node, graph, 1, "training statistics");
  node.attrs.set("epsilon", node.attrs.get_float("epsilon", 1e-5f));
  for (const char* unused : {"momentum", "spatial", "training_mode", "is_test", "consumed_inputs"}) {
    node.attrs.erase(unused);
  }
  set_output(node, graph, 0, DType::Float32, x);
}

}  // namespace

void add_elementwise_ops(std::vector<OpInfo>& table) {
  for (const char* op : {"Relu", "Sigmoid", "Tanh", "Abs", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Floor",
                         "Ceil", "Softsign", "Softplus", "Erf", "HardSwish", "LeakyRelu", "Elu", "Selu",
                         "HardSigmoid"}) {
    table.push_back({op, 1, 1, 1, 1, check_dtypes_only, infer_unary});
  }
  // name, inputs min..max, outputs min..max, check, infer
  table.push_back({"Swish", 1, 1, 1, 1, check_dtypes_only, infer_unary});
  table.push_back({"Gelu", 1, 1, 1, 1, check_gelu, infer_unary});
  table.push_back({"Clip", 1, 3, 1, 1, check_clip, infer_clip});
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
    table.push_back({op, 2, 2, 1, 1, check_broadcast, infer_broadcast});
  }
  table.push_back({"Pow", 2, 2, 1, 1, check_broadcast, infer_pow});
  table.push_back({"PRelu", 2, 2, 1, 1, check_dtypes_only, infer_prelu});
  for (const char* op : {"Max", "Min", "Sum"}) {
    table.push_back({op, 1, -1, 1, 1, check_dtypes_only, infer_broadcast});
  }
  table.push_back({"Mean", 1, -1, 1, 1, check_dtypes_only, infer_broadcast_float});
  table.push_back({"BatchNormalization", 5, 5, 1, 5, check_batch_norm, infer_batch_norm});
}

}  // namespace cnnrt::ir
