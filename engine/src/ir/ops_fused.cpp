// cnnrt's fused ops (FusedConv, FusedGemm, FusedConvTranspose, FusedBatchNormalization; conventions in
// ir/fused.hpp): shape inference that checks what the passes wrote, by running the unfused op's own inference and
// then the epilogue's. A model file may not contain them: only the passes write them.
#include <fmt/format.h>

#include <algorithm>

#include <limits>

#include "core/error.hpp"
#include "ir/fused.hpp"
#include "ir/ops_util.hpp"
#include "ir/window.hpp"

namespace cnnrt::ir {

namespace fused {

void make_fused(Node& node, const char* op) {
  node.op = op;
  node.domain = kDomain;
}

std::optional<Activation> activation_of(const Node& node) {
  if (!node.domain.empty()) return std::nullopt;
  if (node.op == "Relu" || node.op == "Sigmoid" || node.op == "Tanh") return Activation{node.op};
  if (node.op == "LeakyRelu") return Activation{node.op, node.attrs.get_float("alpha", 0.01f)};
  if (node.op == "HardSwish") return Activation{node.op};
  if (node.op == "HardSigmoid") {
    return Activation{node.op, node.attrs.get_float("alpha", 0.2f), node.attrs.get_float("beta", 0.5f)};
  }
  if (node.op == "Swish") return Activation{node.op, node.attrs.get_float("alpha", 1.0f)};
  if (node.op == "Gelu") {
    if (node.attrs.get_string("approximate", "none") != "none") return std::nullopt;
    return Activation{node.op};
  }
  if (node.op == "Clip") {
    // Canonical Clip carries min/max as attributes (-inf/+inf when absent); the inputs are gone.
    if (node.has_input(1) || node.has_input(2)) return std::nullopt;
    return Activation{node.op, node.attrs.get_float("min", -std::numeric_limits<float>::infinity()),
                      node.attrs.get_float("max", std::numeric_limits<float>::infinity())};
  }
  return std::nullopt;
}

namespace {

const char* alpha_attr(const Node& fused) { return fused.op == kFusedGemm ? kGemmActAlpha : kConvActAlpha; }
const char* beta_attr(const Node& fused) { return fused.op == kFusedGemm ? kGemmActBeta : kConvActBeta; }

}  // namespace

std::optional<Activation> fused_activation(const Node& fused) {
  const std::string op = fused.attrs.get_string(kActivation, "");
  if (op.empty()) return std::nullopt;
  return Activation{op, fused.attrs.get_float(alpha_attr(fused), 0.0f), fused.attrs.get_float(beta_attr(fused), 0.0f)};
}

void set_fused_activation(Node& fused, const Activation& activation) {
  fused.attrs.set(kActivation, activation.op);
  fused.attrs.set(alpha_attr(fused), activation.alpha);
  fused.attrs.set(beta_attr(fused), activation.beta);
}

Node activation_node(const Activation& activation) {
  Node node;
  node.op = activation.op;
  if (activation.op == "LeakyRelu" || activation.op == "Swish") node.attrs.set("alpha", activation.alpha);
  if (activation.op == "HardSigmoid") {
    node.attrs.set("alpha", activation.alpha);
    node.attrs.set("beta", activation.beta);
  }
  if (activation.op == "Clip") {
    node.attrs.set("min", activation.alpha);
    node.attrs.set("max", activation.beta);
  }
  return node;
}

bool has_pool(const Node& fused) { return !fused.attrs.get_string(kPool, "").empty(); }

Attributes pool_attributes(const Node& fused) {
  Attributes a;
  a.set("kernel_shape", fused.attrs.get_ints(kPoolKernelShape));
  a.set("strides", fused.attrs.get_ints(kPoolStrides));
  a.set("pads", fused.attrs.get_ints(kPoolPads));
  a.set("ceil_mode", fused.attrs.get_int(kPoolCeilMode, 0));
  if (fused.attrs.has(kPoolDilations)) a.set("dilations", fused.attrs.get_ints(kPoolDilations));
  if (fused.attrs.has(kPoolCountIncludePad)) a.set("count_include_pad", fused.attrs.get_int(kPoolCountIncludePad, 0));
  return a;
}

void set_pool(Node& fused, const Node& pool) {
  CNNRT_CHECK(pool.op == "MaxPool" || pool.op == "AveragePool", ErrorCode::Internal, "cannot fuse {} as a pool",
              pool.op);
  fused.attrs.set(kPool, pool.op);
  fused.attrs.set(kPoolKernelShape, pool.attrs.get_ints("kernel_shape"));
  const size_t spatial = pool.attrs.get_ints("kernel_shape").size();
  fused.attrs.set(kPoolStrides, pool.attrs.get_ints("strides", std::vector<int64_t>(spatial, 1)));
  fused.attrs.set(kPoolPads, pool.attrs.get_ints("pads", std::vector<int64_t>(2 * spatial, 0)));
  fused.attrs.set(kPoolCeilMode, pool.attrs.get_int("ceil_mode", 0));
  if (pool.op == "MaxPool") {
    fused.attrs.set(kPoolDilations, pool.attrs.get_ints("dilations", std::vector<int64_t>(spatial, 1)));
  } else {
    fused.attrs.set(kPoolCountIncludePad, pool.attrs.get_int("count_include_pad", 0));
  }
}

}  // namespace fused

namespace {

void check_internal_op(const Node& node, const Graph& graph, int64_t opset, std::vector<std::string>& problems) {
  problems.push_back(fmt::format("{} is internal to cnnrt (written by its graph passes), not an op of a model file",
                                 node.op));
}

void check_fused_activation(const Node& node) {
  const std::optional<fused::Activation> act = fused::fused_activation(node);
  if (!act) return;
  static const char* const kFusable[] = {"Relu",        "LeakyRelu", "Clip",  "Sigmoid", "Tanh",
                                         "HardSigmoid", "HardSwish", "Swish", "Gelu"};
  CNNRT_CHECK(std::find(std::begin(kFusable), std::end(kFusable), act->op) != std::end(kFusable),
              ErrorCode::InvalidModel,
              "activation '{}' cannot be fused (Relu, LeakyRelu, Clip, Sigmoid, Tanh, HardSigmoid, HardSwish, Swish, "
              "Gelu can)",
              act->op);
}

// Runs the inference of the unfused op `op` on the node's first `inputs` inputs; the node keeps the
// canonical attributes it writes. The output then has the unfused op's shape.
void infer_as(Node& node, Graph& graph, int64_t opset, const char* op, size_t inputs) {
  Node base = node;
  base.op = op;
  keep_inputs(base, inputs);
  find_op(op)->infer(base, graph, opset);
  node.attrs = base.attrs;
}

void infer_fused_conv(Node& node, Graph& graph, int64_t opset) {
  infer_as(node, graph, opset, "Conv", 3);
  const Shape conv_shape = graph.shape_of(node.outputs[0]);
  check_fused_activation(node);
  const bool residual = node.has_input(fused::kResidualInput);
  if (residual) {
    require_float_input(node, graph, fused::kResidualInput);
    const Shape& r = input_shape(node, graph, fused::kResidualInput);
    CNNRT_CHECK(r == conv_shape, ErrorCode::InvalidModel, "residual {} does not match the convolution output {}",
                shape_str(r), shape_str(conv_shape));
  }
  const std::string pool = node.attrs.get_string(fused::kPool, "");
  if (pool.empty()) return;
  CNNRT_CHECK(pool == "MaxPool" || pool == "AveragePool", ErrorCode::InvalidModel,
              "pool '{}' cannot be fused (MaxPool, AveragePool can)", pool);
  CNNRT_CHECK(!residual, ErrorCode::InvalidModel, "a residual and a pool cannot be fused together");
  const Attributes pool_attrs = fused::pool_attributes(node);
  if (pool == "AveragePool") {
    for (int64_t d : pool_attrs.get_ints("dilations")) {
      CNNRT_CHECK(d == 1, ErrorCode::InvalidModel, "AveragePool with dilations other than 1 cannot be fused");
    }
  }
  const std::vector<WindowAxis> axes =
      resolve_window(pool_attrs, Shape(conv_shape.begin() + 2, conv_shape.end()), {}, true);
  Shape out{conv_shape[0], conv_shape[1]};
  for (const WindowAxis& axis : axes) out.push_back(axis.output);
  set_output(node, graph, 0, DType::Float32, std::move(out));
}

void infer_fused_gemm(Node& node, Graph& graph, int64_t opset) {
  infer_as(node, graph, opset, "Gemm", 3);
  check_fused_activation(node);
}

void infer_fused_conv_transpose(Node& node, Graph& graph, int64_t opset) {
  infer_as(node, graph, opset, "ConvTranspose", 3);
  check_fused_activation(node);
}

void infer_fused_batchnorm(Node& node, Graph& graph, int64_t opset) {
  infer_as(node, graph, opset, "BatchNormalization", 5);
  check_fused_activation(node);
}

}  // namespace

void add_fused_ops(std::vector<OpInfo>& table) {
  // name, inputs min..max, outputs min..max, check, infer, shape_only, internal
  table.push_back({fused::kFusedConv, 2, 4, 1, 1, check_internal_op, infer_fused_conv, false, true});
  table.push_back({fused::kFusedGemm, 2, 3, 1, 1, check_internal_op, infer_fused_gemm, false, true});
  table.push_back({fused::kFusedConvTranspose, 2, 3, 1, 1, check_internal_op, infer_fused_conv_transpose, false, true});
  table.push_back({fused::kFusedBatchNorm, 5, 5, 1, 1, check_internal_op, infer_fused_batchnorm, false, true});
}

}  // namespace cnnrt::ir
