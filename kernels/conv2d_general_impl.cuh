// The general convolution kernel template (see conv2d_general.cuh). Included only by the .cu files that
// instantiate it, one per kernel size, so that CI compiles them in parallel.
#pragma once

#include <cooperative_groups.h>

#include <algorithm>

#include "kernels/conv2d_general.cuh"
#include "kernels/cp_async.cuh"
#include "kernels/launch.cuh"
#include "kernels/conv_device.cuh"

namespace cnnrt::kernels::general {

namespace cg = cooperative_groups;

// Cluster size limit: 8 is the portable limit; H100 runs clusters of 16 once a kernel opts in to
// non-portable sizes (launch() does for splits above 8).
constexpr int kMaxSplit = 16;

constexpr int round4(int v) { return (v + 3) / 4 * 4; }

template <int K_, int S_, int FT_, int WT_, int TX_, int TPX_, int TH_, int CSH_, Act ACT_, bool POOL_, bool SPLIT_>
struct Cfg {
  static constexpr int K = K_, S = S_, FT = FT_, WT = WT_, TX = TX_, TPX = TPX_, TH = TH_, CSH = CSH_;
  static constexpr Act ACT = ACT_;
  static constexpr bool POOL = POOL_, SPLIT = SPLIT_;
  static constexpr int FTB = FT * TX;    // filters per block
  static constexpr int TW = WT * TPX;    // output columns per block
  static constexpr int TY = TPX * TH;    // threads across pixels
  static constexpr int BLOCK = TX * TY;
  static constexpr int IH = (TH - 1) * S + K;
  static constexpr int IW = (TW - 1) * S + K;
  static constexpr int WIN = (WT - 1) * S + K;            // input columns under one thread's WT outputs
  static constexpr bool VEC = S == 1 && WT % 4 == 0;      // window rows load as float4 (aligned)
  static constexpr int WIN_LOAD = VEC ? round4(WIN) : WIN;
  static constexpr int IPITCH = round4(IW) + 4;           // >= every float4 over-read of a window row
  static constexpr int IMG = CSH * IH * IPITCH;
  static constexpr int FPITCH = FTB + 4;                  // +4: rows start in different banks
  static constexpr int FLT = CSH * K * K * FPITCH;
  static constexpr int STAGE = IMG + FLT;
  // Split: the partial tiles [FT*WT][BLOCK]; split and pooled: then rank 0's activated conv tile after them.
  static constexpr int PART = SPLIT ? FT * WT * BLOCK : 0;
  static constexpr int SMEM_FLOATS = std::max({2 * STAGE, (POOL ? FTB * TH * TW : 0) + PART});
  static_assert(FT % 4 == 0, "filters are read as float4");
};

// Filter `i` (0..FT-1) of thread `tx`, as an index into the block's FTB filters. Interleaved in chunks
// of 4 so that one float4 load instruction across the TX threads reads consecutive 16-byte words
// (conflict-free), rather than words FT*4 bytes apart.
template <class C>
__device__ __forceinline__ int local_filter(int tx, int i) {
  return (i / 4) * C::TX * 4 + tx * 4 + (i % 4);
}

template <class C>
__device__ __forceinline__ void store_output(float v, int f, int oy, int ox, const ConvGeometry& g, const Epilogue& e,
                                             float* yn, const float* res_n) {
  if (oy < 0 || oy >= g.OH || ox < 0 || ox >= g.OW) return;
  const int64_t idx = (static_cast<int64_t>(f) * g.OH + oy) * g.OW + ox;
  if (res_n) v += __ldg(res_n + idx);
  yn[idx] = activate<C::ACT>(v, e);
}

template <class C>
__global__ void __launch_bounds__(C::BLOCK)
    conv2d_general_kernel(const float* __restrict__ x, float* __restrict__ y, const float* __restrict__ wt,
                          const ConvGeometry g, const Epilogue e, int tiles_x, int tiles_y, int ptile_h, int ptile_w,
                          int c_per_split) {
  wait_for_prior_grid();  // launched with PDL (launch.cuh): nothing global before this
  constexpr int S = C::S, K = C::K;
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);
  const int tid = threadIdx.x;
  const int tx = tid % C::TX, ty = tid / C::TX;
  const int prow = ty / C::TPX, pcol = (ty % C::TPX) * C::WT;

  int t = blockIdx.x;
  const int tile_x = t % tiles_x;
  t /= tiles_x;
  const int tile_y = t % tiles_y;
  const int n = t / tiles_y;
  const int f0 = blockIdx.y * C::FTB;
  const int c_begin = blockIdx.z * c_per_split;
  const int c_end = min(g.C, c_begin + c_per_split);

  int r0, c0, rh, rw;  // conv-output region [r0, r0 + rh) x [c0, c0 + rw)
  if constexpr (C::POOL) {
    pool_source_range(tile_y * ptile_h, ptile_h, e.pool.sh, e.pool.pad_top, e.pool.kh, e.pool.dil_h, &r0, &rh);
    pool_source_range(tile_x * ptile_w, ptile_w, e.pool.sw, e.pool.pad_left, e.pool.kw, e.pool.dil_w, &c0, &rw);
  } else {
    r0 = tile_y * C::TH;
    c0 = tile_x * C::TW;
  }
  const int iy0 = r0 * S - g.pad_top, ix0 = c0 * S - g.pad_left;
  const int f_pad = (g.F + 3) & ~3;
  const float* xn = x + static_cast<int64_t>(n) * g.C * g.H * g.W;

  // Queues the copies of channels [c, c + CSH) into stage buffer `buf`.
  auto issue_stage = [&](int buf, int c) {
    float* img = smem + buf * C::STAGE;
    float* flt = img + C::IMG;
    for (int i = tid; i < C::CSH * C::IH * C::IW; i += C::BLOCK) {
      const int cs = i / (C::IH * C::IW), rem = i % (C::IH * C::IW);
      const int r = rem / C::IW, col = rem % C::IW;
      const int ch = c + cs, iy = iy0 + r, ix = ix0 + col;
      const bool ok = ch < c_end && iy >= 0 && iy < g.H && ix >= 0 && ix < g.W;
      cp_async_4(img + (cs * C::IH + r) * C::IPITCH + col, ok ? xn + (static_cast<int64_t>(ch) * g.H + iy) * g.W + ix : x,
                 ok);
    }
    constexpr int QUADS = C::FTB / 4;
    for (int i = tid; i < C::CSH * K * K * QUADS; i += C::BLOCK) {
      const int row = i / QUADS, q = i % QUADS;
      const int cs = row / (K * K), tap = row % (K * K);
      const int ch = c + cs, f = f0 + 4 * q;
      const bool ok = ch < c_end && f < f_pad;
      cp_async_16(flt + row * C::FPITCH + 4 * q, ok ? wt + (static_cast<int64_t>(ch) * K * K + tap) * f_pad + f : wt, ok);
    }
    cp_async_commit();
  };

  float acc[C::FT][C::WT];
#pragma unroll
  for (int i = 0; i < C::FT; ++i) {
#pragma unroll
    for (int j = 0; j < C::WT; ++j) acc[i][j] = 0.0f;
  }

  const int n_groups = c_end > c_begin ? (c_end - c_begin + C::CSH - 1) / C::CSH : 0;
  if (n_groups > 0) issue_stage(0, c_begin);
  for (int s = 0; s < n_groups; ++s) {
    if (s + 1 < n_groups) {
      issue_stage((s + 1) & 1, c_begin + (s + 1) * C::CSH);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const float* img = smem + (s & 1) * C::STAGE;
    const float* flt = img + C::IMG;
#pragma unroll 1
    for (int cs = 0; cs < C::CSH; ++cs) {
#pragma unroll
      for (int ky = 0; ky < K; ++ky) {
        float rimg[C::WIN_LOAD];
        const float* src = img + (cs * C::IH + prow * S + ky) * C::IPITCH + pcol * S;
        if constexpr (C::VEC) {
#pragma unroll
          for (int q = 0; q < C::WIN_LOAD / 4; ++q) {
            const float4 v = reinterpret_cast<const float4*>(src)[q];
            rimg[4 * q] = v.x;
            rimg[4 * q + 1] = v.y;
            rimg[4 * q + 2] = v.z;
            rimg[4 * q + 3] = v.w;
          }
        } else {
#pragma unroll
          for (int q = 0; q < C::WIN; ++q) rimg[q] = src[q];
        }
#pragma unroll
        for (int kx = 0; kx < K; ++kx) {
          float rf[C::FT];
          const float* fsrc = flt + ((cs * K + ky) * K + kx) * C::FPITCH + tx * 4;
#pragma unroll
          for (int q = 0; q < C::FT / 4; ++q) {
            const float4 v = *reinterpret_cast<const float4*>(fsrc + q * C::TX * 4);
            rf[4 * q] = v.x;
            rf[4 * q + 1] = v.y;
            rf[4 * q + 2] = v.z;
            rf[4 * q + 3] = v.w;
          }
#pragma unroll
          for (int i = 0; i < C::FT; ++i) {
#pragma unroll
            for (int j = 0; j < C::WT; ++j) acc[i][j] = fmaf(rf[i], rimg[j * S + kx], acc[i][j]);
          }
        }
      }
    }
    __syncthreads();
  }

  const int64_t out_image = e.out_image_stride(static_cast<int64_t>(g.F) *
                      (C::POOL ? static_cast<int64_t>(e.pool.PH) * e.pool.PW : static_cast<int64_t>(g.OH) * g.OW));
  float* yn = y + static_cast<int64_t>(n) * out_image;
  const float* res_n = e.residual ? e.residual + static_cast<int64_t>(n) * g.F * g.OH * g.OW : nullptr;
  const int oy = r0 + prow;

  if constexpr (C::SPLIT) {
#if CNNRT_ARCH_BELOW(900)
    __trap();  // clusters: compute capability 9.0 (the family offers _split variants only there)
#else
    // Sum the partial tiles of the cluster's blocks in rank order (deterministic), each block finishing
    // an interleaved share of the accumulators.
    cg::cluster_group cluster = cg::this_cluster();
    float* part = smem;  // [FT*WT][BLOCK]; stage buffers are free after the loop's final barrier
#pragma unroll
    for (int i = 0; i < C::FT; ++i) {
#pragma unroll
      for (int j = 0; j < C::WT; ++j) part[(i * C::WT + j) * C::BLOCK + tid] = acc[i][j];
    }
    cluster.sync();
    const int rank = static_cast<int>(cluster.block_rank());
    const int ranks = static_cast<int>(cluster.num_blocks());
    // Pooling: every rank writes its finished share of the activated conv tile into rank 0's shared
    // memory (after rank 0's partial tiles, which the other ranks are still reading), then they pool it.
    float* conv_tile0 = C::POOL ? cluster.map_shared_rank(smem + C::PART, 0) : nullptr;
    for (int k = rank; k < C::FT * C::WT; k += ranks) {
      // All remote reads first (independent, so their latencies overlap), then the sum in rank order.
      float v[kMaxSplit];
#pragma unroll
      for (int q = 0; q < kMaxSplit; ++q) v[q] = q < ranks ? cluster.map_shared_rank(part, q)[k * C::BLOCK + tid] : 0.0f;
      float sum = 0.0f;
#pragma unroll
      for (int q = 0; q < kMaxSplit; ++q) sum += v[q];
      const int lf = local_filter<C>(tx, k / C::WT);
      const int f = f0 + lf;
      if (f >= g.F) continue;
      const float b = e.bias ? __ldg(e.bias + f) : 0.0f;
      if constexpr (C::POOL) {
        conv_tile0[(lf * C::TH + prow) * C::TW + pcol + k % C::WT] = activate<C::ACT>(sum + b, e);
      } else {
        store_output<C>(sum + b, f, oy, c0 + pcol + k % C::WT, g, e, yn, res_n);
      }
    }
    cluster.sync();  // every partial tile read (and, pooling, rank 0's conv tile complete)
    if constexpr (C::POOL) {
      // The ranks share the pooled outputs of the tile.
      pool_tile(conv_tile0, C::TH, C::TW, min(C::FTB, g.F - f0), r0, c0, tile_y * ptile_h, tile_x * ptile_w, ptile_h,
                ptile_w, e.pool, g.OH, g.OW, yn + static_cast<int64_t>(f0) * e.pool.PH * e.pool.PW,
                rank * C::BLOCK + tid, ranks * C::BLOCK);
      cluster.sync();  // keep rank 0's shared memory alive until every rank has pooled from it
    }
#endif
  } else {
#pragma unroll
    for (int i = 0; i < C::FT; ++i) {
      const int lf = local_filter<C>(tx, i);
      const int f = f0 + lf;
      if (f >= g.F) continue;
      const float b = e.bias ? __ldg(e.bias + f) : 0.0f;
      if constexpr (C::POOL) {
#pragma unroll
        for (int j = 0; j < C::WT; ++j) smem[(lf * C::TH + prow) * C::TW + pcol + j] = activate<C::ACT>(acc[i][j] + b, e);
      } else {
        const int ox = c0 + pcol;
        const int64_t idx = (static_cast<int64_t>(f) * g.OH + oy) * g.OW + ox;
        const bool vector_ok =
            C::WT % 4 == 0 && !res_n && g.OW % 4 == 0 && out_image % 4 == 0 && oy < g.OH && ox + C::WT <= g.OW;
        if (vector_ok) {
#pragma unroll
          for (int j = 0; j < C::WT; j += 4) {
            *reinterpret_cast<float4*>(yn + idx + j) =
                make_float4(activate<C::ACT>(acc[i][j] + b, e), activate<C::ACT>(acc[i][j + 1] + b, e),
                            activate<C::ACT>(acc[i][j + 2] + b, e), activate<C::ACT>(acc[i][j + 3] + b, e));
          }
        } else {
#pragma unroll
          for (int j = 0; j < C::WT; ++j) store_output<C>(acc[i][j] + b, f, oy, ox + j, g, e, yn, res_n);
        }
      }
    }

    if constexpr (C::POOL) {
      __syncthreads();
      pool_tile(smem, C::TH, C::TW, min(C::FTB, g.F - f0), r0, c0, tile_y * ptile_h, tile_x * ptile_w, ptile_h,
                ptile_w, e.pool, g.OH, g.OW, yn + static_cast<int64_t>(f0) * e.pool.PH * e.pool.PW, tid, C::BLOCK);
    }
  }
  (void)rh;
  (void)rw;
}

template <class C>
void launch(const float* x, float* y, const float* w, const ConvGeometry& g, const Epilogue& e, int split,
            cudaStream_t stream) {
  const size_t smem = sizeof(float) * C::SMEM_FLOATS;
  allow_dynamic_smem<conv2d_general_kernel<C>>(static_cast<int>(smem));
  const TileGrid t = tile_grid(C::TH, C::TW, C::POOL, g, e);
  const int tiles_x = t.tiles_x, tiles_y = t.tiles_y, ptile_h = t.ptile_h, ptile_w = t.ptile_w;
  const int per_split = (g.C + split - 1) / split;
  const int c_per_split = (per_split + C::CSH - 1) / C::CSH * C::CSH;
  const dim3 grid(static_cast<unsigned>(tiles_x * tiles_y * g.N), static_cast<unsigned>((g.F + C::FTB - 1) / C::FTB),
                  static_cast<unsigned>(split));
  if (C::SPLIT && split > 8) allow_large_clusters<conv2d_general_kernel<C>>();
  launch_overlapped(conv2d_general_kernel<C>, grid, dim3(C::BLOCK), smem, stream,
                    C::SPLIT ? static_cast<unsigned>(split) : 1u, x, y, w, g, e, tiles_x, tiles_y, ptile_h, ptile_w,
                    c_per_split);
}

// One instantiated configuration, as the registry lists it.
struct Entry {
  int k, s, ft, wt, tx, tpx, th, csh;
  Act act;
  bool pool, split;
  void (*launch)(const float*, float*, const float*, const ConvGeometry&, const Epilogue&, int, cudaStream_t);
};

#define GEN_ENTRY(K, S, FT, WT, TX, TPX, TH, CSH, ACT, POOL, SPLIT)                            \
  ::cnnrt::kernels::general::Entry {                                                          \
    K, S, FT, WT, TX, TPX, TH, CSH, ACT, POOL, SPLIT,                                         \
        &::cnnrt::kernels::general::launch<                                                   \
            ::cnnrt::kernels::general::Cfg<K, S, FT, WT, TX, TPX, TH, CSH, ACT, POOL, SPLIT>> \
  }

// The tile configurations (FT, WT, TX, TPX, TH, CSH), named by what they suit:
//   A 8x8 per thread, 64 filters x 32x4 pixels   (wide maps, large batches)
//   B 8x7 per thread, 64 filters x 14x8 pixels   (widths 14, 28, 56, 112)
//   C 4x7 per thread, 64 filters x 14x4 pixels   (small work: more, smaller blocks)
//   D 4x4 per thread, 16 filters x 12x12 pixels  (few filters on small maps: LeNet-class conv + pool)
//   E 8x8 per thread, 128 filters x 32x4 pixels  (many filters, large batches)
//   F as D, one channel per stage                 (D's shape at batch 1, channels split across a cluster)
//   G 4x2 per thread, 8 filters x 12x12 pixels    (D's layer at batch 64: 16 filters in two blocks, so 64
//                                                  images fill 128 SMs, and half of D's FMA chain a thread)
//   H 4x4 per thread, 16 filters x 16x8 pixels    (few filters on maps of a multiple of 16 wide: no tile
//                                                  past the map's edge; 4 channels a stage, so that 16 channels
//                                                  make a pipeline of four)
//   J 8x4 per thread, 16 filters x 32x8 pixels    (as H with twice a thread's filters: fewer loads a multiply)
#define GEN_CFG_A 8, 8, 8, 4, 4, 4
#define GEN_CFG_B 8, 7, 8, 2, 8, 4
#define GEN_CFG_C 4, 7, 16, 2, 4, 4
#define GEN_CFG_D 4, 4, 4, 3, 12, 8
#define GEN_CFG_E 8, 8, 16, 4, 4, 4
#define GEN_CFG_F 4, 4, 4, 3, 12, 1
#define GEN_CFG_G 4, 2, 2, 6, 12, 8
#define GEN_CFG_H 4, 4, 4, 4, 8, 4
#define GEN_CFG_J 8, 4, 2, 8, 8, 4

#define GEN_RELU(K, S, CFG, POOL, SPLIT) GEN_ENTRY(K, S, CFG, ::cnnrt::kernels::Act::Relu, POOL, SPLIT)
#define GEN_ACTS(K, S, CFG, POOL, SPLIT) \
  GEN_ENTRY(K, S, CFG, ::cnnrt::kernels::Act::Relu, POOL, SPLIT), GEN_ENTRY(K, S, CFG, ::cnnrt::kernels::Act::Param, POOL, SPLIT)

// Everything instantiated for one kernel size K: plain (5 tiles), split (3 tiles), pooled (B, D, F split, and
// G with ReLU only; K > 1), stride 2 (2 tiles).
#define GEN_PLAIN_AND_SPLIT(K)                                                                                     \
  GEN_ACTS(K, 1, GEN_CFG_A, false, false), GEN_ACTS(K, 1, GEN_CFG_B, false, false),                                \
      GEN_ACTS(K, 1, GEN_CFG_C, false, false), GEN_ACTS(K, 1, GEN_CFG_D, false, false),                            \
      GEN_ACTS(K, 1, GEN_CFG_E, false, false), GEN_ACTS(K, 1, GEN_CFG_A, false, true),                             \
      GEN_ACTS(K, 1, GEN_CFG_B, false, true), GEN_ACTS(K, 1, GEN_CFG_C, false, true),                              \
      GEN_ACTS(K, 2, GEN_CFG_A, false, false), GEN_ACTS(K, 2, GEN_CFG_C, false, false)
#define GEN_POOLED(K) \
  GEN_ACTS(K, 1, GEN_CFG_B, true, false), GEN_ACTS(K, 1, GEN_CFG_D, true, false), GEN_ACTS(K, 1, GEN_CFG_F, true, true), \
      GEN_RELU(K, 1, GEN_CFG_G, true, false)
// 3x3 only: H and J, plain (both activations) and pooled (ReLU), and H split (VGG-style 16-filter layers on 64x64
// and 32x32 maps; DenseNet's 12-filter growth layers, whose 32x32 maps of a batch of 16 make too few blocks alone).
#define GEN_WHOLE_TILES(K)                                                                                        \
  GEN_ACTS(K, 1, GEN_CFG_H, false, false), GEN_RELU(K, 1, GEN_CFG_H, true, false),                               \
      GEN_ACTS(K, 1, GEN_CFG_J, false, false), GEN_RELU(K, 1, GEN_CFG_J, true, false),                           \
      GEN_ACTS(K, 1, GEN_CFG_H, false, true)

}  // namespace cnnrt::kernels::general
