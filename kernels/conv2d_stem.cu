// The few-channel convolution kernel (see conv2d_stem.cuh): staging with stride-phase de-interleaved columns,
// RP pixels x FT filters a thread, the fused epilogue; the configurations worth timing.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/conv2d_general.cuh"  // pack_general
#include "kernels/conv2d_stem.cuh"
#include "kernels/conv_device.cuh"
#include "kernels/conv_registry.hpp"
#include "kernels/conv_tile.cuh"
#include "kernels/cp_async.cuh"
#include "kernels/fast_div.cuh"
#include "kernels/launch.cuh"

namespace cnnrt::kernels {

namespace {

constexpr int kMaxChannels = 16;
constexpr int kMaxTaps = 11;    // a side
constexpr int kMaxTaps1d = 128;
constexpr int kMaxStride = 4;

// Everything the launch derives from (layer, configuration): the tile, the staged region, shared memory.
struct StemShape {
  int tiles_y = 1, tiles_x = 1;
  int pth = 0, ptw = 0;         // pooled outputs a tile (0 without a pool)
  int th = 1, tw = 1;           // conv outputs computed a tile
  int ih = 1, iw = 1;           // staged input rows and columns a channel
  int phase_w = 1, pitch = 1;   // de-interleaved columns a phase; floats a staged row
  int np = 1, npt = 1, slots = 1, items = 1;
  int taps = 1, w_floats = 0, img_floats = 0, tile_floats = 0;
  size_t smem_bytes = 0;
};

StemShape stem_shape(const ConvGeometry& g, const Epilogue& e, const StemConfig& c) {
  StemShape s;
  if (e.pool.kind != FusedPool::None) {
    s.pth = std::min(c.tile_h, e.pool.PH);
    s.ptw = std::min(c.tile_w, e.pool.PW);
    s.tiles_y = (e.pool.PH + s.pth - 1) / s.pth;
    s.tiles_x = (e.pool.PW + s.ptw - 1) / s.ptw;
    s.th = (s.pth - 1) * e.pool.sh + (e.pool.kh - 1) * e.pool.dil_h + 1;
    s.tw = (s.ptw - 1) * e.pool.sw + (e.pool.kw - 1) * e.pool.dil_w + 1;
  } else {
    s.th = std::min(c.tile_h, g.OH);
    s.tw = std::min(c.tile_w, g.OW);
    s.tiles_y = (g.OH + s.th - 1) / s.th;
    s.tiles_x = (g.OW + s.tw - 1) / s.tw;
  }
  s.ih = (s.th - 1) * g.stride_h + g.KH;
  s.iw = (s.tw - 1) * g.stride_w + g.KW;
  s.phase_w = (s.iw + g.stride_w - 1) / g.stride_w;
  // Lanes hold consecutive pixels of the tile, wrapping to the next tile rows: a pitch with
  // stride_h * pitch = tw (mod 32) puts a wrapped lane on the bank after its neighbour's.
  const int base = g.stride_w * s.phase_w;
  s.pitch = base;
  for (int p = base; p < base + 32; ++p) {
    if ((g.stride_h * p - s.tw) % 32 == 0) {
      s.pitch = p;
      break;
    }
  }
  s.np = s.th * s.tw;
  s.npt = (s.np + c.rp - 1) / c.rp;
  s.slots = c.fb / c.ft;
  s.items = s.slots * s.npt;
  s.taps = g.C * g.KH * g.KW;
  s.w_floats = s.taps * c.fb;
  s.img_floats = (g.C * s.ih * s.pitch + 3) / 4 * 4;
  s.tile_floats = e.pool.kind != FusedPool::None ? c.fb * s.np : 0;
  s.smem_bytes = sizeof(float) * (static_cast<size_t>(s.w_floats) + s.img_floats + s.tile_floats);
  return s;
}

constexpr int kMaxThreads = 256;

// Threads a block: every pass over the items full (items 308 on at most 256 threads: two passes of 160, not one of
// 256 and one of 52).
int stem_threads(int items) {
  const int passes = (items + kMaxThreads - 1) / kMaxThreads;
  return std::min(kMaxThreads, (items + passes - 1) / passes + 31) / 32 * 32;
}

// The kernel's view of the shape.
struct Params {
  FastDiv tiles_x, tiles_per_image, tw, iw, ih, sw, npt, per_filter, ptw_div;
  int fb, f_pad, th, pitch, phase_w, w_floats, img_floats, np, items, pth, ptw;
};

// The first conv output row and column of tile (tile_y, tile_x): of pth x ptw pooled outputs with a pool, of th x tw
// conv outputs without.
template <bool POOL>
__device__ __forceinline__ void tile_origin(int tile_y, int tile_x, int pth, int ptw, int th, int tw, const PoolGeometry& pl,
                                            int& r0, int& c0) {
  if constexpr (POOL) {
    r0 = tile_y * pth * pl.sh - pl.pad_top;
    c0 = tile_x * ptw * pl.sw - pl.pad_left;
  } else {
    r0 = tile_y * th;
    c0 = tile_x * tw;
  }
}

// Conv output (f, oy, ox) of image n (`yn` its first output): + residual, activation, stored.
template <Act ACT>
__device__ __forceinline__ void store_conv_output(float* yn, float v, int n, int f, int oy, int ox, const ConvGeometry& g,
                                                  const Epilogue& e) {
  const int64_t idx = (static_cast<int64_t>(f) * g.OH + oy) * g.OW + ox;
  if (e.residual) v += __ldg(e.residual + static_cast<int64_t>(n) * g.F * g.OH * g.OW + idx);
  yn[idx] = activate<ACT>(v, e);
}

// Pooled output (py, px) from one filter's activated conv tile in shared memory (`map`: conv rows from r0, columns
// from c0, `pitch` floats a row).
__device__ __forceinline__ float pool_conv_tile(const float* map, int pitch, int r0, int c0, int py, int px,
                                                const PoolGeometry& pl, bool small_max, int OH, int OW) {
  return small_max ? max_window_3x3(map + (py * pl.sh - pl.pad_top - r0) * pitch + (px * pl.sw - pl.pad_left - c0),
                                    pitch, pl, py, px, OH, OW)
                   : pool_from_smem(map, pitch, r0, c0, py, px, pl, OH, OW);
}

template <int FT, int RP, Act ACT, bool POOL>
__global__ void __launch_bounds__(kMaxThreads)
    conv2d_stem_kernel(const float* __restrict__ x, float* __restrict__ y, const float* __restrict__ wt,
                       const ConvGeometry g, const Epilogue e, const Params p) {
  extern __shared__ float4 smem4[];
  float* wsm = reinterpret_cast<float*>(smem4);  // [tap][FB]
  float* img = wsm + p.w_floats;                 // [C][IH][pitch], columns de-interleaved by stride phase
  float* ctile = img + p.img_floats;             // [FB][TH * TW]: the activated conv tile (pooling)
  const int tid = threadIdx.x, nthreads = blockDim.x;
  const int n = p.tiles_per_image.div(blockIdx.x);
  const int t = blockIdx.x - n * static_cast<int>(p.tiles_per_image.d);
  const int tile_y = p.tiles_x.div(t), tile_x = t - tile_y * static_cast<int>(p.tiles_x.d);
  const int f0 = blockIdx.y * p.fb;
  const int taps = g.C * g.KH * g.KW;

  // The filters first, 16 bytes a copy (FB and f0 are multiples of 4; past Fpad: zeros).
  const int chunks = p.fb / 4;
  for (int i = tid; i < taps * chunks; i += nthreads) {
    const int tap = i / chunks, f = f0 + 4 * (i - tap * chunks);
    const bool ok = f < p.f_pad;
    cp_async_16(wsm + 4 * i, ok ? wt + static_cast<int64_t>(tap) * p.f_pad + f : wt, ok);
  }
  wait_for_prior_grid();

  // The tile's first conv output row and column, and the input region under it.
  int r0, c0;
  tile_origin<POOL>(tile_y, tile_x, p.pth, p.ptw, p.th, static_cast<int>(p.tw.d), e.pool, r0, c0);
  const int iy0 = r0 * g.stride_h - g.pad_top, ix0 = c0 * g.stride_w - g.pad_left;
  const int ih = static_cast<int>(p.ih.d), iw = static_cast<int>(p.iw.d), sw = static_cast<int>(p.sw.d);
  const float* xn = x + static_cast<int64_t>(n) * g.C * g.H * g.W;
  // A warp a staged row, its lanes along the columns of each stride phase: no index division per element.
  const int lane = tid & 31;
  for (int row = tid >> 5; row < g.C * ih; row += nthreads >> 5) {
    const int c = p.ih.div(row), iy = iy0 + row - c * ih;
    const bool row_inside = iy >= 0 && iy < g.H;
    const float* src = row_inside ? xn + (static_cast<int64_t>(c) * g.H + iy) * g.W : x;
    float* dst = img + row * p.pitch;
    for (int m = 0; m < sw; ++m) {
      for (int q = lane; q < p.phase_w; q += 32) {
        const int col = q * sw + m, ix = ix0 + col;
        if (col >= iw) break;
        const bool ok = row_inside && ix >= 0 && ix < g.W;
        cp_async_4(dst + m * p.phase_w + q, ok ? src + ix : x, ok);
      }
    }
  }
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  const int tw = static_cast<int>(p.tw.d), npt = static_cast<int>(p.npt.d);
  const int64_t out_plane = POOL ? static_cast<int64_t>(e.pool.PH) * e.pool.PW : static_cast<int64_t>(g.OH) * g.OW;
  float* yn = y + static_cast<int64_t>(n) * e.out_image_stride(static_cast<int64_t>(g.F) * out_plane);
  // Item = (filter slot, pixel thread), pixel threads fastest: a warp shares its filters (broadcast loads)
  // and holds consecutive pixels (consecutive words of the staged input at every tap).
  for (int it = tid; it < p.items; it += nthreads) {
    const int slot = p.npt.div(it), q = it - slot * npt;
    int off[RP];
#pragma unroll
    for (int k = 0; k < RP; ++k) {
      const int pix = min(q + k * npt, p.np - 1);  // past the tile: recompute the last pixel, not stored
      const int r = p.tw.div(pix), col = pix - r * tw;
      off[k] = r * g.stride_h * p.pitch + col;
    }
    float acc[RP][FT];
#pragma unroll
    for (int k = 0; k < RP; ++k) {
#pragma unroll
      for (int f = 0; f < FT; ++f) acc[k][f] = 0.0f;
    }
    const float* wp = wsm + slot * FT;
    for (int c = 0; c < g.C; ++c) {
      for (int ky = 0; ky < g.KH; ++ky) {
        const float* rowp = img + (c * ih + ky) * p.pitch;
        const float* wrow = wp + (c * g.KH + ky) * g.KW * p.fb;
        for (int ph = 0; ph < sw; ++ph) {
          const float* ip = rowp + ph * p.phase_w;
          for (int kx = ph; kx < g.KW; kx += sw, ++ip) {
            float w[FT];
            load_window_row(w, wrow + kx * p.fb);  // FT filters of the tap: float4 broadcasts
#pragma unroll
            for (int k = 0; k < RP; ++k) {
              const float in = ip[off[k]];
#pragma unroll
              for (int f = 0; f < FT; ++f) acc[k][f] = fmaf(in, w[f], acc[k][f]);
            }
          }
        }
      }
    }
    // Epilogue: bias, then either the activated conv tile (pooling) or residual, activation and the store.
#pragma unroll
    for (int k = 0; k < RP; ++k) {
      const int pix = q + k * npt;
      if (pix >= p.np) continue;
      const int r = p.tw.div(pix), col = pix - r * tw;
      const int oy = r0 + r, ox = c0 + col;
#pragma unroll
      for (int j = 0; j < FT; ++j) {
        const int fl = slot * FT + j, f = f0 + fl;
        if (f >= g.F) continue;
        float v = acc[k][j];
        if (e.bias) v += __ldg(e.bias + f);
        if constexpr (POOL) {
          ctile[fl * p.np + pix] = activate<ACT>(v, e);
        } else if (oy < g.OH && ox < g.OW) {
          store_conv_output<ACT>(yn, v, n, f, oy, ox, g, e);
        }
      }
    }
  }
  if constexpr (POOL) {
    __syncthreads();
    // The pooled tile of every filter, one output a thread and pass (FastDiv indices).
    const PoolGeometry& pl = e.pool;
    const bool small_max = small_max_window(pl);
    const int per_filter = p.pth * p.ptw, filters = min(p.fb, g.F - f0);
    for (int i = tid; i < filters * per_filter; i += nthreads) {
      const int fl = p.per_filter.div(i), rest = i - fl * per_filter;
      const int ry = p.ptw_div.div(rest), py = tile_y * p.pth + ry, px = tile_x * p.ptw + rest - ry * p.ptw;
      if (py >= pl.PH || px >= pl.PW) continue;
      const float* map = ctile + fl * p.np;
      yn[(static_cast<int64_t>(f0 + fl) * pl.PH + py) * pl.PW + px] =
          pool_conv_tile(map, tw, r0, c0, py, px, pl, small_max, g.OH, g.OW);
    }
  }
}

template <int FT, int RP, Act ACT, bool POOL>
void launch_stem(const float* x, float* y, const float* w, const ConvGeometry& g, const Epilogue& e,
                 const StemConfig& c, int smem_optin, cudaStream_t stream) {
  const StemShape s = stem_shape(g, e, c);
  Params p;
  p.tiles_x = FastDiv(s.tiles_x);
  p.tiles_per_image = FastDiv(s.tiles_x * s.tiles_y);
  p.tw = FastDiv(s.tw);
  p.iw = FastDiv(s.iw);
  p.ih = FastDiv(s.ih);
  p.sw = FastDiv(g.stride_w);
  p.npt = FastDiv(s.npt);
  p.fb = c.fb;
  p.f_pad = (g.F + 3) & ~3;
  p.th = s.th;
  p.pitch = s.pitch;
  p.phase_w = s.phase_w;
  p.w_floats = s.w_floats;
  p.img_floats = s.img_floats;
  p.np = s.np;
  p.items = s.items;
  p.pth = s.pth;
  p.ptw = s.ptw;
  p.per_filter = FastDiv(std::max(1, s.pth * s.ptw));
  p.ptw_div = FastDiv(std::max(1, s.ptw));
  // The device's whole opt-in (DeviceCaps::smem_optin): a layer's tile sets what a launch asks for, and the
  // attribute is set once a kernel and device.
  allow_dynamic_smem<conv2d_stem_kernel<FT, RP, ACT, POOL>>(smem_optin);
  const int threads = stem_threads(s.items);
  const dim3 grid(static_cast<unsigned>(g.N * s.tiles_x * s.tiles_y), static_cast<unsigned>((g.F + c.fb - 1) / c.fb));
  launch_overlapped(conv2d_stem_kernel<FT, RP, ACT, POOL>, grid, dim3(threads), s.smem_bytes, stream, 1u, x, y, w, g,
                    e, p);
}

// ---------------------------------------------------------------------------------------------------------------
// The row kernel: square filters of K taps at stride S (both compile-time: 3x3 and 7x7 at stride 2, the zoo's
// stems). A warp's 32 lanes are 32 adjacent output columns of one tile; each thread sums RP output rows of its
// column (rows g*RP .. g*RP+RP-1 of the tile) for FT filters. The staged input has a compile-time row pitch, so
// every tap's input and weight reads are a register plus an immediate offset: the C*K*K taps run unrolled, per
// tap FT/4 broadcast vector loads of the weights, RP loads of the input (consecutive words across the warp in
// the tap's stride phase: no bank conflicts) and FT*RP FMAs, with no index arithmetic. Weights are staged per
// filter slot ([slot][C][K][K][FT]); pooled tiles are 32 conv columns wide at most (a warp), their conv tile kept
// in shared memory and pooled as the general kernel does.
constexpr int kRowsMaxThreads = 512;
constexpr int kRowsTileLanes = 32;
constexpr int kRowsCtilePitch = 33;  // conv-tile row pitch (pooling reads stride-2 columns)

template <int K, int S>
struct RowsDims {
  static constexpr int iw = (kRowsTileLanes - 1) * S + K;    // staged input columns a row
  static constexpr int phase_w = (iw + S - 1) / S;           // columns a stride phase
  static constexpr int pitch = S * phase_w;                  // floats a staged row
};

struct RowsConfig {
  int ft = 8, rp = 2;  // compile-time in the instantiation
  int fb = 16;         // filters a block (a multiple of ft)
  int th = 8;          // without a pool: conv rows a tile; with one: pooled rows a tile
};

struct RowsShape {
  int tiles_y = 1, tiles_x = 1;
  int pth = 0, ptw = 0;  // pooled outputs a tile (0 without a pool)
  int th = 1, tw = 1;    // conv outputs a tile
  int rg = 1;            // row groups (warps a filter slot): ceil(th / rp)
  int ih = 1;            // staged input rows a channel: (rg * rp - 1) * S + K
  int slots = 1, threads = 32;
  int w_floats = 0, img_floats = 0, tile_floats = 0;
  size_t smem_bytes = 0;
};

RowsShape rows_shape(const ConvGeometry& g, const Epilogue& e, const RowsConfig& c, int pitch) {
  RowsShape s;
  if (e.pool.kind != FusedPool::None) {
    const int ext_w = (e.pool.kw - 1) * e.pool.dil_w + 1, ext_h = (e.pool.kh - 1) * e.pool.dil_h + 1;
    s.ptw = std::max(1, std::min(e.pool.PW, (kRowsTileLanes - ext_w) / e.pool.sw + 1));
    s.pth = std::min(c.th, e.pool.PH);
    s.tiles_x = (e.pool.PW + s.ptw - 1) / s.ptw;
    s.tiles_y = (e.pool.PH + s.pth - 1) / s.pth;
    s.tw = (s.ptw - 1) * e.pool.sw + ext_w;
    s.th = (s.pth - 1) * e.pool.sh + ext_h;
  } else {
    s.tw = std::min(kRowsTileLanes, g.OW);
    s.th = std::min(c.th, g.OH);
    s.tiles_x = (g.OW + kRowsTileLanes - 1) / kRowsTileLanes;
    s.tiles_y = (g.OH + s.th - 1) / s.th;
  }
  s.rg = (s.th + c.rp - 1) / c.rp;
  s.ih = (s.rg * c.rp - 1) * g.stride_h + g.KH;
  s.slots = c.fb / c.ft;
  s.threads = kRowsTileLanes * s.rg * s.slots;
  s.w_floats = g.C * g.KH * g.KW * c.fb;
  s.img_floats = (g.C * s.ih * pitch + 3) / 4 * 4;
  s.tile_floats = e.pool.kind != FusedPool::None ? c.fb * s.th * kRowsCtilePitch : 0;
  s.smem_bytes = sizeof(float) * (static_cast<size_t>(s.w_floats) + s.img_floats + s.tile_floats);
  return s;
}

struct RowsParams {
  FastDiv tiles_x, tiles_per_image;
  int fb, f_pad, th, rg, ih, w_floats, img_floats, pth, ptw;
};

template <int K, int S, int FT, int RP, Act ACT, bool POOL>
__global__ void __launch_bounds__(kRowsMaxThreads)
    conv2d_stem_rows_kernel(const float* __restrict__ x, float* __restrict__ y, const float* __restrict__ wt,
                            const ConvGeometry g, const Epilogue e, const RowsParams p) {
  using D = RowsDims<K, S>;
  extern __shared__ float4 smem4[];
  float* wsm = reinterpret_cast<float*>(smem4);  // [slot][C][K][K][FT]
  float* img = wsm + p.w_floats;                 // [C][IH][pitch], columns de-interleaved by stride phase
  float* ctile = img + p.img_floats;             // [FB][TH][33]: the activated conv tile (pooling)
  const int n = p.tiles_per_image.div(blockIdx.x);
  const int t = blockIdx.x - n * static_cast<int>(p.tiles_per_image.d);
  const int tile_y = p.tiles_x.div(t), tile_x = t - tile_y * static_cast<int>(p.tiles_x.d);
  const int f0 = blockIdx.y * p.fb;
  constexpr int kTaps = K * K;
  const int taps = g.C * kTaps;

  // The filters first, 16 bytes a copy, regrouped by slot (FT filters of a slot contiguous a tap): a warp a tap.
  const int lane = threadIdx.x;
  for (int tap = threadIdx.y; tap < taps; tap += blockDim.y) {
    for (int fl = 4 * lane; fl < p.fb; fl += 4 * kRowsTileLanes) {
      const int f = f0 + fl, slot = fl / FT, j = fl - slot * FT;
      const bool ok = f < p.f_pad;
      cp_async_16(wsm + (slot * taps + tap) * FT + j, ok ? wt + static_cast<int64_t>(tap) * p.f_pad + f : wt, ok);
    }
  }
  wait_for_prior_grid();

  int r0, c0;
  tile_origin<POOL>(tile_y, tile_x, p.pth, p.ptw, p.th, kRowsTileLanes, e.pool, r0, c0);
  const int iy0 = r0 * S - g.pad_top, ix0 = c0 * S - g.pad_left;
  const float* xn = x + static_cast<int64_t>(n) * g.C * g.H * g.W;
  // A warp a staged row; whether each lane's columns lie inside the image is the same for every row.
  bool col_inside[(D::iw + kRowsTileLanes - 1) / kRowsTileLanes];
#pragma unroll
  for (int q = 0; q < (D::iw + kRowsTileLanes - 1) / kRowsTileLanes; ++q) {
    const int col = q * kRowsTileLanes + lane, ix = ix0 + col;
    col_inside[q] = col < D::iw && ix >= 0 && ix < g.W;
  }
  for (int c = 0; c < g.C; ++c) {
    for (int r = threadIdx.y; r < p.ih; r += blockDim.y) {
      const int iy = iy0 + r;
      const bool row_inside = iy >= 0 && iy < g.H;
      const float* src = xn + (static_cast<int64_t>(c) * g.H + iy) * g.W + ix0;
      float* dst = img + (c * p.ih + r) * D::pitch;
#pragma unroll
      for (int q = 0; q < (D::iw + kRowsTileLanes - 1) / kRowsTileLanes; ++q) {
        const int col = q * kRowsTileLanes + lane;
        if (col < D::iw) {
          const bool ok = row_inside && col_inside[q];
          cp_async_4(dst + (col % S) * D::phase_w + col / S, ok ? src + col : x, ok);
        }
      }
    }
  }
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  const int slot = threadIdx.y / p.rg, grp = threadIdx.y - slot * p.rg;
  float acc[RP][FT];
#pragma unroll
  for (int k = 0; k < RP; ++k) {
#pragma unroll
    for (int f = 0; f < FT; ++f) acc[k][f] = 0.0f;
  }
  const float* ip = img + grp * RP * S * D::pitch + lane;
  const float* wp = wsm + slot * taps * FT;
  for (int c = 0; c < g.C; ++c, ip += p.ih * D::pitch, wp += kTaps * FT) {
#pragma unroll
    for (int ky = 0; ky < K; ++ky) {
#pragma unroll
      for (int kx = 0; kx < K; ++kx) {
        float w[FT];
        load_window_row(w, wp + (ky * K + kx) * FT);
#pragma unroll
        for (int k = 0; k < RP; ++k) {
          const float in = ip[(k * S + ky) * D::pitch + (kx % S) * D::phase_w + kx / S];
#pragma unroll
          for (int f = 0; f < FT; ++f) acc[k][f] = fmaf(in, w[f], acc[k][f]);
        }
      }
    }
  }

  const int64_t out_plane = POOL ? static_cast<int64_t>(e.pool.PH) * e.pool.PW : static_cast<int64_t>(g.OH) * g.OW;
  float* yn = y + static_cast<int64_t>(n) * e.out_image_stride(static_cast<int64_t>(g.F) * out_plane);
#pragma unroll
  for (int j = 0; j < FT; ++j) {
    const int fl = slot * FT + j, f = f0 + fl;
    if (f >= g.F) break;
    const float b = e.bias ? __ldg(e.bias + f) : 0.0f;
#pragma unroll
    for (int k = 0; k < RP; ++k) {
      const int r = grp * RP + k;
      if (r >= p.th) break;
      const float v = acc[k][j] + b;
      if constexpr (POOL) {
        ctile[(fl * p.th + r) * kRowsCtilePitch + lane] = activate<ACT>(v, e);
      } else {
        const int oy = r0 + r, ox = c0 + lane;
        if (oy < g.OH && ox < g.OW) store_conv_output<ACT>(yn, v, n, f, oy, ox, g, e);
      }
    }
  }
  if constexpr (POOL) {
    __syncthreads();
    const PoolGeometry& pl = e.pool;
    const bool small_max = small_max_window(pl);
    // A warp pools one filter's rows: two at a time where a row has at most 16 outputs (lanes 16-31 the second).
    const int row_lanes = p.ptw <= 16 ? 16 : 32, rows_a_pass = kRowsTileLanes / row_lanes;
    const int passes = (p.pth + rows_a_pass - 1) / rows_a_pass, filters = min(p.fb, g.F - f0);
    const int ry0 = lane / row_lanes, cx = lane - ry0 * row_lanes;
    for (int it = threadIdx.y; it < filters * passes; it += blockDim.y) {
      const int fl = it / passes, ry = (it - fl * passes) * rows_a_pass + ry0;
      const int py = tile_y * p.pth + ry, px = tile_x * p.ptw + cx;
      if (ry >= p.pth || cx >= p.ptw || py >= pl.PH || px >= pl.PW) continue;
      const float* map = ctile + fl * p.th * kRowsCtilePitch;
      yn[(static_cast<int64_t>(f0 + fl) * pl.PH + py) * pl.PW + px] =
          pool_conv_tile(map, kRowsCtilePitch, r0, c0, py, px, pl, small_max, g.OH, g.OW);
    }
  }
}

template <int K, int S, int FT, int RP, Act ACT, bool POOL>
void launch_stem_rows(const float* x, float* y, const float* w, const ConvGeometry& g, const Epilogue& e,
                      const RowsConfig& c, int smem_optin, cudaStream_t stream) {
  const RowsShape s = rows_shape(g, e, c, RowsDims<K, S>::pitch);
  RowsParams p;
  p.tiles_x = FastDiv(s.tiles_x);
  p.tiles_per_image = FastDiv(s.tiles_x * s.tiles_y);
  p.fb = c.fb;
  p.f_pad = (g.F + 3) & ~3;
  p.th = s.th;
  p.rg = s.rg;
  p.ih = s.ih;
  p.w_floats = s.w_floats;
  p.img_floats = s.img_floats;
  p.pth = s.pth;
  p.ptw = s.ptw;
  allow_dynamic_smem<conv2d_stem_rows_kernel<K, S, FT, RP, ACT, POOL>>(smem_optin);
  const dim3 grid(static_cast<unsigned>(g.N * s.tiles_x * s.tiles_y), static_cast<unsigned>((g.F + c.fb - 1) / c.fb));
  launch_overlapped(conv2d_stem_rows_kernel<K, S, FT, RP, ACT, POOL>, grid,
                    dim3(kRowsTileLanes, static_cast<unsigned>(s.rg * s.slots)), s.smem_bytes, stream, 1u, x, y, w, g,
                    e, p);
}

struct RowsEntry {
  int k, s, ft, rp;
  Act act;
  bool pool;
  int pitch;
  decltype(&launch_stem_rows<3, 2, 8, 2, Act::Relu, false>) launch;
};

#define ROWS_ENTRY(K, S, FT, RP, ACT, POOL) \
  RowsEntry{K, S, FT, RP, ACT, POOL, RowsDims<K, S>::pitch, &launch_stem_rows<K, S, FT, RP, ACT, POOL>}
#define ROWS_ACTS(K, S)                                                                                      \
  ROWS_ENTRY(K, S, 8, 2, Act::Relu, false), ROWS_ENTRY(K, S, 8, 2, Act::Param, false),                       \
      ROWS_ENTRY(K, S, 8, 4, Act::Relu, false), ROWS_ENTRY(K, S, 8, 4, Act::Param, false),                   \
      ROWS_ENTRY(K, S, 8, 3, Act::Relu, true), ROWS_ENTRY(K, S, 8, 3, Act::Param, true)
// 3x3 and 7x7 at stride 2: the RGB stems of MobileNet, ShuffleNet, SqueezeNet, EfficientNet and ResNet.
const RowsEntry kRowsEntries[] = {ROWS_ACTS(3, 2), ROWS_ACTS(7, 2)};
#undef ROWS_ACTS
#undef ROWS_ENTRY

struct Entry {
  int ft, rp;
  Act act;
  bool pool;
  decltype(&launch_stem<8, 2, Act::Relu, false>) launch;
};

#define STEM_ENTRY(FT, RP, ACT, POOL) Entry{FT, RP, ACT, POOL, &launch_stem<FT, RP, ACT, POOL>}
#define STEM_ACTS(FT, RP)                                                                                 \
  STEM_ENTRY(FT, RP, Act::Relu, false), STEM_ENTRY(FT, RP, Act::Param, false), STEM_ENTRY(FT, RP, Act::Relu, true), \
      STEM_ENTRY(FT, RP, Act::Param, true)
const Entry kEntries[] = {STEM_ACTS(4, 4), STEM_ACTS(8, 2), STEM_ACTS(8, 4), STEM_ACTS(16, 2), STEM_ACTS(16, 4)};
#undef STEM_ACTS
#undef STEM_ENTRY

const char* act_token(Act a) { return a == Act::Relu ? "relu" : "act"; }

std::string variant_name(const Entry& en, int fb, const std::string& tile) {
  return "stem_f" + std::to_string(fb) + "_rb" + std::to_string(en.ft) + "x" + std::to_string(en.rp) + "_t" + tile +
         "_" + act_token(en.act) + (en.pool ? "_pool" : "");
}

constexpr int kBlockFilters[] = {16, 32, 64};
// Tiles (rows x columns of outputs, pooled where the pool is fused); a 1-D layer takes rows of 1.
constexpr int kTiles2d[][2] = {{4, 8}, {8, 8}, {8, 16}, {16, 16}, {16, 32}, {32, 32}};
constexpr int kTiles1d[][2] = {{1, 64}, {1, 128}, {1, 256}, {1, 512}};
// Tiles offered a layer per instantiation and block width: the best by the estimate (tuning time grows with each).
constexpr size_t kTilesOffered = 1;

// The estimated cycles of a launch (lower is better; ranks configurations before they are measured): a fixed cost
// (launch, staging round trip, barriers) plus `staging` and each thread's serial `chain` of instructions, issue bound
// once a scheduler holds more than ~4 warps; in waves of the blocks resident at once.
double estimate_cycles(double blocks, int threads, size_t smem_bytes, int sm_count, double chain, double staging) {
  const int resident =
      std::max(1, std::min(2048 / threads, static_cast<int>(std::max<size_t>(1, 228 * 1024 / smem_bytes))));
  const double waves = std::ceil(blocks / (double(sm_count) * resident));
  const double per_sm = std::min<double>(resident, std::ceil(blocks / sm_count));
  const double warps_per_scheduler = per_sm * threads / 128.0;
  return waves * (3000.0 + staging + chain * std::max(4.0, warps_per_scheduler));
}

constexpr int kRowsBlockFilters[] = {8, 16, 32, 64};
constexpr int kRowsPooledMaxFilters = 32;  // a pooled block keeps its conv tile of every filter in shared memory
constexpr int kRowsConvRows[] = {2, 4, 8, 16};  // conv rows a tile (without a pool)
constexpr int kRowsPooledRows[] = {2, 4, 7};  // pooled rows a tile (3x3/2 pooling: 5, 9 and 15 conv rows)

std::string rows_variant_name(const RowsEntry& en, int fb, const std::string& tile) {
  return "stem_k" + std::to_string(en.k) + "_s" + std::to_string(en.s) + "_f" + std::to_string(fb) + "_rb" +
         std::to_string(en.ft) + "x" + std::to_string(en.rp) + "_t" + tile + "_" + act_token(en.act) +
         (en.pool ? "_pool" : "");
}

class StemFamily final : public ConvFamily {
 public:
  bool writes_image_stride() const override { return true; }
  StemFamily()
      : ConvFamily("stem",
                   "few input channels (RGB and single-channel stems, 1-D first layers), any filter to 11 and stride "
                   "to 4: filters and input tile staged once (columns de-interleaved by stride phase), each thread a "
                   "few pixels for 4-16 filters, pooling fused",
                   {}, pack_general) {}

  std::string reject(const ConvLayer& layer, const DeviceCaps& dev) const override {
    const ConvGeometry& g = layer.g;
    if (g.groups != 1) return "grouped convolution";
    if (g.C > kMaxChannels) return "more than 16 input channels";
    const bool one_d = g.H == 1 && g.KH == 1;
    if (g.KH > kMaxTaps || g.KW > (one_d ? kMaxTaps1d : kMaxTaps)) return one_d ? "filter longer than 128" : "filter larger than 11";
    if (g.stride_h > kMaxStride || g.stride_w > kMaxStride) return "stride above 4";
    if (g.dil_h != 1 || g.dil_w != 1) return "dilation";
    if (layer.pooled() && layer.residual) return "pooling with residual";
    if (layer.pooled() && (layer.e.pool.PH < 1 || layer.e.pool.PW < 1)) return "empty pooled output";
    const StemConfig smallest{4, 4, 16, 1, 8};
    if (stem_shape(g, layer.e, smallest).smem_bytes > static_cast<size_t>(dev.smem_optin))
      return "the staged filters and input do not fit in shared memory";
    return "";
  }

  std::vector<ConvVariant> variants(const ConvLayer& layer, const DeviceCaps& dev,
                                    const LayerWeights& w) const override {
    const ConvGeometry& g = layer.g;
    const bool pool = layer.pooled();
    const bool relu = layer.e.param_act == ParamAct::Relu;
    const bool one_d = g.H == 1 && g.KH == 1;
    const int sm_count = std::max(1, dev.sm_count);
    std::vector<std::pair<ConvVariant, double>> scored;  // score: estimated cycles, lower is better
    for (const Entry& en : kEntries) {
      if (en.pool != pool || (en.act == Act::Relu) != relu) continue;
      for (int fb : kBlockFilters) {
        if (fb < en.ft || fb % en.ft != 0) continue;
        if (fb > 16 && fb / 2 >= g.F) continue;  // half the block's filters would be padding
        std::vector<std::pair<ConvVariant, double>> tiles;
        auto offer = [&](int th, int tw) {
          const StemConfig c{en.ft, en.rp, fb, th, tw};
          const StemShape s = stem_shape(g, layer.e, c);
          if (s.smem_bytes > static_cast<size_t>(dev.smem_optin)) return;
          const int threads = stem_threads(s.items);
          const double per_tap = en.ft / 4.0 + en.rp + en.ft * en.rp + 1.0;  // loads, FMAs, index arithmetic
          const double score = estimate_cycles(double(g.N) * s.tiles_x * s.tiles_y * ((g.F + fb - 1) / fb), threads,
                                               s.smem_bytes, sm_count,
                                               std::ceil(double(s.items) / threads) * s.taps * per_tap,
                                               double(g.C * s.ih * s.iw + s.w_floats / 4) / threads * 8.0);
          // The tile's width x height (in pooled outputs where the pool is fused), as every family names tiles.
          const std::string name = variant_name(
              en, fb, std::to_string(s.ptw ? s.ptw : s.tw) + "x" + std::to_string(s.pth ? s.pth : s.th));
          for (const auto& [v, sc] : tiles) {
            if (v.name == name) return;  // the same tile after clipping to the map
          }
          tiles.push_back({{name, "", bind_launch(en.launch, layer, w.packed, c, dev.smem_optin)}, score});
        };
        if (one_d) {
          for (const auto& t : kTiles1d) offer(t[0], t[1]);
        } else {
          for (const auto& t : kTiles2d) offer(t[0], t[1]);
        }
        // The best tiles of each instantiation and block width (every one is measured against the others).
        std::stable_sort(tiles.begin(), tiles.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
        if (tiles.size() > kTilesOffered) tiles.resize(kTilesOffered);
        for (auto& t : tiles) scored.push_back(std::move(t));
      }
    }
    offer_rows(layer, dev, w, scored);
    return rank_by_score(std::move(scored));
  }

  std::vector<std::string> variant_names() const override {
    std::vector<std::string> names;
    for (const Entry& en : kEntries) {
      for (int fb : kBlockFilters) {
        if (fb >= en.ft) names.push_back(variant_name(en, fb, "*"));
      }
    }
    for (const RowsEntry& en : kRowsEntries) {
      for (int fb : kRowsBlockFilters) {
        if (!en.pool || fb <= kRowsPooledMaxFilters) names.push_back(rows_variant_name(en, fb, "*"));
      }
    }
    return names;
  }

 private:
  // The row kernel's configurations for a layer of its filter size and stride: every block width and tile that
  // fits (threads and shared memory), each measured.
  static void offer_rows(const ConvLayer& layer, const DeviceCaps& dev, const LayerWeights& w,
                         std::vector<std::pair<ConvVariant, double>>& scored) {
    const ConvGeometry& g = layer.g;
    const bool pool = layer.pooled();
    if (g.KH != g.KW || g.stride_h != g.stride_w) return;
    if (pool && (layer.e.pool.kw - 1) * layer.e.pool.dil_w + 1 > kRowsTileLanes) return;  // a window wider than a warp
    const bool relu = layer.e.param_act == ParamAct::Relu;
    const int sm_count = std::max(1, dev.sm_count);
    for (const RowsEntry& en : kRowsEntries) {
      if (en.k != g.KH || en.s != g.stride_h || en.pool != pool || (en.act == Act::Relu) != relu) continue;
      for (int fb : kRowsBlockFilters) {
        if (fb > 8 && fb / 2 >= g.F) continue;  // half the block's filters would be padding
        if (pool && fb > kRowsPooledMaxFilters) continue;
        const std::vector<int> rows = pool ? std::vector<int>(std::begin(kRowsPooledRows), std::end(kRowsPooledRows))
                                           : std::vector<int>(std::begin(kRowsConvRows), std::end(kRowsConvRows));
        for (int th : rows) {
          const RowsConfig c{en.ft, en.rp, fb, th};
          const RowsShape s = rows_shape(g, layer.e, c, en.pitch);
          if (s.threads > kRowsMaxThreads || s.smem_bytes > static_cast<size_t>(dev.smem_optin)) continue;
          const std::string name = rows_variant_name(
              en, fb, std::to_string(pool ? s.ptw : s.tw) + "x" + std::to_string(pool ? s.pth : s.th));
          bool seen = false;
          for (const auto& [v, sc] : scored) seen = seen || v.name == name;
          if (seen) continue;
          // Each thread's chain: FT/4 + RP loads and FT*RP FMAs a tap, no index arithmetic.
          const double score = estimate_cycles(double(g.N) * s.tiles_x * s.tiles_y * ((g.F + fb - 1) / fb),
                                               s.threads, s.smem_bytes, sm_count,
                                               double(g.C) * g.KH * g.KW * (en.ft / 4.0 + en.rp + en.ft * en.rp),
                                               double(g.C * s.ih * en.pitch + s.w_floats / 4) / s.threads * 8.0);
          scored.push_back({{name, "", bind_launch(en.launch, layer, w.packed, c, dev.smem_optin)}, score});
        }
      }
    }
  }
};

}  // namespace

const ConvFamily& conv2d_stem_family() {
  static const StemFamily family;
  return family;
}

}  // namespace cnnrt::kernels
