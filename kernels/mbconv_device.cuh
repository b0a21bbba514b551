// Device pieces the inverted residual block kernels share (mbconv.cu: one launch; mbconv_split.cu: two;
// mbconv_tile.cu: one over output tiles).
#pragma once

#include "kernels/layer.hpp"

namespace cnnrt::kernels::mbconv_device {

__host__ __device__ inline int round4(int n) { return (n + 3) / 4 * 4; }

__device__ __forceinline__ float bias_at(const float* bias, int i) { return bias ? __ldg(bias + i) : 0.0f; }

// One depthwise output's sum over its window: `map` holds one channel's input rows from `row_lo` on (g.W floats a
// row), `w` its KH x KW taps; (iy0, ix0) the window's top-left input position. Taps outside the image add nothing.
__device__ __forceinline__ float depthwise_window(const float* map, int row_lo, const float* w, int iy0, int ix0,
                                                  const ConvGeometry& g) {
  float acc = 0.0f;
  for (int ky = 0; ky < g.KH; ++ky) {
    const int iy = iy0 + ky * g.dil_h;
    if (iy < 0 || iy >= g.H) continue;
    for (int kx = 0; kx < g.KW; ++kx) {
      const int ix = ix0 + kx * g.dil_w;
      if (ix >= 0 && ix < g.W) acc = fmaf(w[ky * g.KW + kx], map[(iy - row_lo) * g.W + ix], acc);
    }
  }
  return acc;
}

// The `ways` shares' partial sums at p, p + stride, ... added in a fixed order (four independent sums, then paired):
// the same result run to run.
__device__ __forceinline__ float sum_shares(const float* p, int ways, int stride) {
  float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  int k = 0;
  for (; k + 4 <= ways; k += 4) {
#pragma unroll
    for (int j = 0; j < 4; ++j) part[j] += p[(k + j) * stride];
  }
  for (; k < ways; ++k) part[0] += p[k * stride];
  return (part[0] + part[1]) + (part[2] + part[3]);
}

}  // namespace cnnrt::kernels::mbconv_device
