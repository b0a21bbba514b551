// An inverted residual block without a gate in one launch over every SM (see mbconv.cuh, "The tile").
#include <fmt/format.h>

#include <algorithm>

#include "kernels/conv_device.cuh"
#include "kernels/cp_async.cuh"
#include "kernels/launch.cuh"
#include "kernels/mbconv.cuh"
#include "kernels/mbconv_device.cuh"

namespace cnnrt::kernels {

namespace {

constexpr int T = kMbconvThreads;
constexpr int kTiles[][2] = {{2, 2}, {4, 4}, {8, 8}};  // output rows x columns a block

using mbconv_device::round4;
using mbconv_device::sum_shares;

// A block's shared memory, in floats (each array 16-byte aligned): the expand weights [C][HD4] and biases, the
// depthwise weights [hidden][KH*KW] and biases, the project weights [hidden][F4] and biases; the input over the tile's
// window [C][PP], the residual over the tile [F][TP], the expanded window [HD4][PP], the depthwise outputs
// [hidden][TP] and the project's partial sums [ways][F4][TP]. HD4, F4, PP and TP round up to multiples of 4 (4 x 4 register tiles).
struct TileLayout {
  int IH = 0, IW = 0;  // the depthwise window of the block's output tile (input rows x columns)
  int HD4 = 0, F4 = 0, PP = 0, TP = 0, ways = 1;
  int wexp = 0, bexp = 0, wdw = 0, bdw = 0, wpj = 0, bpj = 0, x = 0, res = 0, e = 0, dmap = 0, red = 0, floats = 0;
};

__host__ __device__ inline TileLayout tile_layout(const MbconvDesc& d, int th, int tw) {
  TileLayout L;
  const ConvGeometry& g = d.dw;
  L.IH = (th - 1) * g.stride_h + (g.KH - 1) * g.dil_h + 1;
  L.IW = (tw - 1) * g.stride_w + (g.KW - 1) * g.dil_w + 1;
  L.HD4 = round4(d.hidden);
  L.F4 = round4(d.F);
  L.PP = round4(L.IH * L.IW);
  L.TP = round4(th * tw);
  const int tiles = (L.F4 / 4) * (L.TP / 4);  // the project's 4 x 4 tiles; the hidden channels split to fill T threads
  L.ways = max(1, min(T / tiles, d.hidden));
  int at = 0;
  auto take = [&at](int floats) {
    const int here = at;
    at += round4(floats);
    return here;
  };
  L.wexp = take(d.expand ? d.C * L.HD4 : 0);
  L.bexp = take(d.expand ? L.HD4 : 0);
  L.wdw = take(d.hidden * g.KH * g.KW);
  L.bdw = take(d.hidden);
  L.wpj = take(d.hidden * L.F4);
  L.bpj = take(L.F4);
  L.x = take(d.C * L.PP);
  L.res = take(d.residual ? d.F * L.TP : 0);
  L.e = take(d.expand ? L.HD4 * L.PP : 0);  // without an expand layer the depthwise reads the input window itself
  L.dmap = take(d.hidden * L.TP);
  L.red = take(L.ways * L.F4 * L.TP);
  L.floats = at;
  return L;
}

// `n` floats of `bias` into shared `dst` (zeros where there is no bias); not committed.
__device__ __forceinline__ void stage_bias(float* dst, const float* bias, int n) {
  if (bias) {
    cp_async_floats<T>(dst, bias, n);
  } else {
    for (int i = static_cast<int>(threadIdx.x); i < n; i += T) dst[i] = 0.0f;
  }
}

// Block (tile, n) computes the th x tw output tile `tile` (row-major over the map's tiles) of image n, every channel:
//   0. before waiting for the prior grid (constants), every weight, the expand and project weights transposed so a
//      thread reads 4 hidden channels or 4 outputs as one float4;
//   1. the input over the tile's depthwise window (zeros outside the image: the padding), and the residual over the
//      tile (read now, so its latency hides behind the sums);
//   2. expand: 4 hidden channels x 4 window pixels a thread, its activation; zeros outside the image (the depthwise
//      layer pads its own input, the expanded map, with zeros);
//   3. depthwise: a thread an output, its activation;
//   4. project: 4 outputs x 4 pixels a thread over a share of the hidden channels, the shares added in order, the
//      epilogue (bias, residual, activation), stored to NCHW.
// The window overlaps the neighbouring tiles' (recomputed there): the price of needing no other block.
// Bounded at two blocks an SM: without the bound ptxas held the kernel to 64 registers and spilled; with it, 96 and no
// spills.
__global__ void __launch_bounds__(T, 2)
    mbconv_tile_kernel(const float* __restrict__ x, const float* __restrict__ residual, float* __restrict__ y,
                       const __grid_constant__ MbconvDesc d, int th, int tw, int tiles_x) {
  extern __shared__ __align__(16) float smem[];
  const int tid = threadIdx.x;
  const int tile = static_cast<int>(blockIdx.x), n = static_cast<int>(blockIdx.y);
  const TileLayout L = tile_layout(d, th, tw);
  const ConvGeometry& g = d.dw;
  const int C = d.C, HD = d.hidden, F = d.F, KK = g.KH * g.KW;
  const int oy0 = tile / tiles_x * th, ox0 = tile % tiles_x * tw;
  const int iy0 = oy0 * g.stride_h - g.pad_top, ix0 = ox0 * g.stride_w - g.pad_left;
  const int window = L.IH * L.IW, tp = th * tw;

  // 0. The weights.
  if (d.expand) {
    for (int i = tid; i < L.HD4 * C; i += T) {  // [hidden][C] -> [C][HD4], zeros past the hidden channels
      const int h = i / C, c = i - h * C;
      const bool valid = h < HD;
      cp_async_4(smem + L.wexp + c * L.HD4 + h, d.w_exp + (valid ? i : 0), valid);
    }
    stage_bias(smem + L.bexp, d.exp_epilogue.bias, HD);
  }
  cp_async_floats<T>(smem + L.wdw, d.w_dw, HD * KK);
  stage_bias(smem + L.bdw, d.dw_epilogue.bias, HD);
  for (int i = tid; i < L.F4 * HD; i += T) {  // [F][hidden] -> [hidden][F4], zeros past F
    const int f = i / HD, h = i - f * HD;
    const bool valid = f < F;
    cp_async_4(smem + L.wpj + h * L.F4 + f, d.w_pj + (valid ? i : 0), valid);
  }
  stage_bias(smem + L.bpj, d.pj_epilogue.bias, F);
  cp_async_commit();
  wait_for_prior_grid();

  // 1. The input window.
  const float* xn = x + static_cast<int64_t>(n) * C * d.H * d.W;
  float* xs = smem + L.x;
  for (int i = tid; i < C * L.PP; i += T) {
    const int c = i / L.PP, p = i - c * L.PP, r = p / L.IW;
    const int iy = iy0 + r, ix = ix0 + p - r * L.IW;
    const bool in = p < window && static_cast<unsigned>(iy) < static_cast<unsigned>(d.H) &&
                    static_cast<unsigned>(ix) < static_cast<unsigned>(d.W);
    cp_async_4(xs + i, in ? xn + (static_cast<int64_t>(c) * d.H + iy) * d.W + ix : xn, in);
  }
  const int OP = g.OH * g.OW;
  if (residual) {
    const float* rn = residual + static_cast<int64_t>(n) * F * OP;
    for (int i = tid; i < F * tp; i += T) {
      const int f = i / tp, q = i - f * tp, oy = oy0 + q / tw, ox = ox0 + q % tw;
      const bool in = oy < g.OH && ox < g.OW;
      cp_async_4(smem + L.res + f * L.TP + q, in ? rn + static_cast<int64_t>(f) * OP + oy * g.OW + ox : rn, in);
    }
  }
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  // 2. Expand over the window; consecutive threads take consecutive pixel quads (float4 reads of the input on
  // consecutive banks, of the weights a broadcast).
  const float* e = xs;
  if (d.expand) {
    float* es = smem + L.e;
    const Epilogue ep = d.exp_epilogue;
    const int pq = L.PP / 4, items = (L.HD4 / 4) * pq;
    for (int item = tid; item < items; item += T) {
      const int hq = item / pq, q = item - hq * pq;
      float acc[4][4] = {};
#pragma unroll 4
      for (int c = 0; c < C; ++c) {
        fma_4x4(acc, *reinterpret_cast<const float4*>(smem + L.wexp + c * L.HD4 + 4 * hq),
                *reinterpret_cast<const float4*>(xs + c * L.PP + 4 * q));
      }
      bool in[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int p = 4 * q + j, r = p / L.IW, iy = iy0 + r, ix = ix0 + p - r * L.IW;
        in[j] = p < window && static_cast<unsigned>(iy) < static_cast<unsigned>(d.H) &&
                static_cast<unsigned>(ix) < static_cast<unsigned>(d.W);
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int h = 4 * hq + i;
        const float b = smem[L.bexp + min(h, HD - 1)];
        float v[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) v[j] = in[j] ? param_activate(acc[i][j] + b, ep.param_act, ep.alpha, ep.beta) : 0.0f;
        *reinterpret_cast<float4*>(es + h * L.PP + 4 * q) = make_float4(v[0], v[1], v[2], v[3]);
      }
    }
    e = es;
    __syncthreads();
  }

  // 3. Depthwise: a thread an output (pixels past the tile's th x tw are zeros, read by the project, never stored).
  float* dmap = smem + L.dmap;
  {
    const Epilogue ep = d.dw_epilogue;
    for (int item = tid; item < HD * L.TP; item += T) {
      const int h = item / L.TP, q = item - h * L.TP;
      float v = 0.0f;
      if (q < tp) {
        const int oy = q / tw, ox = q - oy * tw;
        const float* map = e + h * L.PP + oy * g.stride_h * L.IW + ox * g.stride_w;
        const float* w = smem + L.wdw + h * KK;
        float acc = 0.0f;
        for (int ky = 0; ky < g.KH; ++ky) {
          for (int kx = 0; kx < g.KW; ++kx) acc = fmaf(w[ky * g.KW + kx], map[ky * g.dil_h * L.IW + kx * g.dil_w], acc);
        }
        v = param_activate(acc + smem[L.bdw + h], ep.param_act, ep.alpha, ep.beta);
      }
      dmap[item] = v;
    }
  }
  __syncthreads();

  // 4. Project: share k of the hidden channels, 4 outputs x 4 pixels a thread; consecutive threads consecutive pixel
  // quads.
  const int pq = L.TP / 4, tiles = (L.F4 / 4) * pq;
  float* red = smem + L.red;
  for (int item = tid; item < tiles * L.ways; item += T) {
    const int k = item / tiles, t = item - k * tiles, fq = t / pq, q = t - fq * pq;
    const int h0 = static_cast<int>(static_cast<int64_t>(HD) * k / L.ways);
    const int h1 = static_cast<int>(static_cast<int64_t>(HD) * (k + 1) / L.ways);
    float acc[4][4] = {};
#pragma unroll 4
    for (int h = h0; h < h1; ++h) {
      fma_4x4(acc, *reinterpret_cast<const float4*>(smem + L.wpj + h * L.F4 + 4 * fq),
              *reinterpret_cast<const float4*>(dmap + h * L.TP + 4 * q));
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      *reinterpret_cast<float4*>(red + (k * L.F4 + 4 * fq + i) * L.TP + 4 * q) =
          make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
    }
  }
  __syncthreads();

  const Epilogue ep = d.pj_epilogue;
  for (int i = tid; i < F * tp; i += T) {
    const int f = i / tp, q = i - f * tp, oy = oy0 + q / tw, ox = ox0 + q % tw;
    if (oy >= g.OH || ox >= g.OW) continue;
    const int64_t at = (static_cast<int64_t>(n) * F + f) * OP + oy * g.OW + ox;
    float v = sum_shares(red + f * L.TP + q, L.ways, L.F4 * L.TP) + smem[L.bpj + f];
    if (residual) v += smem[L.res + f * L.TP + q];
    y[at] = param_activate(v, ep.param_act, ep.alpha, ep.beta);
  }
}

int64_t tile_bytes(const MbconvDesc& d, int th, int tw) { return int64_t(tile_layout(d, th, tw).floats) * 4; }

}  // namespace

std::vector<MbconvVariant> mbconv_tile_variants(const MbconvDesc& d, int smem_optin_bytes) {
  std::vector<MbconvVariant> out;
  if (d.squeeze > 0) return out;  // a gate needs every pixel's depthwise output first
  int last_h = 0, last_w = 0;
  for (const auto& t : kTiles) {
    const int th = std::min(t[0], d.dw.OH), tw = std::min(t[1], d.dw.OW);
    if (th == last_h && tw == last_w) continue;  // the map clipped the tile to one already offered
    last_h = th;
    last_w = tw;
    if (tile_bytes(d, th, tw) > smem_optin_bytes) continue;
    MbconvVariant v;
    v.name = fmt::format("mbconv_tile{}x{}", t[0], t[1]);  // the tile as named, whatever the map clips
    v.tile_h = th;
    v.tile_w = tw;
    out.push_back(std::move(v));
  }
  return out;
}

std::vector<std::string> mbconv_tile_variant_names() {
  std::vector<std::string> names;
  for (const auto& t : kTiles) names.push_back(fmt::format("mbconv_tile{}x{}", t[0], t[1]));
  return names;
}

void launch_mbconv_tile(const MbconvVariant& v, const float* x, const float* residual, float* y, const MbconvDesc& d,
                        int smem_optin_bytes, cudaStream_t stream) {
  const int th = v.tile_h, tw = v.tile_w;
  const int tiles_y = (d.dw.OH + th - 1) / th, tiles_x = (d.dw.OW + tw - 1) / tw;
  const int bytes = static_cast<int>(tile_bytes(d, th, tw));
  if (bytes > 48 * 1024) allow_dynamic_smem<mbconv_tile_kernel>(smem_optin_bytes);
  launch_overlapped(mbconv_tile_kernel,
                    dim3(static_cast<unsigned>(tiles_y * tiles_x), static_cast<unsigned>(d.batch)), dim3(T),
                    static_cast<size_t>(bytes), stream, 1u, x, d.residual ? residual : nullptr, y, d, th, tw, tiles_x);
}

}  // namespace cnnrt::kernels
