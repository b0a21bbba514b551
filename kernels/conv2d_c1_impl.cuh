// The single-input-channel convolution kernel template (see conv2d_c1.cuh), shared by conv2d_c1.cu (the
// instantiations the planner uses) and the kernel lab (kernels/lab/), which instantiates variants under
// study from the same template.
#pragma once

#include <algorithm>
#include <cstring>

#include "kernels/conv2d_c1.cuh"
#include "kernels/conv_device.cuh"
#include "kernels/launch.cuh"
#include "kernels/conv_tile.cuh"

namespace cnnrt::kernels::c1 {

// One instantiation's compile-time configuration. K == 0: KH, KW read at run time (any size up to 11,
// window read from shared memory instead of registers; the rare-shape path).
// SMEM_W: the filters come from a device buffer (pack_c1_smem_filters) staged into shared memory with the
// input tile, instead of the kernel's parameter block (see conv2d_c1.cuh for why both exist).
// FGROUPS (with SMEM_W): F may exceed FMAX; blockIdx.z picks a group of FMAX filters, so a small image
// gets F / FMAX times more blocks, each thread fewer filters (the _fg variants).
template <int K_, int S_, int TW_, int TH_, int ROWS_, int FMAX_, Act ACT_, bool POOL_, bool SMEM_W_ = false,
          bool FGROUPS_ = false>
struct C1Cfg {
  static constexpr int K = K_, S = S_, TW = TW_, TH = TH_, ROWS = ROWS_, FMAX = FMAX_;
  static constexpr Act ACT = ACT_;
  static constexpr bool POOL = POOL_, SMEM_W = SMEM_W_, FGROUPS = FGROUPS_;
  static_assert(!SMEM_W || K > 0, "shared-memory filters need a compile-time kernel size");
  static_assert(!FGROUPS || SMEM_W, "filter groups read their group's filters from shared memory");
  static constexpr int COL_GROUPS = TW / 4;                 // threads across a tile row (4 outputs each)
  static constexpr int BLOCK = COL_GROUPS * (TH / ROWS);
  static constexpr int KMAX = K > 0 ? K : 11;
  static constexpr int TAPS = KMAX * KMAX;
  static constexpr int IN_W = (TW - 1) * S + KMAX;          // input columns under a full tile
  static constexpr int PITCH = (IN_W + 3) / 4 * 4 + 4;      // floats; multiple of 4 for float4 rows, +slack
  static constexpr int IN_H = (TH - 1) * S + KMAX;
  static constexpr int FP = c1_packed_filter_floats(KMAX);  // floats per filter in shared memory (weights, bias)
  static constexpr int W_FLOATS = SMEM_W ? FMAX * FP : 0;
  static constexpr int SMEM_FLOATS = IN_H * PITCH + (POOL ? FMAX * TH * TW : 0) + W_FLOATS;
  static_assert(TW % 4 == 0 && TH % ROWS == 0, "tile must split into 4-wide columns and ROWS-high segments");
  static_assert(BLOCK % 32 == 0, "whole warps only");
};

// The filters this instantiation reads, sized for it (a few hundred bytes for the common shapes).
template <int TAPS, int FMAX>
struct C1Params {
  float w[FMAX * TAPS];
  float bias[FMAX];
};

// Bias is already in acc. Adds the residual, activates, and stores the 4 outputs, or (pooling) parks them
// in the pooling tile.
template <class Cfg>
__device__ __forceinline__ void finish_outputs(float (&acc)[4], int f, int rr, int col, int oy, int ox,
                                               const ConvGeometry& g, const Epilogue& e, float* yn,
                                               const float* res_n, float* conv_tile) {
  const int64_t plane = static_cast<int64_t>(g.OH) * g.OW;
  if constexpr (Cfg::POOL) {
    if (oy < 0 || oy >= g.OH) return;
#pragma unroll
    for (int j = 0; j < 4; ++j) conv_tile[(f * Cfg::TH + rr) * Cfg::TW + col + j] = activate<Cfg::ACT>(acc[j], e);
  } else {
    store_four<Cfg::ACT>(acc, yn + f * plane, res_n ? res_n + f * plane : nullptr, oy, ox, g.OH, g.OW, e);
  }
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::BLOCK)
    conv2d_c1_kernel(const float* __restrict__ x, float* __restrict__ y, const ConvGeometry g, const Epilogue e,
                     const __grid_constant__ C1Params<Cfg::SMEM_W ? 1 : Cfg::TAPS, Cfg::SMEM_W ? 1 : Cfg::FMAX> filt,
                     const float* __restrict__ w_packed, int tiles_x, int ptile_h, int ptile_w) {
  wait_for_prior_grid();  // launched with PDL (launch.cuh): nothing global before this
  constexpr int S = Cfg::S;
  const int KH = Cfg::K > 0 ? Cfg::K : g.KH;
  const int KW = Cfg::K > 0 ? Cfg::K : g.KW;
  extern __shared__ float4 smem_f4[];
  float* in_tile = reinterpret_cast<float*>(smem_f4);  // [IN_H][PITCH]
  float* conv_tile = in_tile + Cfg::IN_H * Cfg::PITCH;  // POOL: [FMAX][TH][TW] activated conv outputs
  float* w_tile = conv_tile + (Cfg::POOL ? Cfg::FMAX * Cfg::TH * Cfg::TW : 0);  // SMEM_W: [F][FP]
  // Filters [f_begin, f_begin + F) of g.F are this block's (all of them unless FGROUPS).
  const int f_begin = Cfg::FGROUPS ? static_cast<int>(blockIdx.z) * Cfg::FMAX : 0;
  const int F = Cfg::FGROUPS ? min(Cfg::FMAX, g.F - f_begin) : g.F;

  const int n = blockIdx.x / tiles_x;
  const int tile_x = blockIdx.x % tiles_x;
  // This block's conv-output region [r0, r0 + RH) x [c0, c0 + RW).
  int r0, c0, RH, RW;
  if constexpr (Cfg::POOL) {
    const PoolGeometry& p = e.pool;
    pool_source_range(blockIdx.y * ptile_h, ptile_h, p.sh, p.pad_top, p.kh, p.dil_h, &r0, &RH);
    pool_source_range(tile_x * ptile_w, ptile_w, p.sw, p.pad_left, p.kw, p.dil_w, &c0, &RW);
  } else {
    r0 = blockIdx.y * Cfg::TH;
    c0 = tile_x * Cfg::TW;
    RH = Cfg::TH;
    RW = Cfg::TW;
  }

  // 1. Stage the input tile with its halo; zeros outside the image are the convolution's padding. The
  //    filters (SMEM_W) join the same cp.async group, so both arrive within one memory latency.
  if constexpr (Cfg::SMEM_W) {
    // This block's filters (this group's, with FGROUPS), each with its bias: FP floats apiece, float4s.
    const float* block_w = w_packed + static_cast<int64_t>(f_begin) * Cfg::FP;
    const int quads = F * Cfg::FP / 4;
    for (int i = threadIdx.x; i < quads; i += Cfg::BLOCK) cp_async_16(w_tile + 4 * i, block_w + 4 * i, true);
  }
  const int in_h = (RH - 1) * S + KH;
  stage_plane_tile(in_tile, Cfg::PITCH, in_h, x + static_cast<int64_t>(n) * g.H * g.W, g.H, g.W, r0 * S - g.pad_top,
                   c0 * S - g.pad_left, Cfg::BLOCK);
  __syncthreads();

  // 2. Four adjacent outputs per thread, sliding down ROWS rows.
  const int col = 4 * (threadIdx.x % Cfg::COL_GROUPS);
  const int row_begin = (threadIdx.x / Cfg::COL_GROUPS) * Cfg::ROWS;
  const int row_end = min(row_begin + Cfg::ROWS, RH);
  const int64_t plane = static_cast<int64_t>(g.OH) * g.OW;
  const int64_t out_plane = Cfg::POOL ? int64_t(e.pool.PH) * e.pool.PW : plane;
  // Image n's planes, starting at this block's first filter: local filter f writes plane f_begin + f.
  float* yn = y + (static_cast<int64_t>(n) * g.F + f_begin) * out_plane;
  const float* res_n = e.residual ? e.residual + (static_cast<int64_t>(n) * g.F + f_begin) * plane : nullptr;

  if (row_begin < RH && col < RW) {
    if constexpr (Cfg::K > 0) {
      constexpr int K = Cfg::K;
      constexpr int WIN = (3 * S + K + 3) / 4 * 4;  // window columns, rounded to whole float4s
      // Stores of whole float4s with nothing to check per filter: every output row of the block starts
      // 16-byte aligned when the plane width is a multiple of 4 (col and c0 are), so one test per row
      // (inside the image, and a full group of filters) covers all filters. Otherwise, and with a residual,
      // finish_outputs checks each.
      const bool aligned_rows = !Cfg::POOL && g.OW % 4 == 0 && res_n == nullptr && aligned_16(yn);
      float win[K][WIN];
      prime_window<K, S>(win, in_tile, Cfg::PITCH, row_begin, col * S);
      for (int rr = row_begin; rr < row_end; ++rr) {
        slide_window<K, S>(win, in_tile, Cfg::PITCH, rr, col * S);
        const int oy = r0 + rr, ox = c0 + col;
        const bool fast_store = aligned_rows && oy < g.OH && ox + 3 < g.OW && (!Cfg::FGROUPS || F == Cfg::FMAX);
        float* y_out = yn + static_cast<int64_t>(oy) * g.OW + ox;  // filter 0's output (fast_store only)
#pragma unroll
        for (int f = 0; f < Cfg::FMAX; ++f, y_out += plane) {
          // A group computes all FMAX filters (a short last group's extra ones are never stored): no branch per
          // filter. Otherwise F may be far below FMAX, so the filters past F are skipped.
          if (!Cfg::FGROUPS && f >= F) continue;
          float acc[4];
          if constexpr (Cfg::SMEM_W) {
            float wf[Cfg::FP];  // one filter and its bias, as float4 broadcasts (every lane reads the same)
            load_window_row(wf, w_tile + f * Cfg::FP);
#pragma unroll
            for (int j = 0; j < 4; ++j) acc[j] = wf[K * K];
            accumulate_window<K, S>(acc, win, [&](int t) { return wf[t]; });
          } else {
#pragma unroll
            for (int j = 0; j < 4; ++j) acc[j] = filt.bias[f];
            accumulate_window<K, S>(acc, win, [&](int t) { return filt.w[f * K * K + t]; });
          }
          if (fast_store) {
            *reinterpret_cast<float4*>(y_out) = make_float4(activate<Cfg::ACT>(acc[0], e), activate<Cfg::ACT>(acc[1], e),
                                                            activate<Cfg::ACT>(acc[2], e), activate<Cfg::ACT>(acc[3], e));
          } else if (!Cfg::FGROUPS || f < F) {
            finish_outputs<Cfg>(acc, f, rr, col, oy, ox, g, e, yn, res_n, conv_tile);
          }
        }
      }
    } else {
      // Any KH, KW <= 11: taps read from shared memory directly.
      for (int rr = row_begin; rr < row_end; ++rr) {
#pragma unroll 1
        for (int f = 0; f < F; ++f) {
          float acc[4];
          const float b = filt.bias[f];
#pragma unroll
          for (int j = 0; j < 4; ++j) acc[j] = b;
          for (int ky = 0; ky < KH; ++ky) {
            const float* src = in_tile + (rr * S + ky) * Cfg::PITCH + col * S;
            for (int kx = 0; kx < KW; ++kx) {
              const float w = filt.w[(f * KH + ky) * KW + kx];
#pragma unroll
              for (int j = 0; j < 4; ++j) acc[j] = fmaf(w, src[j * S + kx], acc[j]);
            }
          }
          finish_outputs<Cfg>(acc, f, rr, col, r0 + rr, c0 + col, g, e, yn, res_n, conv_tile);
        }
      }
    }
  }

  // 3. Pooling from the activated tile in shared memory.
  if constexpr (Cfg::POOL) {
    __syncthreads();
    pool_tile(conv_tile, Cfg::TH, Cfg::TW, F, r0, c0, blockIdx.y * ptile_h, tile_x * ptile_w, ptile_h, ptile_w, e.pool,
              g.OH, g.OW, yn, threadIdx.x, Cfg::BLOCK);
  }
}

template <class Cfg>
void launch_c1(const float* x, float* y, const ConvGeometry& g, const Epilogue& e, const C1Filters& packed,
               const float* smem_packed, cudaStream_t stream) {
  C1Params<Cfg::SMEM_W ? 1 : Cfg::TAPS, Cfg::SMEM_W ? 1 : Cfg::FMAX> params{};
  if constexpr (!Cfg::SMEM_W) {
    const int taps = g.KH * g.KW;
    for (int f = 0; f < g.F; ++f) {
      std::memcpy(params.w + f * taps, packed.w + f * taps, sizeof(float) * taps);
      params.bias[f] = packed.bias[f];
    }
  }
  const size_t smem = sizeof(float) * Cfg::SMEM_FLOATS;
  allow_dynamic_smem<conv2d_c1_kernel<Cfg>>(static_cast<int>(smem));
  const TileGrid t = tile_grid(Cfg::TH, Cfg::TW, Cfg::POOL, g, e);
  const dim3 grid(static_cast<unsigned>(t.tiles_x * g.N), static_cast<unsigned>(t.tiles_y),
                  static_cast<unsigned>(Cfg::FGROUPS ? (g.F + Cfg::FMAX - 1) / Cfg::FMAX : 1));
  launch_overlapped(conv2d_c1_kernel<Cfg>, grid, dim3(Cfg::BLOCK), smem, stream, 1, x, y, g, e, params, smem_packed,
                    t.tiles_x, t.ptile_h, t.ptile_w);
}

}  // namespace cnnrt::kernels::c1
