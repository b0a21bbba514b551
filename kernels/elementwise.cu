// Unary elementwise ops: one kernel for all ops. The op is a kernel argument, the same for every thread, so
// the switch in the loop is a uniform branch the warp takes together; one instantiation instead of twenty
// keeps build time down, and the kernel stays bound by memory bandwidth either way.
#include "kernels/elementwise.cuh"
#include "kernels/nd_index.cuh"
#include "kernels/launch.cuh"

namespace cnnrt::kernels {
namespace {

constexpr int kThreads = 256;

// Full-precision math (expf, tanhf, erff, ...; no fast-math intrinsics): the CPU reference uses <cmath>.
__device__ float apply_unary(UnaryOp op, const UnaryParams& p, float x) {
  switch (op) {
    case UnaryOp::Relu: return x > 0.0f ? x : 0.0f;
    case UnaryOp::LeakyRelu: return x >= 0.0f ? x : p.alpha * x;
    case UnaryOp::Clip: {
      // Comparisons, not fminf/fmaxf, so that NaN propagates as in std::min/std::max.
      const float low = x < p.min ? p.min : x;
      return p.max < low ? p.max : low;
    }
    case UnaryOp::Sigmoid: {
      if (x >= 0.0f) return 1.0f / (1.0f + expf(-x));
      const float e = expf(x);
      return e / (1.0f + e);
    }
    case UnaryOp::Tanh: return tanhf(x);
    case UnaryOp::Abs: return fabsf(x);
    case UnaryOp::Neg: return -x;
    case UnaryOp::Exp: return expf(x);
    case UnaryOp::Log: return logf(x);
    case UnaryOp::Sqrt: return sqrtf(x);
    case UnaryOp::Reciprocal: return 1.0f / x;
    case UnaryOp::Floor: return floorf(x);
    case UnaryOp::Ceil: return ceilf(x);
    case UnaryOp::Elu: return x >= 0.0f ? x : p.alpha * expm1f(x);
    case UnaryOp::Selu: return x > 0.0f ? p.gamma * x : p.gamma * p.alpha * expm1f(x);
    case UnaryOp::HardSigmoid: return fmaxf(0.0f, fminf(1.0f, p.alpha * x + p.beta));
    case UnaryOp::HardSwish: return x * fmaxf(0.0f, fminf(1.0f, x / 6.0f + 0.5f));
    case UnaryOp::Softplus: return x > 0.0f ? x + log1pf(expf(-x)) : log1pf(expf(x));
    case UnaryOp::Softsign: return x / (1.0f + fabsf(x));
    case UnaryOp::Erf: return erff(x);
    case UnaryOp::Swish: return x / (1.0f + __expf(-p.alpha * x));
    case UnaryOp::Gelu: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case UnaryOp::GeluTanh: return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
    case UnaryOp::Scale: return p.alpha * x;
  }
  return x;
}

// With `use_float4`, the first count / 4 * 4 elements go as float4 and the rest one by one.
__global__ void unary_kernel(UnaryOp op, UnaryParams params, const float* x, float* y, int64_t count, bool use_float4) {
  wait_for_prior_grid();  // launched overlapped (PDL): nothing global is touched before this
  const int64_t first = global_thread_index<int64_t>();
  const int64_t step = global_thread_count<int64_t>();
  int64_t scalar_begin = 0;
  if (use_float4) {
    const int64_t packs = count / 4;
    for (int64_t i = first; i < packs; i += step) {
      Pack<4> pack = load_pack<4>(x, 4 * i, false);
#pragma unroll
      for (int e = 0; e < 4; ++e) pack.v[e] = apply_unary(op, params, pack.v[e]);
      store_pack<4>(y, 4 * i, pack);
    }
    scalar_begin = packs * 4;
  }
  for (int64_t i = scalar_begin + first; i < count; i += step) y[i] = apply_unary(op, params, x[i]);
}

}  // namespace

void launch_unary(UnaryOp op, const UnaryParams& params, const float* x, float* y, int64_t count, cudaStream_t stream) {
  if (count <= 0) return;
  const bool use_float4 = aligned_16(x) && aligned_16(y);
  const int64_t work = use_float4 ? (count + 3) / 4 : count;
  launch_overlapped(unary_kernel, dim3(blocks_for(work, kThreads)), dim3(kThreads), 0, stream, 1, op, params, x, y,
                    count, use_float4);
}

void launch_activation(ParamAct act, float alpha, float beta, const float* x, float* y, int64_t count,
                       cudaStream_t stream) {
  UnaryParams p;
  UnaryOp op = UnaryOp::Scale;
  p.alpha = 1.0f;  // ParamAct::None: a copy
  switch (act) {
    case ParamAct::None: break;
    case ParamAct::Relu: op = UnaryOp::Relu; break;
    case ParamAct::LeakyRelu: op = UnaryOp::LeakyRelu; p.alpha = alpha; break;
    case ParamAct::Clip: op = UnaryOp::Clip; p.min = alpha; p.max = beta; break;
    case ParamAct::Sigmoid: op = UnaryOp::Sigmoid; break;
    case ParamAct::Tanh: op = UnaryOp::Tanh; break;
    case ParamAct::HardSigmoid: op = UnaryOp::HardSigmoid; p.alpha = alpha; p.beta = beta; break;
    case ParamAct::HardSwish: op = UnaryOp::HardSwish; break;
    case ParamAct::Swish: op = UnaryOp::Swish; p.alpha = alpha; break;
    case ParamAct::Gelu: op = UnaryOp::Gelu; break;
  }
  launch_unary(op, p, x, y, count, stream);
}

}  // namespace cnnrt::kernels
