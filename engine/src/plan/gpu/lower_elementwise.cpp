// Lowering of elementwise ops: unary activations and math, broadcast binary ops (variadic ones as a
// chain into the output), Expand, and a standalone BatchNormalization (with the activation after it:
// FusedBatchNormalization) as a per-channel affine transform.
#include <cmath>
#include <map>
#include <optional>

#include "kernels/batchnorm.cuh"
#include "kernels/broadcast.cuh"
#include "kernels/elementwise.cuh"
#include "ir/fused.hpp"
#include "plan/gpu/conv_step.hpp"
#include "plan/gpu/lower_util.hpp"

namespace cnnrt::plan {

namespace {

using kernels::BinaryOp;
using kernels::UnaryOp;

const std::map<std::string, UnaryOp>& unary_ops() {
  static const std::map<std::string, UnaryOp> ops = {
      {"Relu", UnaryOp::Relu},         {"LeakyRelu", UnaryOp::LeakyRelu}, {"Clip", UnaryOp::Clip},
      {"Sigmoid", UnaryOp::Sigmoid},   {"Tanh", UnaryOp::Tanh},           {"Abs", UnaryOp::Abs},
      {"Neg", UnaryOp::Neg},           {"Exp", UnaryOp::Exp},             {"Log", UnaryOp::Log},
      {"Sqrt", UnaryOp::Sqrt},         {"Reciprocal", UnaryOp::Reciprocal}, {"Floor", UnaryOp::Floor},
      {"Ceil", UnaryOp::Ceil},         {"Elu", UnaryOp::Elu},             {"Selu", UnaryOp::Selu},
      {"HardSigmoid", UnaryOp::HardSigmoid}, {"HardSwish", UnaryOp::HardSwish}, {"Softplus", UnaryOp::Softplus},
      {"Softsign", UnaryOp::Softsign}, {"Erf", UnaryOp::Erf},               {"Swish", UnaryOp::Swish},
      {"Gelu", UnaryOp::Gelu},
  };
  return ops;
}

// Canonical attributes of docs/ops.md -> the kernel's parameters (defaults are explicit after infer,
// but the ONNX defaults are repeated here so a hand-built graph still works).
kernels::UnaryParams unary_params(const ir::Node& node) {
  kernels::UnaryParams p;
  const ir::Attributes& a = node.attrs;
  if (node.op == "LeakyRelu") p.alpha = a.get_float("alpha", 0.01f);
  if (node.op == "Elu") p.alpha = a.get_float("alpha", 1.0f);
  if (node.op == "Selu") {
    p.alpha = a.get_float("alpha", 1.67326319217681884765625f);
    p.gamma = a.get_float("gamma", 1.05070102214813232421875f);
  }
  if (node.op == "HardSigmoid") {
    p.alpha = a.get_float("alpha", 0.2f);
    p.beta = a.get_float("beta", 0.5f);
  }
  if (node.op == "Swish") p.alpha = a.get_float("alpha", 1.0f);
  if (node.op == "Clip") {
    p.min = a.get_float("min", -INFINITY);
    p.max = a.get_float("max", INFINITY);
  }
  return p;
}

void lower_unary(const ir::Node& node, LowerContext& lc) {
  UnaryOp op = unary_ops().at(node.op);
  if (node.op == "Gelu" && node.attrs.get_string("approximate", "none") == "tanh") op = UnaryOp::GeluTanh;
  const kernels::UnaryParams params = unary_params(node);
  const int64_t count = ir::numel(output_shape(lc, node));
  add_simple_step(lc, node, "unary_" + node.op, fmt::format("{} elements", count),
                  [op, params, count](const float* const* in, float* const* out, Stream s) {
                    kernels::launch_unary(op, params, in[0], out[0], count, s);
                  });
}

kernels::BroadcastDesc broadcast_desc(const ir::Shape& out, const ir::Shape& a, const ir::Shape& b) {
  require_rank_at_most(out, kernels::kMaxRank, "a broadcast operand");
  return kernels::make_broadcast_desc(static_cast<int>(out.size()), out.data(), static_cast<int>(a.size()), a.data(),
                                      static_cast<int>(b.size()), b.data());
}

const std::map<std::string, BinaryOp>& binary_ops() {
  static const std::map<std::string, BinaryOp> ops = {
      {"Add", BinaryOp::Add}, {"Sub", BinaryOp::Sub}, {"Mul", BinaryOp::Mul},   {"Div", BinaryOp::Div},
      {"Pow", BinaryOp::Pow}, {"Max", BinaryOp::Max}, {"Min", BinaryOp::Min},   {"PRelu", BinaryOp::PRelu},
      {"Sum", BinaryOp::Add}, {"Mean", BinaryOp::Add},
  };
  return ops;
}

// Two inputs: one launch. Variadic Max/Min/Sum/Mean: out = in0 op in1, then out = out op in_k, and Mean
// scales by 1/k; a single input is an Expand (copy) to the output shape.
void lower_binary(const ir::Node& node, LowerContext& lc) {
  const BinaryOp op = binary_ops().at(node.op);
  const ir::Shape& out = output_shape(lc, node);
  std::vector<kernels::BroadcastDesc> descs;
  std::vector<ir::Shape> shapes;
  for (int v : node.inputs) shapes.push_back(lc.graph.shape_of(v));
  const bool variadic = node.op == "Max" || node.op == "Min" || node.op == "Sum" || node.op == "Mean";
  if (shapes.size() == 1) {
    descs.push_back(broadcast_desc(out, shapes[0], {}));
  } else {
    descs.push_back(broadcast_desc(out, shapes[0], shapes[1]));
    for (size_t k = 2; k < shapes.size(); ++k) descs.push_back(broadcast_desc(out, out, shapes[k]));
  }
  const bool mean = node.op == "Mean";
  const float scale = 1.0f / static_cast<float>(shapes.size());
  const int64_t count = ir::numel(out);
  const size_t inputs = shapes.size();
  add_simple_step(lc, node, variadic ? "binary_chain_" + node.op : "binary_" + node.op,
                  fmt::format("{} -> {}", inputs, ir::shape_str(out)),
                  [op, descs, inputs, mean, scale, count](const float* const* in, float* const* o, Stream s) {
                    if (inputs == 1) {
                      kernels::launch_expand(in[0], o[0], descs[0], s);
                    } else {
                      kernels::launch_binary(op, in[0], in[1], o[0], descs[0], s);
                      for (size_t k = 2; k < inputs; ++k) kernels::launch_binary(op, o[0], in[k], o[0], descs[k - 1], s);
                    }
                    if (mean) {
                      kernels::UnaryParams p;
                      p.alpha = scale;
                      kernels::launch_unary(UnaryOp::Scale, p, o[0], o[0], count, s);
                    }
                  });
}

void lower_expand(const ir::Node& node, LowerContext& lc) {
  const kernels::BroadcastDesc desc = broadcast_desc(output_shape(lc, node), input_shape(lc, node, 0), {});
  const std::vector<int> in = {lc.slot(node.input(0))};
  lc.add_step(node, "expand", ir::shape_str(output_shape(lc, node)), in, output_slots(lc, node),
              [desc](const float* const* i, float* const* o, Stream s) { kernels::launch_expand(i[0], o[0], desc, s); });
}

void lower_batchnorm(const ir::Node& node, LowerContext& lc) {
  const ir::Shape& x = input_shape(lc, node, 0);
  const ChannelAffine affine = batchnorm_affine(node, lc);
  const float* scale_d = affine.scale;
  const float* shift_d = affine.shift;
  const int64_t batch = x[0], channels = x[1], inner = product(x, 2);
  const std::optional<ir::fused::Activation> fused_act = ir::fused::fused_activation(node);
  const KernelActivation act = kernel_activation(node);  // ParamAct::None for a plain BatchNormalization
  const std::string kind = fused_act ? "channel_affine+" + fused_act->op : "channel_affine";
  const int64_t x_image = lc.image_floats(node.input(0));  // a strided block of a Concat's output, or 0: dense
  lc.add_step(node, kind,
              fmt::format("{} channels{}", channels, x_image ? fmt::format(", input images {} floats apart", x_image) : ""),
              {lc.slot(node.input(0))}, output_slots(lc, node),
              [=](const float* const* in, float* const* out, Stream s) {
                kernels::launch_channel_affine(in[0], scale_d, shift_d, out[0], batch, channels, inner, s, act.act,
                                               act.alpha, act.beta, x_image);
              });
}

}  // namespace

// y = x * scale[c] + shift[c] with scale = gamma / sqrt(var + eps), shift = beta - mean * scale (double).
ChannelAffine batchnorm_affine(const ir::Node& node, LowerContext& lc) {
  const ir::Shape& x = input_shape(lc, node, 0);
  CNNRT_CHECK(x.size() >= 2, ErrorCode::Unsupported, "BatchNormalization of a rank-{} input", x.size());
  const float eps = node.attrs.get_float("epsilon", 1e-5f);
  const ir::HostTensor* gamma = lc.graph.constant_of(node.input(1));
  const ir::HostTensor* beta = lc.graph.constant_of(node.input(2));
  const ir::HostTensor* mean = lc.graph.constant_of(node.input(3));
  const ir::HostTensor* var = lc.graph.constant_of(node.input(4));
  CNNRT_CHECK(gamma && beta && mean && var, ErrorCode::Unsupported, "BatchNormalization with run-time statistics");
  const int64_t channels = x[1];
  std::vector<float> scale(static_cast<size_t>(channels)), shift(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) {
    const double s = gamma->value_at(c) / std::sqrt(var->value_at(c) + double(eps));
    scale[c] = static_cast<float>(s);
    shift[c] = static_cast<float>(beta->value_at(c) - mean->value_at(c) * s);
  }
  return {lc.context.weights.upload(scale, "bn_scale"), lc.context.weights.upload(shift, "bn_shift")};
}

std::vector<LoweringEntry> elementwise_lowerings() {
  std::vector<LoweringEntry> entries;
  for (const auto& [name, op] : unary_ops()) entries.push_back({name.c_str(), lower_unary});
  for (const auto& [name, op] : binary_ops()) entries.push_back({name.c_str(), lower_binary});
  entries.push_back({"Expand", lower_expand});
  entries.push_back({"BatchNormalization", lower_batchnorm});
  entries.push_back({ir::fused::kFusedBatchNorm, lower_batchnorm});
  return entries;
}

}  // namespace cnnrt::plan
