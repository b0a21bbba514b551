// What every convolution kernel shares: the layer geometry and the fused epilogue (bias, activation,
// residual add, pooling). Host-safe: the planner includes it. Device helpers are in conv_device.cuh.
//
// Epilogue order (after the sum over C*KH*KW): + bias[f], + residual (same shape as the conv output),
// activation, then pooling over the activated map. The activation kind is a compile-time parameter
// (Act::None and Act::Relu are the hot paths); Act::Param selects LeakyRelu/Clip/Sigmoid/Tanh from a
// warp-uniform runtime value, for the rarer activations, so that each kernel family needs three
// instantiations per configuration instead of six.
#pragma once

#include <cstdint>
#ifndef __CUDACC_RTC__  // (NVRTC: the chain kernels compiled at plan time, conv_chain_device.cuh)
#include <algorithm>
#include <utility>
#include <vector>
#endif

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

// The conv-output region a block must compute to produce pooled rows [p0, p0 + count): first row and
// row count (may extend outside [0, OH); callers clip).
__host__ __device__ inline void pool_source_range(int p0, int count, int stride, int pad, int kernel, int dil,
                                                  int* first, int* extent) {
  *first = p0 * stride - pad;
  *extent = (count - 1) * stride + (kernel - 1) * dil + 1;
}

// Largest pooled tile whose source region fits a conv tile of `conv_tile` outputs along one axis (0: the
// pooling window does not fit).
inline int pooled_tile(int conv_tile, int kernel, int dilation, int stride) {
  const int span = (kernel - 1) * dilation + 1;
  return span > conv_tile ? 0 : (conv_tile - span) / stride + 1;
}

// How a kernel that computes TH x TW conv outputs per block covers one image: tiles across and down, and,
// when it pools, the pooled outputs each tile produces (ptile_h x ptile_w; 0 when it does not pool).
struct TileGrid {
  int tiles_x = 0, tiles_y = 0;
  int ptile_h = 0, ptile_w = 0;
};
inline TileGrid tile_grid(int tile_h, int tile_w, bool pooled, const ConvGeometry& g, const Epilogue& e) {
  TileGrid t;
  if (pooled) {
    t.ptile_h = pooled_tile(tile_h, e.pool.kh, e.pool.dil_h, e.pool.sh);
    t.ptile_w = pooled_tile(tile_w, e.pool.kw, e.pool.dil_w, e.pool.sw);
    t.tiles_x = (e.pool.PW + t.ptile_w - 1) / t.ptile_w;
    t.tiles_y = (e.pool.PH + t.ptile_h - 1) / t.ptile_h;
  } else {
    t.tiles_x = (g.OW + tile_w - 1) / tile_w;
    t.tiles_y = (g.OH + tile_h - 1) / tile_h;
  }
  return t;
}

#ifndef __CUDACC_RTC__
// Variants with a heuristic score (estimated relative time, lower is better), in the order the planner tries
// them and picks from when tuning is off: by score, equal scores in the order they were listed.
template <class Variant>
std::vector<Variant> rank_by_score(std::vector<std::pair<Variant, double>> scored) {
  std::stable_sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  std::vector<Variant> out;
  out.reserve(scored.size());
  for (auto& s : scored) out.push_back(std::move(s.first));
  return out;
}
#endif  // __CUDACC_RTC__

}  // namespace cnnrt::kernels
