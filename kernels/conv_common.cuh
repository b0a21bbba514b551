// What every convolution kernel shares beyond the layer description (kernels/layer.hpp: geometry and fused
// epilogue): how a tile of conv outputs maps to pooled outputs, and the heuristic order of variants.
// Host-safe: the planner includes it. Device helpers are in conv_device.cuh.
#pragma once

#include <cstdint>
#ifndef __CUDACC_RTC__  // (NVRTC: the chain kernels compiled at plan time, conv_chain_device.cuh)
#include <algorithm>
#include <utility>
#include <vector>
#endif

#include "kernels/common.cuh"
#include "kernels/layer.hpp"

namespace cnnrt::kernels {

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
