// What every convolution kernel shares: the layer geometry, the fused epilogue (bias, activation,
// residual add, pooling) and its device-side helpers.
//
// Epilogue order (after the sum over C*KH*KW): + bias[f], + residual (same shape as the conv output),
// activation, then pooling over the activated map. The activation kind is a compile-time parameter
// (Act::None and Act::Relu are the hot paths); Act::Param selects LeakyRelu/Clip/Sigmoid/Tanh from a
// warp-uniform runtime value, for the rarer activations, so that each kernel family needs three
// instantiations per configuration instead of six.
#pragma once

#include <cstdint>

#include "kernels/common.cuh"

namespace cnnrt::kernels {

// [N, C, H, W] -> [N, F, OH, OW]; pads are the begin (top/left) pads, the end pads follow from OH/OW.
struct ConvGeometry {
  int N = 1, C = 1, H = 1, W = 1;
  int F = 1, KH = 1, KW = 1;
  int OH = 1, OW = 1;
  int stride_h = 1, stride_w = 1;
  int pad_top = 0, pad_left = 0;
  int dil_h = 1, dil_w = 1;
  int groups = 1;
};

enum class Act : int { None = 0, Relu = 1, Param = 2 };
enum class ParamAct : int { None = 0, Relu, LeakyRelu, Clip, Sigmoid, Tanh };

enum class FusedPool : int { None = 0, Max = 1, Avg = 2 };

// Pooling after the activation, over the conv output map [OH, OW] -> [PH, PW]. Window geometry as
// ONNX MaxPool/AveragePool after padding is resolved (ir::resolve_window); ceil_mode is already in PH/PW.
struct PoolGeometry {
  FusedPool kind = FusedPool::None;
  int kh = 1, kw = 1, sh = 1, sw = 1;
  int pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  int dil_h = 1, dil_w = 1;
  int PH = 0, PW = 0;
  bool count_include_pad = false;
};

struct Epilogue {
  const float* bias = nullptr;      // [F] or nullptr
  const float* residual = nullptr;  // [N, F, OH, OW] or nullptr (not combined with pooling)
  ParamAct param_act = ParamAct::None;  // used when the kernel's Act is Act::Param
  float alpha = 0.01f;              // LeakyRelu slope; Clip min
  float beta = 0.0f;                // Clip max
  PoolGeometry pool;
};

template <Act ACT>
__device__ __forceinline__ float activate(float v, const Epilogue& e) {
  if constexpr (ACT == Act::Relu) {
    return fmaxf(v, 0.0f);
  } else if constexpr (ACT == Act::Param) {
    switch (e.param_act) {  // warp-uniform: every thread takes the same branch
      case ParamAct::Relu: return fmaxf(v, 0.0f);
      case ParamAct::LeakyRelu: return v < 0.0f ? v * e.alpha : v;
      case ParamAct::Clip: return fminf(fmaxf(v, e.alpha), e.beta);
      case ParamAct::Sigmoid: return 1.0f / (1.0f + __expf(-v));
      case ParamAct::Tanh: return tanhf(v);
      default: return v;
    }
  } else {
    return v;
  }
}

// Pools one output (n, f, py, px) from a map held in shared memory. `map` holds the activated conv
// outputs of rows [row0, row0+rows) and columns [col0, col0+cols) of one (n, f) plane, row pitch `pitch`;
// the window must lie inside that region or outside the conv output (padding).
__device__ __forceinline__ float pool_from_smem(const float* map, int pitch, int row0, int col0, int py, int px,
                                                const PoolGeometry& p, int OH, int OW) {
  const int y0 = py * p.sh - p.pad_top;
  const int x0 = px * p.sw - p.pad_left;
  float best = -INFINITY, sum = 0.0f;
  int count = 0;
  for (int i = 0; i < p.kh; ++i) {
    const int y = y0 + i * p.dil_h;
    if (y < 0 || y >= OH) continue;
    for (int j = 0; j < p.kw; ++j) {
      const int x = x0 + j * p.dil_w;
      if (x < 0 || x >= OW) continue;
      const float v = map[(y - row0) * pitch + (x - col0)];
      best = fmaxf(best, v);
      sum += v;
      ++count;
    }
  }
  if (p.kind == FusedPool::Max) return best;
  if (p.count_include_pad) {
    // ONNX counts padded positions, but not window positions beyond the padded extent (ceil_mode).
    const int hy = min(y0 + (p.kh - 1) * p.dil_h + 1, OH + p.pad_bottom) - y0;
    const int wx = min(x0 + (p.kw - 1) * p.dil_w + 1, OW + p.pad_right) - x0;
    return sum / static_cast<float>(((hy + p.dil_h - 1) / p.dil_h) * ((wx + p.dil_w - 1) / p.dil_w));
  }
  return count > 0 ? sum / static_cast<float>(count) : 0.0f;
}

// The conv-output region a block must compute to produce pooled rows [p0, p0 + count): first row and
// row count (may extend outside [0, OH); callers clip).
__host__ __device__ inline void pool_source_range(int p0, int count, int stride, int pad, int kernel, int dil,
                                                  int* first, int* extent) {
  *first = p0 * stride - pad;
  *extent = (count - 1) * stride + (kernel - 1) * dil + 1;
}

}  // namespace cnnrt::kernels
