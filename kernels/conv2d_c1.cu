// Single-input-channel convolution; see conv2d_c1.cuh for the algorithm.
#include "kernels/conv2d_c1.cuh"

#include "kernels/conv_device.cuh"
#include "kernels/conv_tile.cuh"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>

namespace cnnrt::kernels {

namespace {

// One instantiation's compile-time configuration. K == 0: KH, KW read at run time (any size up to 11,
// window read from shared memory instead of registers; the rare-shape path).
// SMEM_W: the filters come from a device buffer (pack_c1_smem_filters) staged into shared memory with the
// input tile, instead of the kernel's parameter block (see conv2d_c1.cuh for why both exist).
template <int K_, int S_, int TW_, int TH_, int ROWS_, int FMAX_, Act ACT_, bool POOL_, bool SMEM_W_ = false>
struct C1Cfg {
  static constexpr int K = K_, S = S_, TW = TW_, TH = TH_, ROWS = ROWS_, FMAX = FMAX_;
  static constexpr Act ACT = ACT_;
  static constexpr bool POOL = POOL_, SMEM_W = SMEM_W_;
  static_assert(!SMEM_W || K > 0, "shared-memory filters need a compile-time kernel size");
  static constexpr int COL_GROUPS = TW / 4;                 // threads across a tile row (4 outputs each)
  static constexpr int BLOCK = COL_GROUPS * (TH / ROWS);
  static constexpr int KMAX = K > 0 ? K : 11;
  static constexpr int TAPS = KMAX * KMAX;
  static constexpr int IN_W = (TW - 1) * S + KMAX;          // input columns under a full tile
  static constexpr int PITCH = (IN_W + 3) / 4 * 4 + 4;      // floats; multiple of 4 for float4 rows, +slack
  static constexpr int IN_H = (TH - 1) * S + KMAX;
  static constexpr int KP = (KMAX + 3) / 4 * 4;             // filter row pitch in shared memory (float4s)
  static constexpr int W_FLOATS = SMEM_W ? FMAX * KMAX * KP + (FMAX + 3) / 4 * 4 : 0;
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
  constexpr int S = Cfg::S;
  const int KH = Cfg::K > 0 ? Cfg::K : g.KH;
  const int KW = Cfg::K > 0 ? Cfg::K : g.KW;
  extern __shared__ float4 smem_f4[];
  float* in_tile = reinterpret_cast<float*>(smem_f4);  // [IN_H][PITCH]
  float* conv_tile = in_tile + Cfg::IN_H * Cfg::PITCH;  // POOL: [FMAX][TH][TW] activated conv outputs
  float* w_tile = conv_tile + (Cfg::POOL ? Cfg::FMAX * Cfg::TH * Cfg::TW : 0);  // SMEM_W: [F][K][KP], bias[F]

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
    const int quads = (g.F * Cfg::K * Cfg::KP + ((g.F + 3) & ~3)) / 4;
    for (int i = threadIdx.x; i < quads; i += Cfg::BLOCK) cp_async_16(w_tile + 4 * i, w_packed + 4 * i, true);
  }
  const int in_h = (RH - 1) * S + KH;
  stage_plane_tile(in_tile, Cfg::PITCH, in_h, x + static_cast<int64_t>(n) * g.H * g.W, g.H, g.W, r0 * S - g.pad_top,
                   c0 * S - g.pad_left, Cfg::BLOCK);
  __syncthreads();

  // 2. Four adjacent outputs per thread, sliding down ROWS rows.
  const int col = 4 * (threadIdx.x % Cfg::COL_GROUPS);
  const int row_begin = (threadIdx.x / Cfg::COL_GROUPS) * Cfg::ROWS;
  const int row_end = min(row_begin + Cfg::ROWS, RH);
  const int F = g.F;
  const int64_t plane = static_cast<int64_t>(g.OH) * g.OW;
  float* yn = y + static_cast<int64_t>(n) * F * (Cfg::POOL ? int64_t(e.pool.PH) * e.pool.PW : plane);
  const float* res_n = e.residual ? e.residual + static_cast<int64_t>(n) * F * plane : nullptr;

  if (row_begin < RH && col < RW) {
    if constexpr (Cfg::K > 0) {
      constexpr int K = Cfg::K;
      constexpr int WIN = (3 * S + K + 3) / 4 * 4;  // window columns, rounded to whole float4s
      float win[K][WIN];
#pragma unroll
      for (int k = 0; k < K - S; ++k) load_window_row(win[k + S], in_tile + (row_begin * S + k) * Cfg::PITCH + col * S);
      for (int rr = row_begin; rr < row_end; ++rr) {
#pragma unroll
        for (int k = 0; k < K - S; ++k) {
#pragma unroll
          for (int q = 0; q < WIN; ++q) win[k][q] = win[k + S][q];
        }
#pragma unroll
        for (int k = (K > S ? K - S : 0); k < K; ++k) {
          load_window_row(win[k], in_tile + (rr * S + k) * Cfg::PITCH + col * S);
        }
#pragma unroll
        for (int f = 0; f < Cfg::FMAX; ++f) {
          if (f < F) {
            float acc[4];
            float b;
            if constexpr (Cfg::SMEM_W) {
              b = w_tile[F * K * Cfg::KP + f];
            } else {
              b = filt.bias[f];
            }
#pragma unroll
            for (int j = 0; j < 4; ++j) acc[j] = b;
#pragma unroll
            for (int ky = 0; ky < K; ++ky) {
              float wrow[Cfg::KP];  // SMEM_W: one filter row, as float4 broadcasts (every lane reads the same)
              if constexpr (Cfg::SMEM_W) load_window_row(wrow, w_tile + (f * K + ky) * Cfg::KP);
#pragma unroll
              for (int kx = 0; kx < K; ++kx) {
                float w;
                if constexpr (Cfg::SMEM_W) {
                  w = wrow[kx];
                } else {
                  w = filt.w[(f * K + ky) * K + kx];
                }
#pragma unroll
                for (int j = 0; j < 4; ++j) acc[j] = fmaf(w, win[ky][j * S + kx], acc[j]);
              }
            }
            finish_outputs<Cfg>(acc, f, rr, col, r0 + rr, c0 + col, g, e, yn, res_n, conv_tile);
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
    const PoolGeometry& p = e.pool;
    const int py0 = blockIdx.y * ptile_h, px0 = tile_x * ptile_w;
    const int per_filter = ptile_h * ptile_w;
    for (int i = threadIdx.x; i < F * per_filter; i += Cfg::BLOCK) {
      const int f = i / per_filter;
      const int py = py0 + (i % per_filter) / ptile_w;
      const int px = px0 + (i % per_filter) % ptile_w;
      if (py < p.PH && px < p.PW) {
        yn[(static_cast<int64_t>(f) * p.PH + py) * p.PW + px] =
            pool_from_smem(conv_tile + f * Cfg::TH * Cfg::TW, Cfg::TW, r0, c0, py, px, p, g.OH, g.OW);
      }
    }
  }
}

// Largest pooled tile whose source region fits the conv tile along one axis.
int pooled_tile(int conv_tile, int kernel, int dilation, int stride) {
  const int span = (kernel - 1) * dilation + 1;
  return span > conv_tile ? 0 : (conv_tile - span) / stride + 1;
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
  static std::once_flag attribute_once;
  std::call_once(attribute_once, [smem] {
    cudaFuncSetAttribute(conv2d_c1_kernel<Cfg>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  });
  int ptile_h = 0, ptile_w = 0, tiles_x, tiles_y;
  if constexpr (Cfg::POOL) {
    ptile_h = pooled_tile(Cfg::TH, e.pool.kh, e.pool.dil_h, e.pool.sh);
    ptile_w = pooled_tile(Cfg::TW, e.pool.kw, e.pool.dil_w, e.pool.sw);
    tiles_x = (e.pool.PW + ptile_w - 1) / ptile_w;
    tiles_y = (e.pool.PH + ptile_h - 1) / ptile_h;
  } else {
    tiles_x = (g.OW + Cfg::TW - 1) / Cfg::TW;
    tiles_y = (g.OH + Cfg::TH - 1) / Cfg::TH;
  }
  const dim3 grid(static_cast<unsigned>(tiles_x * g.N), static_cast<unsigned>(tiles_y));
  conv2d_c1_kernel<Cfg><<<grid, Cfg::BLOCK, smem, stream>>>(x, y, g, e, params, smem_packed, tiles_x, ptile_h, ptile_w);
}

struct C1Entry {
  int k, s, tw, th, fmax;
  Act act;
  bool pool;
  const char* tile_name;
  void (*launch)(const float*, float*, const ConvGeometry&, const Epilogue&, const C1Filters&, const float*, cudaStream_t);
  bool smem_weights = false;
};

const char* act_name(Act a) { return a == Act::None ? "none" : a == Act::Relu ? "relu" : "act"; }

// The instantiated configurations. Tiles: A = 128x32 (4 rows of 32 threads, 8 rows each: long image rows),
// B = 64x32, C = 32x32 (small images, and the pooling tiles below). Kept small: CI compiles these on 2 cores.
#define C1_ENTRY(K, S, TW, TH, ROWS, FMAX, ACT, POOL, TILE)                                                   \
  C1Entry {                                                                                                   \
    K, S, TW, TH, FMAX, ACT, POOL, TILE, &launch_c1<C1Cfg<K, S, TW, TH, ROWS, FMAX, ACT, POOL>>               \
  }
#define C1_ENTRY_SMEM(K, TW, TH, ROWS, FMAX, ACT, POOL, TILE)                                                  \
  C1Entry {                                                                                                   \
    K, 1, TW, TH, FMAX, ACT, POOL, TILE, &launch_c1<C1Cfg<K, 1, TW, TH, ROWS, FMAX, ACT, POOL, true>>, true    \
  }
// Shared-memory-filter twins of the stride-1 tiles (None and Relu) and of the pooling tiles (Relu).
#define C1_SMEM_TILES(K, FMAX, ACT)                                                                            \
  C1_ENTRY_SMEM(K, 128, 32, 8, FMAX, ACT, false, "128x32r8"), C1_ENTRY_SMEM(K, 64, 32, 4, FMAX, ACT, false, "64x32r4"), \
      C1_ENTRY_SMEM(K, 32, 32, 2, FMAX, ACT, false, "32x32r2")
#define C1_SMEM(K, FMAX)                                                                                       \
  C1_SMEM_TILES(K, FMAX, Act::None), C1_SMEM_TILES(K, FMAX, Act::Relu),                                        \
      C1_ENTRY_SMEM(K, 32, 32, 2, FMAX, Act::Relu, true, "32x32r2"), C1_ENTRY_SMEM(K, 32, 8, 1, FMAX, Act::Relu, true, "32x8r1")
#define C1_TILES_S1(K, FMAX, ACT)                                                                             \
  C1_ENTRY(K, 1, 128, 32, 8, FMAX, ACT, false, "128x32r8"), C1_ENTRY(K, 1, 64, 32, 4, FMAX, ACT, false, "64x32r4"), \
      C1_ENTRY(K, 1, 32, 32, 2, FMAX, ACT, false, "32x32r2")
#define C1_ACTS_S1(K, FMAX) \
  C1_TILES_S1(K, FMAX, Act::None), C1_TILES_S1(K, FMAX, Act::Relu), C1_ENTRY(K, 1, 128, 32, 8, FMAX, Act::Param, false, "128x32r8")
// Pooling tiles: 32x32 (2 rows per thread), and 32x8 (1 row per thread, 64 threads) for small images
// such as 28x28 at batch 1, where one 32x32 tile would leave all but one SM idle.
#define C1_POOL(K, FMAX)                                                                                       \
  C1_ENTRY(K, 1, 32, 32, 2, FMAX, Act::Relu, true, "32x32r2"), C1_ENTRY(K, 1, 32, 32, 2, FMAX, Act::Param, true, "32x32r2"), \
      C1_ENTRY(K, 1, 32, 8, 1, FMAX, Act::Relu, true, "32x8r1")
#define C1_S2(K, FMAX)                                                                                          \
  C1_ENTRY(K, 2, 64, 32, 4, FMAX, Act::None, false, "64x32r4"), C1_ENTRY(K, 2, 64, 32, 4, FMAX, Act::Relu, false, "64x32r4"), \
      C1_ENTRY(K, 2, 64, 32, 4, FMAX, Act::Param, false, "64x32r4")
#define C1_FIXED_K(K) \
  C1_ACTS_S1(K, 8), C1_ACTS_S1(K, 32), C1_POOL(K, 8), C1_POOL(K, 32), C1_S2(K, 8), C1_S2(K, 32), C1_SMEM(K, 8), C1_SMEM(K, 32)

const C1Entry kC1Entries[] = {
    C1_FIXED_K(1), C1_FIXED_K(3), C1_FIXED_K(5),
    // Any KH, KW <= 11 (K = 0): one configuration per stride and pooling mode.
    C1_ENTRY(0, 1, 64, 32, 4, 32, Act::Param, false, "64x32r4"), C1_ENTRY(0, 2, 64, 32, 4, 32, Act::Param, false, "64x32r4"),
    C1_ENTRY(0, 1, 32, 32, 2, 32, Act::Param, true, "32x32r2"),
};

}  // namespace

std::vector<float> pack_c1_smem_filters(const float* weights, const float* bias, int F, int K) {
  if (F < 1 || F > kC1MaxFilters || K < 1 || K > 11) {
    throw std::length_error("pack_c1_smem_filters: " + std::to_string(F) + " filters of " + std::to_string(K) + "x" +
                            std::to_string(K) + " do not fit the single-channel kernel");
  }
  const int kp = (K + 3) / 4 * 4;
  std::vector<float> out(static_cast<size_t>(F) * K * kp + (F + 3) / 4 * 4, 0.0f);
  for (int f = 0; f < F; ++f) {
    for (int ky = 0; ky < K; ++ky) {
      for (int kx = 0; kx < K; ++kx) out[(static_cast<size_t>(f) * K + ky) * kp + kx] = weights[(f * K + ky) * K + kx];
    }
    out[static_cast<size_t>(F) * K * kp + f] = bias ? bias[f] : 0.0f;
  }
  return out;
}

void pack_c1_filters(const float* weights, const float* bias, int F, int KH, int KW, C1Filters* out) {
  // The block has room for kC1MaxFilters x kC1MaxTaps: a larger layer would write past it.
  if (F < 1 || F > kC1MaxFilters || KH < 1 || KW < 1 || KH * KW > kC1MaxTaps) {
    throw std::length_error("pack_c1_filters: " + std::to_string(F) + " filters of " + std::to_string(KH) + "x" +
                            std::to_string(KW) + " do not fit the single-channel kernel's parameter block");
  }
  std::memset(out, 0, sizeof(*out));
  std::memcpy(out->w, weights, sizeof(float) * F * KH * KW);
  for (int f = 0; f < F; ++f) out->bias[f] = bias ? bias[f] : 0.0f;
}

bool conv2d_c1_supports(const ConvGeometry& g, const Epilogue& e, std::string* why) {
  auto no = [why](const char* reason) {
    if (why) *why = reason;
    return false;
  };
  if (g.C != 1 || g.groups != 1) return no("needs one input channel");
  if (g.F > kC1MaxFilters) return no("more than 32 filters");
  if (g.KH > 11 || g.KW > 11) return no("kernel larger than 11x11");
  if (g.stride_h != g.stride_w || (g.stride_h != 1 && g.stride_h != 2)) return no("stride other than 1 or 2");
  if (g.dil_h != 1 || g.dil_w != 1) return no("dilation");
  if (e.pool.kind != FusedPool::None && e.residual) return no("pooling after a residual add");
  if (e.pool.kind != FusedPool::None && g.stride_h != 1) return no("pooling after a strided conv");
  return true;
}

std::vector<C1Variant> conv2d_c1_variants(const ConvGeometry& g, const Epilogue& e) {
  std::vector<C1Variant> out;
  if (!conv2d_c1_supports(g, e)) return out;
  const bool pool = e.pool.kind != FusedPool::None;
  const bool square_fixed = g.KH == g.KW && (g.KH == 1 || g.KH == 3 || g.KH == 5);
  // Fixed-K instantiations when the shape has one; the epilogue's activation picks the Act variant
  // (Param covers everything, the dedicated ones are faster).
  std::vector<const C1Entry*> fitting;
  for (const C1Entry& entry : kC1Entries) {
    if (entry.s != g.stride_h || entry.pool != pool || entry.fmax < g.F) continue;
    if (square_fixed ? entry.k != g.KH : entry.k != 0) continue;
    const bool act_ok = entry.act == Act::Param || (entry.act == Act::None && e.param_act == ParamAct::None) ||
                        (entry.act == Act::Relu && e.param_act == ParamAct::Relu);
    if (!act_ok) continue;
    if (pool && (pooled_tile(entry.th, e.pool.kh, e.pool.dil_h, e.pool.sh) < 1 ||
                 pooled_tile(entry.tw, e.pool.kw, e.pool.dil_w, e.pool.sw) < 1)) {
      continue;
    }
    fitting.push_back(&entry);
  }
  // Heuristic order: dedicated activation before Param, the smallest FMAX that holds F, then the tile
  // whose width wastes the fewest columns of this image.
  auto waste = [&](const C1Entry* en) {
    const int w = pool ? e.pool.PW : g.OW;
    return (en->tw - w % en->tw) % en->tw + (w < en->tw ? en->tw - w : 0);
  };
  std::stable_sort(fitting.begin(), fitting.end(), [&](const C1Entry* a, const C1Entry* b) {
    const bool pa = a->act == Act::Param, pb = b->act == Act::Param;
    if (pa != pb) return !pa;
    if (a->fmax != b->fmax) return a->fmax < b->fmax;
    return waste(a) < waste(b);
  });
  for (const C1Entry* en : fitting) {
    const std::string k = en->k > 0 ? std::to_string(en->k) : "any";
    out.push_back({"c1_k" + k + "s" + std::to_string(en->s) + "_f" + std::to_string(en->fmax) + "_" + en->tile_name +
                       "_" + act_name(en->act) + (en->pool ? "_pool" : "") + (en->smem_weights ? "_smemw" : ""),
                   en->launch, en->smem_weights});
  }
  return out;
}

}  // namespace cnnrt::kernels
