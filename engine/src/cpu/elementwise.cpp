// Elementwise kernels: activations, Clip, broadcast arithmetic and comparisons, variadic Max/Min/Sum/Mean,
// PRelu, Where, Not, inference BatchNormalization. Booleans are int64 0/1.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "cpu/kernel_util.hpp"

namespace cnnrt::cpu {
namespace {

using ir::HostTensor;

// ---- unary activations -------------------------------------------------------------------------------

template <class Fn>
void map_floats(const HostTensor& in, HostTensor& out, Fn fn) {
  const float* x = in.f32();
  float* y = out.f32();
  for (int64_t i = 0; i < in.numel(); ++i) y[i] = fn(x[i]);
}

float relu(float x) { return x > 0.0f ? x : 0.0f; }
// Split at 0 so that exp never overflows.
float sigmoid(float x) {
  if (x >= 0.0f) return 1.0f / (1.0f + std::exp(-x));
  const float e = std::exp(x);
  return e / (1.0f + e);
}
float tanh_of(float x) { return std::tanh(x); }
float abs_of(float x) { return std::fabs(x); }
float negate(float x) { return -x; }
float exp_of(float x) { return std::exp(x); }
float log_of(float x) { return std::log(x); }
float sqrt_of(float x) { return std::sqrt(x); }
float reciprocal(float x) { return 1.0f / x; }
float floor_of(float x) { return std::floor(x); }
float ceil_of(float x) { return std::ceil(x); }
float softsign(float x) { return x / (1.0f + std::fabs(x)); }
// log(1 + e^x) without overflow for large x.
float softplus(float x) { return x > 0.0f ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }
float erf_of(float x) { return std::erf(x); }
float hard_swish(float x) { return x * std::max(0.0f, std::min(1.0f, x / 6.0f + 0.5f)); }

template <float (*Function)(float)>
void unary_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  map_floats(*in[0], *out[0], Function);
}

void leaky_relu_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  const float alpha = node.attrs.get_float("alpha", 0.01f);
  map_floats(*in[0], *out[0], [alpha](float x) { return x >= 0.0f ? x : alpha * x; });
}

void elu_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  const float alpha = node.attrs.get_float("alpha", 1.0f);
  map_floats(*in[0], *out[0], [alpha](float x) { return x >= 0.0f ? x : alpha * std::expm1(x); });
}

void selu_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  const float alpha = node.attrs.get_float("alpha", 1.67326319217681884765625f);
  const float gamma = node.attrs.get_float("gamma", 1.05070102214813232421875f);
  map_floats(*in[0], *out[0], [=](float x) { return x > 0.0f ? gamma * x : gamma * alpha * std::expm1(x); });
}

void hard_sigmoid_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  const float alpha = node.attrs.get_float("alpha", 0.2f);
  const float beta = node.attrs.get_float("beta", 0.5f);
  map_floats(*in[0], *out[0], [=](float x) { return std::max(0.0f, std::min(1.0f, alpha * x + beta)); });
}

void swish_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  const float alpha = node.attrs.get_float("alpha", 1.0f);
  map_floats(*in[0], *out[0], [alpha](float x) { return x * sigmoid(alpha * x); });
}

void gelu_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  if (node.attrs.get_string("approximate", "none") == "tanh") {
    map_floats(*in[0], *out[0], [](float x) {
      const double v = x;
      return static_cast<float>(0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))));
    });
  } else {
    map_floats(*in[0], *out[0], [](float x) { return static_cast<float>(0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)))); });
  }
}

void clip_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  const float min = node.attrs.get_float("min", -std::numeric_limits<float>::infinity());
  const float max = node.attrs.get_float("max", std::numeric_limits<float>::infinity());
  map_floats(*in[0], *out[0], [=](float x) { return std::min(std::max(x, min), max); });
}

// ---- broadcast arithmetic ----------------------------------------------------------------------------

// int64 arithmetic wraps around (as two's complement hardware does) rather than being undefined.
template <class T>
constexpr bool kIsInt = std::is_integral_v<T>;
int64_t wrap(uint64_t bits) { return static_cast<int64_t>(bits); }

struct AddOp {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (kIsInt<T>) return wrap(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
    else return a + b;
  }
};
struct SubOp {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (kIsInt<T>) return wrap(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
    else return a - b;
  }
};
struct MulOp {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (kIsInt<T>) return wrap(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
    else return a * b;
  }
};
struct DivOp {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (kIsInt<T>) {
      // Integer division truncates toward zero, as in C++ and ONNX Runtime.
      CNNRT_CHECK(b != 0, ErrorCode::InvalidModel, "int64 division of {} by zero", a);
      if (a == std::numeric_limits<int64_t>::min() && b == -1) return a;  // the one overflowing quotient
      return a / b;
    } else {
      return a / b;
    }
  }
};
struct MaxOp {
  template <class T>
  T operator()(T a, T b) const { return std::max(a, b); }
};
struct MinOp {
  template <class T>
  T operator()(T a, T b) const { return std::min(a, b); }
};
struct EqualOp {
  template <class T>
  int64_t operator()(T a, T b) const { return a == b ? 1 : 0; }
};
struct LessOp {
  template <class T>
  int64_t operator()(T a, T b) const { return a < b ? 1 : 0; }
};
struct GreaterOp {
  template <class T>
  int64_t operator()(T a, T b) const { return a > b ? 1 : 0; }
};

// out = op(a, b) under numpy broadcasting; T is the inputs' element type, R the output's.
template <class T, class R, class Op>
void broadcast_binary(const HostTensor& a, const HostTensor& b, HostTensor& out, Op op) {
  const T* pa = data_of<T>(a);
  const T* pb = data_of<T>(b);
  R* po = data_of<R>(out);
  const std::vector<StridedView> views{broadcast_view(a.shape(), out.shape()), broadcast_view(b.shape(), out.shape())};
  for_each_index(out.shape(), views, [&](int64_t o, const int64_t* at) { po[o] = op(pa[at[0]], pb[at[1]]); });
}

template <class Op>
void arithmetic_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  dispatch_dtype(in[0]->dtype(), [&](auto zero) {
    using T = decltype(zero);
    broadcast_binary<T, T>(*in[0], *in[1], *out[0], Op{});
  });
}

template <class Op>
void compare_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  dispatch_dtype(in[0]->dtype(), [&](auto zero) {
    using T = decltype(zero);
    broadcast_binary<T, int64_t>(*in[0], *in[1], *out[0], Op{});
  });
}

void pow_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  const HostTensor* exponent = in[1];
  HostTensor float_exponent;  // opset 12 allows int64 exponents
  if (exponent->dtype() == ir::DType::Int64) {
    float_exponent = HostTensor(ir::DType::Float32, exponent->shape());
    for (int64_t i = 0; i < exponent->numel(); ++i) float_exponent.f32()[i] = static_cast<float>(exponent->i64()[i]);
    exponent = &float_exponent;
  }
  broadcast_binary<float, float>(*in[0], *exponent, *out[0], [](float a, float b) { return std::pow(a, b); });
}

void prelu_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  broadcast_binary<float, float>(*in[0], *in[1], *out[0], [](float x, float slope) { return x < 0 ? x * slope : x; });
}

// ---- variadic Max / Min / Sum / Mean -----------------------------------------------------------------

// Folds all inputs into an accumulator of the output's shape: acc = in0, then acc = combine(acc, ink).
template <class Acc, class T, class Combine>
std::vector<Acc> fold_inputs(const Inputs& in, const ir::Shape& shape, Combine combine) {
  std::vector<Acc> acc(static_cast<size_t>(ir::numel(shape)));
  for (size_t k = 0; k < in.size(); ++k) {
    const T* src = data_of<T>(*in[k]);
    for_each_index(shape, {broadcast_view(in[k]->shape(), shape)}, [&](int64_t o, const int64_t* at) {
      const Acc value = static_cast<Acc>(src[at[0]]);
      acc[o] = k == 0 ? value : combine(acc[o], value);
    });
  }
  return acc;
}

// Sums of floats accumulate in double; everything else in its own type.
template <class T>
using AccumulatorOf = std::conditional_t<std::is_same_v<T, float>, double, T>;

template <class Combine>
void variadic_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  HostTensor& result = *out[0];
  dispatch_dtype(result.dtype(), [&](auto zero) {
    using T = decltype(zero);
    using Acc = AccumulatorOf<T>;
    const std::vector<Acc> acc = fold_inputs<Acc, T>(in, result.shape(), Combine{});
    std::transform(acc.begin(), acc.end(), data_of<T>(result), [](Acc v) { return static_cast<T>(v); });
  });
}

void mean_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  const std::vector<double> acc = fold_inputs<double, float>(in, out[0]->shape(), AddOp{});
  const double count = static_cast<double>(in.size());
  std::transform(acc.begin(), acc.end(), out[0]->f32(), [count](double v) { return static_cast<float>(v / count); });
}

// ---- Where / Not -------------------------------------------------------------------------------------

void where_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  const ir::Shape& shape = out[0]->shape();
  const std::vector<StridedView> views{broadcast_view(in[0]->shape(), shape), broadcast_view(in[1]->shape(), shape),
                                       broadcast_view(in[2]->shape(), shape)};
  dispatch_dtype(out[0]->dtype(), [&](auto zero) {
    using T = decltype(zero);
    const int64_t* condition = in[0]->i64();
    const T* x = data_of<T>(*in[1]);
    const T* y = data_of<T>(*in[2]);
    T* result = data_of<T>(*out[0]);
    for_each_index(shape, views, [&](int64_t o, const int64_t* at) {
      result[o] = condition[at[0]] != 0 ? x[at[1]] : y[at[2]];
    });
  });
}

void not_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  for (int64_t i = 0; i < in[0]->numel(); ++i) out[0]->i64()[i] = in[0]->i64()[i] == 0 ? 1 : 0;
}

// ---- BatchNormalization ------------------------------------------------------------------------------

// y = (x - mean) / sqrt(var + epsilon) * scale + bias, per channel (axis 1), folded into one multiply-add.
void batch_norm_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  const HostTensor& x = *in[0];
  const float* scale = in[1]->f32();
  const float* bias = in[2]->f32();
  const float* mean = in[3]->f32();
  const float* variance = in[4]->f32();
  const double epsilon = node.attrs.get_float("epsilon", 1e-5f);
  const int64_t batch = x.shape()[0];
  const int64_t channels = x.shape()[1];
  const int64_t plane = extent_product(x.shape(), 2, x.shape().size());  // elements per (n, c)
  float* y = out[0]->f32();
  for (int64_t c = 0; c < channels; ++c) {
    const double multiplier = scale[c] / std::sqrt(static_cast<double>(variance[c]) + epsilon);
    const double offset = bias[c] - mean[c] * multiplier;
    for (int64_t n = 0; n < batch; ++n) {
      const int64_t start = (n * channels + c) * plane;
      for (int64_t i = start; i < start + plane; ++i) y[i] = static_cast<float>(x.f32()[i] * multiplier + offset);
    }
  }
}

}  // namespace

void add_elementwise_kernels(KernelTable& table) {
  table.insert(table.end(), {
      {"Relu", unary_kernel<relu>},
      {"Sigmoid", unary_kernel<sigmoid>},
      {"Tanh", unary_kernel<tanh_of>},
      {"Abs", unary_kernel<abs_of>},
      {"Neg", unary_kernel<negate>},
      {"Exp", unary_kernel<exp_of>},
      {"Log", unary_kernel<log_of>},
      {"Sqrt", unary_kernel<sqrt_of>},
      {"Reciprocal", unary_kernel<reciprocal>},
      {"Floor", unary_kernel<floor_of>},
      {"Ceil", unary_kernel<ceil_of>},
      {"Softsign", unary_kernel<softsign>},
      {"Softplus", unary_kernel<softplus>},
      {"Erf", unary_kernel<erf_of>},
      {"HardSwish", unary_kernel<hard_swish>},
      {"LeakyRelu", leaky_relu_kernel},
      {"Elu", elu_kernel},
      {"Selu", selu_kernel},
      {"HardSigmoid", hard_sigmoid_kernel},
      {"Swish", swish_kernel},
      {"Gelu", gelu_kernel},
      {"Clip", clip_kernel},
      {"Add", arithmetic_kernel<AddOp>},
      {"Sub", arithmetic_kernel<SubOp>},
      {"Mul", arithmetic_kernel<MulOp>},
      {"Div", arithmetic_kernel<DivOp>},
      {"Pow", pow_kernel},
      {"PRelu", prelu_kernel},
      {"Max", variadic_kernel<MaxOp>},
      {"Min", variadic_kernel<MinOp>},
      {"Sum", variadic_kernel<AddOp>},
      {"Mean", mean_kernel},
      {"Equal", compare_kernel<EqualOp>},
      {"Less", compare_kernel<LessOp>},
      {"Greater", compare_kernel<GreaterOp>},
      {"Where", where_kernel},
      {"Not", not_kernel},
      {"BatchNormalization", batch_norm_kernel},
  });
}

}  // namespace cnnrt::cpu
