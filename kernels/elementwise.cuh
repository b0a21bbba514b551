// Unary elementwise ops (activations, Clip, math functions): y[i] = f(x[i]) over `count` contiguous floats.
#pragma once

#include "kernels/common.cuh"
#include "kernels/layer.hpp"

namespace cnnrt::kernels {

// Semantics follow ONNX (and engine/src/cpu, the reference). Parameters each op reads, from UnaryParams:
enum class UnaryOp {
  Relu,       // max(x, 0)
  LeakyRelu,  // x >= 0 ? x : alpha * x
  Clip,       // min(max(x, min), max); min/max are -inf/+inf when the node has none
  Sigmoid,    // 1 / (1 + e^-x), evaluated without overflow on either side
  Tanh,
  Abs,
  Neg,
  Exp,
  Log,
  Sqrt,
  Reciprocal,  // 1 / x
  Floor,
  Ceil,
  Elu,          // x >= 0 ? x : alpha * (e^x - 1)
  Selu,         // x > 0 ? gamma * x : gamma * alpha * (e^x - 1)
  HardSigmoid,  // max(0, min(1, alpha * x + beta))
  HardSwish,    // x * max(0, min(1, x / 6 + 1/2))
  Softplus,     // log(1 + e^x), without overflow for large x
  Softsign,     // x / (1 + |x|)
  Erf,
  Swish,  // x * sigmoid(alpha * x) (SiLU: alpha = 1)
  Gelu,      // x * (1 + erf(x / sqrt 2)) / 2
  GeluTanh,  // x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3))) / 2
  Scale,  // alpha * x: not an ONNX op; variadic Mean is Sum followed by Scale with alpha = 1 / inputs
};

struct UnaryParams {
  float alpha = 0.0f;  // LeakyRelu, Elu, Selu, HardSigmoid, Swish alpha; Scale factor
  float beta = 0.0f;   // HardSigmoid beta
  float gamma = 0.0f;  // Selu gamma
  float min = 0.0f;    // Clip lower bound
  float max = 0.0f;    // Clip upper bound
};

// y[i] = op(x[i]) for i < count. x and y may be the same buffer (in place). Any alignment and count; float4
// accesses (with a scalar tail) when x and y are both 16-byte aligned.
void launch_unary(UnaryOp op, const UnaryParams& params, const float* x, float* y, int64_t count, cudaStream_t stream);

// A fused epilogue's activation (kernels/layer.hpp) as a launch of its own: y[i] = act(x[i]), with the
// epilogue's alpha (LeakyRelu slope, Clip min) and beta (Clip max). ParamAct::None copies.
void launch_activation(ParamAct act, float alpha, float beta, const float* x, float* y, int64_t count,
                       cudaStream_t stream);

}  // namespace cnnrt::kernels
