// What a layer is, in the one form every part of cnnrt uses: shape inference and the CPU reference (the
// window axis), the planner, the kernels, the cuDNN comparison, the lab and the tests (the convolution
// geometry and its fused epilogue). Plain data, usable on the host and the device; no CUDA headers, so the
// CPU-only build includes it too.
#pragma once

#include <cstdint>
#ifndef __CUDACC_RTC__  // (NVRTC compiles the chain kernel at plan time: it has no <cmath>)
#include <algorithm>
#include <cmath>
#include <vector>
#endif

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define CNNRT_HOST_DEVICE __host__ __device__
#else
#define CNNRT_HOST_DEVICE
#endif

namespace cnnrt::kernels {

// One spatial axis of a window op (convolution or pooling), padding resolved (ir::resolve_window). The
// window at output position o covers input positions o * stride - pad_begin + t * dilation for taps t in
// [0, kernel); positions outside [0, input) are padding. A 1-D op runs as 2-D with a unit leading axis (all
// fields at their defaults: input = output = kernel = 1).
struct SlidingAxis {
  int64_t input = 1;   // input extent (elements)
  int64_t output = 1;  // output extent, ceil_mode applied
  int64_t kernel = 1;  // taps, before dilation
  int64_t stride = 1;
  int64_t dilation = 1;
  int64_t pad_begin = 0;
  int64_t pad_end = 0;

  CNNRT_HOST_DEVICE int64_t dilated_kernel() const { return (kernel - 1) * dilation + 1; }
};

// A convolution [N, C, H, W] -> [N, F, OH, OW] with weights [F, C / groups, KH, KW]; a 1-D convolution has
// H = OH = KH = 1. int: the planner refuses layers whose extents do not fit.
struct ConvGeometry {
  int N = 1, C = 1, H = 1, W = 1;
  int F = 1, KH = 1, KW = 1;
  int OH = 1, OW = 1;
  int stride_h = 1, stride_w = 1;
  int pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  int dil_h = 1, dil_w = 1;
  int groups = 1;

  CNNRT_HOST_DEVICE SlidingAxis rows() const { return {H, OH, KH, stride_h, dil_h, pad_top, pad_bottom}; }
  CNNRT_HOST_DEVICE SlidingAxis cols() const { return {W, OW, KW, stride_w, dil_w, pad_left, pad_right}; }
};

// The activation a kernel applies: compiled in (None, Relu: the hot paths), or chosen at run time among
// every kind (Param), so each kernel family needs three instantiations per configuration instead of six.
enum class Act : int { None = 0, Relu = 1, Param = 2 };
// The activations the fused epilogue can apply, with their parameters (Epilogue::alpha, beta): LeakyRelu's
// slope (alpha), Clip's bounds (alpha, beta), HardSigmoid's max(0, min(1, alpha * x + beta)), Swish's
// x * sigmoid(alpha * x) (SiLU: alpha = 1); HardSwish is x * max(0, min(1, x / 6 + 1/2)) and Gelu the exact
// x * (1 + erf(x / sqrt 2)) / 2.
enum class ParamAct : int { None = 0, Relu, LeakyRelu, Clip, Sigmoid, Tanh, HardSigmoid, HardSwish, Swish, Gelu };

// The compiled-in activation that serves `act`: its own where one exists, else Param.
CNNRT_HOST_DEVICE inline Act compiled_act(ParamAct act) {
  return act == ParamAct::None ? Act::None : act == ParamAct::Relu ? Act::Relu : Act::Param;
}

enum class FusedPool : int { None = 0, Max = 1, Avg = 2 };

// Pooling after the activation, over the conv output map [OH, OW] -> [PH, PW]. Window geometry as ONNX
// MaxPool/AveragePool after padding is resolved (ir::resolve_window); ceil_mode is already in PH/PW.
struct PoolGeometry {
  FusedPool kind = FusedPool::None;
  int kh = 1, kw = 1, sh = 1, sw = 1;
  int pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  int dil_h = 1, dil_w = 1;
  int PH = 0, PW = 0;
  bool count_include_pad = false;
};

// The fused epilogue, in order after the sum over C*KH*KW: + bias[f], + residual (the conv output's
// shape), activation, then pooling over the activated map, and where the result goes. A residual and a pool
// are never combined.
struct Epilogue {
  const float* bias = nullptr;          // device [F], or nullptr
  const float* residual = nullptr;      // device [N, F, OH, OW], or nullptr; bound per launch
  ParamAct param_act = ParamAct::None;  // the activation
  float alpha = 0.01f;                  // LeakyRelu slope; Clip min
  float beta = 0.0f;                    // Clip max
  PoolGeometry pool;
  // Floats from one image of the output to the next; 0: the output is one dense tensor (F times the output
  // plane). More when the step writes its block of a channel Concat's output at batch > 1: image n's F planes
  // then start at y + n * out_image_floats. Never with a residual (which stays dense); only families that say
  // so (ConvFamily::writes_image_stride) are offered such a layer.
  int64_t out_image_floats = 0;

  // The floats from one output image to the next, for an image of `dense` floats (F times the output plane).
  CNNRT_HOST_DEVICE int64_t out_image_stride(int64_t dense) const { return out_image_floats ? out_image_floats : dense; }
};

// How a kernel reads its input: producers fused in front of the sum. `shuffle` > 1: through ShuffleNet's channel
// shuffle of that many groups (a Reshape of [N, C, H, W] to [N, shuffle, C / shuffle, H, W], a Transpose of axes 1
// and 2, a Reshape back): channel c of the layer's input is channel (c % shuffle) * (C / shuffle) + c / shuffle of
// the tensor in memory. `scale` set: each value v of channel c (after the shuffle) becomes act(v * scale[c] +
// shift[c]) (a BatchNormalization and its activation in front of the convolution, DenseNet's pre-activation), the
// padding staying zero. `image_floats` set: image n of the input starts at x + n * image_floats (the input is a
// strided block of a channel Concat's output at batch > 1: DenseNet's running stack). Families that do not read a
// prologue are not offered a layer that has one (conv_candidates).
struct InputPrologue {
  int shuffle = 1;
  const float* scale = nullptr;  // device [C], or null: no affine
  const float* shift = nullptr;  // device [C]
  ParamAct act = ParamAct::None;
  float alpha = 0.0f, beta = 0.0f;  // the activation's parameters (Epilogue::alpha, beta)
  int64_t image_floats = 0;         // floats from one input image to the next; 0: dense (C * H * W)

  CNNRT_HOST_DEVICE bool any() const { return shuffle != 1 || scale != nullptr || image_floats != 0; }
  // The floats from one input image to the next, for an image of `dense` floats (C * H * W).
  CNNRT_HOST_DEVICE int64_t image_stride(int64_t dense) const { return image_floats ? image_floats : dense; }
  // The channel in memory of the layer's input channel c (of C).
  CNNRT_HOST_DEVICE int channel(int c, int C) const {
    return shuffle == 1 ? c : (c % shuffle) * (C / shuffle) + c / shuffle;
  }
};

// One convolution layer with its fused epilogue: what eligibility checks, packing and launches read.
struct ConvLayer {
  ConvGeometry g;
  Epilogue e;             // e.residual stays null here: each launch binds its own
  bool residual = false;  // whether launches add a residual operand
  InputPrologue in;       // how the input is read (as is, by default)

  bool pooled() const { return e.pool.kind != FusedPool::None; }
  // Whether the fused pooling's window is the whole conv output map (a global pooling: one output a plane).
  bool pooled_globally() const {
    const PoolGeometry& p = e.pool;
    return pooled() && p.PH == 1 && p.PW == 1 && p.kh == g.OH && p.kw == g.OW && p.pad_top == 0 && p.pad_left == 0 &&
           p.pad_bottom == 0 && p.pad_right == 0 && p.dil_h == 1 && p.dil_w == 1;
  }
  // Elements of the conv output before pooling, and of the step's output.
  int64_t conv_floats() const { return int64_t(g.N) * g.F * g.OH * g.OW; }
  int64_t out_floats() const { return pooled() ? int64_t(g.N) * g.F * e.pool.PH * e.pool.PW : conv_floats(); }
  // Floats of one image of the step's output, and the extent the step writes in: from its first output to past
  // its last (out_floats() unless the output has an image stride, Epilogue::out_image_floats).
  int64_t out_image_dense() const { return g.N > 0 ? out_floats() / g.N : 0; }
  int64_t out_extent_floats() const {
    return g.N > 0 ? int64_t(g.N - 1) * e.out_image_stride(out_image_dense()) + out_image_dense() : 0;
  }
  // The same for the input: from its first float to past its last (N * C * H * W unless it has an image stride,
  // InputPrologue::image_floats).
  int64_t in_extent_floats() const {
    const int64_t image = int64_t(g.C) * g.H * g.W;
    return g.N > 0 ? int64_t(g.N - 1) * in.image_stride(image) + image : 0;
  }
  // Useful floating-point operations (a multiply-add is two).
  double flops() const { return 2.0 * double(conv_floats()) * (double(g.C) / g.groups) * g.KH * g.KW; }
};

#ifndef __CUDACC_RTC__
// The activation in plain arithmetic on the host (float: the tests' references; double: the benchmark's
// FP64 answers). The kernels' own is conv_device.cuh's param_activate.
template <class T>
T apply_activation(ParamAct act, T v, float alpha, float beta) {
  switch (act) {
    case ParamAct::Relu: return v > T(0) ? v : T(0);
    case ParamAct::LeakyRelu: return v < T(0) ? v * T(alpha) : v;
    case ParamAct::Clip: return v < T(alpha) ? T(alpha) : (v > T(beta) ? T(beta) : v);
    case ParamAct::Sigmoid: return T(1) / (T(1) + std::exp(-v));
    case ParamAct::Tanh: return std::tanh(v);
    case ParamAct::HardSigmoid: return std::max(T(0), std::min(T(1), T(alpha) * v + T(beta)));
    case ParamAct::HardSwish: return v * std::max(T(0), std::min(T(1), v / T(6) + T(0.5)));
    case ParamAct::Swish: return v / (T(1) + std::exp(-T(alpha) * v));
    case ParamAct::Gelu: return T(0.5) * v * (T(1) + std::erf(v / std::sqrt(T(2))));
    default: return v;
  }
}

// The layer's input [N, C, H, W] as the convolution sees it: `x` (in memory) read through the layer's prologue;
// `scale` and `shift`: host copies of the prologue's (needed when it has them).
std::vector<float> apply_input_prologue(const ConvLayer& layer, const float* x, const float* scale = nullptr,
                                        const float* shift = nullptr);

// The geometry of a convolution whose spatial axes are `rows` and `cols` (a 1-D one: rows at its defaults).
ConvGeometry conv_geometry(int64_t N, int64_t C, int64_t F, int64_t groups, const SlidingAxis& rows,
                           const SlidingAxis& cols);
#endif  // __CUDACC_RTC__

}  // namespace cnnrt::kernels
