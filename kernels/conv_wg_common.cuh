// Shared by the 3xTF32 wgmma convolutions (conv2d_wgr.cu: wgr, conv2d_wgh.cu: wgh): the stage geometry, the
// kernel parameters derived from the layer, the pixel-row epilogue and the sum of a K split over a cluster.
#pragma once

#include <cooperative_groups.h>

#include "kernels/conv_common.cuh"
#include "kernels/conv_device.cuh"  // (before tc_common.cuh, whose epilogue uses its activate())
#include "kernels/tc_common.cuh"
#include "kernels/wgmma.cuh"

namespace cnnrt::kernels::wg_common {

constexpr int kBK = 32;         // K per stage: 32 k = (tap, channel) of the order (ky, kx, c)
constexpr int kHalfBK = kBK / 2;  // wgr's half-stage: 16 channels of one tap (its C is a multiple of this)
constexpr int kRowBytes = 128;  // one K-major operand row of a stage: 32 floats
constexpr int kFAlign = 128;    // Fpad of pack_wg_filters: a multiple of every filter tile
// Stages summed by the tensor cores into one partial before it is added to the FP32 sum, in wgr: 2 stages are
// 8 truncating sums of the large partial (24 on the 128-filter tile, whose corrections share it:
// mma_3xtf32_step). wgh sets its own (Cfg::P, 2 or 4).
constexpr int kStagesPerPartial = 2;

// One k step (8) of the 3xTF32 product of a warpgroup's 64 pixel rows (A: big and small halves, registers) by BN
// filter columns (B: descriptors of the big and small halves): the two correction terms A_small * B_big and
// A_big * B_small into `cross`, then A_big * B_big into `part`; `accumulate` 0 starts both from zero. The tensor
// cores truncate every sum they form to FP32, a loss of up to an ulp of the accumulator each: kept apart, the
// large partial takes one such sum a k step instead of three, and the corrections' own losses are 2^-10 smaller.
// SEPARATE false: `cross` is not used, all three into `part` (the 128-filter tiles have no registers for a second
// accumulator).
template <bool SEPARATE, int NT>
__device__ __forceinline__ void mma_3xtf32_step(float (&part)[NT][4], float (&cross)[NT][4], const uint32_t (&a_big)[4],
                                                const uint32_t (&a_small)[4], uint64_t b_big, uint64_t b_small,
                                                int accumulate) {
  static_assert(NT == 4 || NT == 8 || NT == 16, "64 x 32, 64 x 64 or 64 x 128 tiles");
  float (&c)[NT][4] = SEPARATE ? cross : part;
  if constexpr (NT == 4) {
    wgmma::wgmma_rs_m64n32k8(c, a_small, b_big, accumulate);
    wgmma::wgmma_rs_m64n32k8(c, a_big, b_small, 1);
    wgmma::wgmma_rs_m64n32k8(part, a_big, b_big, SEPARATE ? accumulate : 1);
  } else if constexpr (NT == 8) {
    wgmma::wgmma_rs_m64n64k8(c, a_small, b_big, accumulate);
    wgmma::wgmma_rs_m64n64k8(c, a_big, b_small, 1);
    wgmma::wgmma_rs_m64n64k8(part, a_big, b_big, SEPARATE ? accumulate : 1);
  } else {
    wgmma::wgmma_rs_m64n128k8(c, a_small, b_big, accumulate);
    wgmma::wgmma_rs_m64n128k8(c, a_big, b_small, 1);
    wgmma::wgmma_rs_m64n128k8(part, a_big, b_big, SEPARATE ? accumulate : 1);
  }
}

// The tiles of at most 64 filters keep the correction terms in an accumulator of their own (mma_3xtf32_step).
constexpr bool separate_cross(int filters_per_tile) { return filters_per_tile <= 64; }

// acc += part (+ cross): a partial joins the FP32 sum.
template <bool SEPARATE, int NT>
__device__ __forceinline__ void add_partial(float (&acc)[NT][4], const float (&part)[NT][4],
                                            const float (&cross)[NT][4]) {
#pragma unroll
  for (int i = 0; i < NT; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] += SEPARATE ? part[i][j] + cross[i][j] : part[i][j];
  }
}

// The row length of the packed filters: C * KH * KW rounded up to whole stages (zeros past C * KH * KW).
inline int packed_k(int C, int KH, int KW) { return (C * KH * KW + kBK - 1) / kBK * kBK; }

struct Params {
  int npix;     // N * OH * OW
  int ohw;      // OH * OW
  int hw, chw;  // H * W, C * H * W
  int cgroups;  // C / 32: stages per filter tap (wgh, whose C is a multiple of 32)
  int nk;       // stages: K / 32
  int K;        // packed_k: C * KH * KW rounded up to a stage, the row length of the packed filters
  int f_pad;    // F rounded up to kFAlign
  int ftiles;   // filter tiles per pixel tile
  int split;    // blocks (a cluster along z) that share one output tile's K stages
};

// `filters_per_tile`: the block tile's filter count.
inline Params make_params(const ConvGeometry& g, int filters_per_tile, int split) {
  Params q;
  q.split = split;
  q.ohw = g.OH * g.OW;
  q.npix = g.N * q.ohw;
  q.hw = g.H * g.W;
  q.chw = g.C * q.hw;
  q.cgroups = g.C / kBK;
  q.K = packed_k(g.C, g.KH, g.KW);
  q.nk = q.K / kBK;
  q.f_pad = tc::round_up(g.F, kFAlign);
  q.ftiles = (g.F + filters_per_tile - 1) / filters_per_tile;
  return q;
}

#ifdef __CUDACC__
// Epilogue of a warp's accumulator whose rows are output pixels and columns filters (wgr, wgh): row r of this
// thread (pixel gid + 8r of its warp's 16) goes to y[out[r] + f * ohw], nowhere when out[r] < 0; column
// f = f_first + 8c + 2*tig + v. + bias, + residual, activation. Only the column tiles c in [c_begin, c_end)
// are stored (a K split's share). The bias is loaded once a column, and the activation and the residual
// test are decided once (ACT and RES), not once a value: written per value, this epilogue was a quarter of
// a batch-32 block's instructions.
template <int NT, Act ACT, bool RES>
__device__ __forceinline__ void store_pixel_rows_as(const float (&acc)[NT][4], const int64_t (&out)[2], int f_first,
                                                    int F, int ohw, const Epilogue& e, float* __restrict__ y,
                                                    int c_begin, int c_end) {
  const int f_lane = f_first + 2 * (threadIdx.x & 3);
  float bias[NT][2];
#pragma unroll
  for (int c = 0; c < NT; ++c) {
#pragma unroll
    for (int v = 0; v < 2; ++v) {
      const int f = f_lane + 8 * c + v;
      bias[c][v] = e.bias && c >= c_begin && c < c_end && f < F ? __ldg(e.bias + f) : 0.0f;
    }
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (out[r] < 0) continue;
    const int64_t at = out[r] + static_cast<int64_t>(f_lane) * ohw;
#pragma unroll
    for (int c = 0; c < NT; ++c) {
      if (c < c_begin || c >= c_end) continue;
#pragma unroll
      for (int v = 0; v < 2; ++v) {
        if (f_lane + 8 * c + v >= F) continue;
        const int64_t idx = at + static_cast<int64_t>(8 * c + v) * ohw;
        float val = acc[c][2 * r + v] + bias[c][v];
        if constexpr (RES) val += __ldg(e.residual + idx);
        y[idx] = activate<ACT>(val, e);
      }
    }
  }
}

template <int NT, Act ACT>
__device__ __forceinline__ void store_pixel_rows(const float (&acc)[NT][4], const int64_t (&out)[2], int f_first,
                                                 int F, int ohw, const Epilogue& e, float* __restrict__ y,
                                                 int c_begin, int c_end) {
  if constexpr (ACT == Act::Param) {
    if (e.param_act == ParamAct::None) {  // the common run-time case: no activation at all
      if (e.residual) {
        store_pixel_rows_as<NT, Act::None, true>(acc, out, f_first, F, ohw, e, y, c_begin, c_end);
      } else {
        store_pixel_rows_as<NT, Act::None, false>(acc, out, f_first, F, ohw, e, y, c_begin, c_end);
      }
      return;
    }
  }
  if (e.residual) {
    store_pixel_rows_as<NT, ACT, true>(acc, out, f_first, F, ohw, e, y, c_begin, c_end);
  } else {
    store_pixel_rows_as<NT, ACT, false>(acc, out, f_first, F, ohw, e, y, c_begin, c_end);
  }
}

// The K split's sum: rank r of the cluster owns the accumulator tiles [r*NT/split, (r+1)*NT/split) of every
// thread; the other ranks store their values of those tiles into its shared memory `smem` ([sender][tile]
// [thread] float4, NT * THREADS * 16 bytes), and it adds them in rank order (the same sums in the same order
// on every run). Returns the owned tiles in [begin, end), for the epilogue. Every rank must be done with
// `smem` (its pipeline buffers) when it calls this. The split's ranks are the cluster's ranks base .. base + split - 1
// (a cluster of several splits: conv_pw.cuh); every rank of the cluster calls this.
template <int NT, int THREADS>
__device__ __forceinline__ void cluster_sum_tiles(float (&acc)[NT][4], uint8_t* smem, int rank, int split,
                                                  int& begin, int& end, int base = 0) {
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  const int tid = threadIdx.x, per = NT / split;
  cluster.sync();  // every rank is done with its pipeline buffers
  float4* recv = reinterpret_cast<float4*>(smem);
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    const int owner = t / per;
    if (owner == rank) continue;
    float4* dst = cluster.map_shared_rank(recv, base + owner);
    dst[(rank * per + t % per) * THREADS + tid] = make_float4(acc[t][0], acc[t][1], acc[t][2], acc[t][3]);
  }
  cluster.sync();  // the partial sums have landed
  begin = rank * per;
  end = begin + per;
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    if (t < begin || t >= end) continue;
    for (int src = 0; src < split; ++src) {
      if (src == rank) continue;
      const float4 v = recv[(src * per + t % per) * THREADS + tid];
      acc[t][0] += v.x;
      acc[t][1] += v.y;
      acc[t][2] += v.z;
      acc[t][3] += v.w;
    }
  }
}
#endif  // __CUDACC__

}  // namespace cnnrt::kernels::wg_common
