// An inverted residual block in two launches over every SM (see mbconv.cuh, "The split").
#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "kernels/conv_device.cuh"
#include "kernels/cp_async.cuh"
#include "kernels/fast_div.cuh"
#include "kernels/launch.cuh"
#include "kernels/mbconv.cuh"
#include "kernels/mbconv_device.cuh"
#include "kernels/row_reduce.cuh"

namespace cnnrt::kernels {

namespace {

constexpr int T = kMbconvThreads;
constexpr int kSliceChannels[] = {2, 4, 8};        // hidden channels a block of the first launch
constexpr int kOutputTiles[][2] = {{4, 16}, {8, 16}, {16, 16}, {16, 64}};  // outputs x pixels a block of the second

using mbconv_device::bias_at;
using mbconv_device::depthwise_window;
using mbconv_device::round4;
using mbconv_device::sum_shares;

// The first launch's shared memory, in floats (each array 16-byte aligned): the slice's weights, the image's input
// (where the block expands and it fits), the expanded and depthwise maps of the slice, the slice's channel means.
struct SplitALayout {
  int wexp = 0, bexp = 0, wdw = 0, bdw = 0, w1 = 0, x = 0, e = 0, dmap = 0, mean = 0, floats = 0;
};

// Lanes that share one expand output (4 channels x 1 pixel), each a 1/KS of the input channels, summed by shuffles:
// as many as keep every thread busy (a power of two, at most a warp). On small maps (16 pixels) the expand is
// otherwise a few threads each running the whole input-channel loop.
__host__ __device__ inline int expand_lanes(int hc, int P) {
  const int items = (hc + 3) / 4 * P;
  int ks = 1;
  while (ks < 32 && items * ks * 2 <= T) ks *= 2;
  return ks;
}

// The staged input's row stride: odd where lanes split the input channels (lanes reading rows k, k + 1, ... of the
// same pixel then hit different banks).
__host__ __device__ inline int x_stride(int hc, int P) { return expand_lanes(hc, P) > 1 ? (P | 1) : P; }

__host__ __device__ inline SplitALayout split_a_layout(const MbconvDesc& d, int hc, bool stage_x) {
  SplitALayout L;
  const int P = d.H * d.W, OP = d.dw.OH * d.dw.OW, KK = d.dw.KH * d.dw.KW, S = d.squeeze;
  int at = 0;
  auto take = [&at](int floats) {
    const int here = at;
    at += round4(floats);
    return here;
  };
  L.wexp = take(d.expand ? round4(hc) * d.C : 0);  // 4 rows a thread: rows up to a multiple of 4
  L.bexp = take(d.expand ? round4(hc) : 0);
  L.wdw = take(hc * KK);
  L.bdw = take(hc);
  L.w1 = take(S * hc);
  L.x = take(d.expand && stage_x ? d.C * x_stride(hc, P) : 0);
  L.e = take(hc * P);
  L.dmap = take(hc * OP);
  L.mean = take(S > 0 ? hc : 0);
  L.floats = at;
  return L;
}

// The second launch's: the block's project weights [hidden][FO] (scaled by the gate), the gate's weights, the slices'
// shares of the squeeze sums, the depthwise outputs of the block's pixels [hidden][PG] and the partial sums of its
// tiles [split][FO][PG].
struct SplitBLayout {
  int wt = 0, w2 = 0, b2 = 0, part = 0, z = 0, dm = 0, red = 0, floats = 0;
};

// The packed project weights' row length: F rounded up to 16, so that every block's FO (4, 8, 16) columns lie inside a
// row and start 16 bytes aligned.
__host__ __device__ inline int split_pack_columns(int F) { return (F + 15) / 16 * 16; }

// Hidden-channel splits of the second launch: 256 threads over (FO/4) x (PG/4) tiles of 4 x 4 outputs.
__host__ __device__ inline int split_ways(int FO, int PG) { return max(1, T / ((FO / 4) * (PG / 4))); }

__host__ __device__ inline SplitBLayout split_b_layout(const MbconvDesc& d, int FO, int PG, int slices) {
  SplitBLayout L;
  const int HD = d.hidden, S = d.squeeze;
  int at = 0;
  auto take = [&at](int floats) {
    const int here = at;
    at += round4(floats);
    return here;
  };
  L.wt = take(HD * FO);
  L.w2 = take(HD * S);  // [S][hidden]
  L.b2 = take(S > 0 ? HD : 0);
  L.part = take(slices * S);
  L.z = take(S);
  L.dm = take(HD * PG);
  L.red = take(split_ways(FO, PG) * FO * PG);
  L.floats = at;
  return L;
}


// The first launch: block (n, s) runs hidden channels [s*hc, s*hc + hc) of image n: expand, depthwise with its
// activation (stored to `dw_out` [batch][hidden][OH*OW]), and where the block has a gate, the channels' means and
// their share of the squeeze layer's sums (stored to `squeeze_part` [batch][slices][squeeze]).
__global__ void __launch_bounds__(T)
    mbconv_split_channels(const float* __restrict__ x, float* __restrict__ dw_out, float* __restrict__ squeeze_part,
                          const __grid_constant__ MbconvDesc d, int hc, int stage_x, FastDiv in_px, FastDiv out_px,
                          FastDiv out_w) {
  extern __shared__ __align__(16) float smem[];
  constexpr int kWarps = T / 32;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int n = static_cast<int>(blockIdx.x), slice = static_cast<int>(blockIdx.y);
  const int slices = static_cast<int>(gridDim.y);
  const SplitALayout L = split_a_layout(d, hc, stage_x != 0);
  const ConvGeometry& g = d.dw;
  const int C = d.C, HD = d.hidden, S = d.squeeze;
  const int P = d.H * d.W, OP = g.OH * g.OW, KK = g.KH * g.KW;
  const int c0 = slice * hc, my = min(HD, c0 + hc) - c0;

  // 0. The slice's weights (constants: before the prior grid's end).
  if (d.expand) {
    cp_async_floats<T>(smem + L.wexp, d.w_exp + static_cast<int64_t>(c0) * C, my * C);
    for (int i = tid; i < my; i += T) smem[L.bexp + i] = bias_at(d.exp_epilogue.bias, c0 + i);
  }
  cp_async_floats<T>(smem + L.wdw, d.w_dw + static_cast<int64_t>(c0) * KK, my * KK);
  for (int i = tid; i < my; i += T) smem[L.bdw + i] = bias_at(d.dw_epilogue.bias, c0 + i);
  for (int i = tid; i < S * my; i += T) {  // [S][hidden] -> [S][my]
    const int s = i / my, c = i - s * my;
    cp_async_4(smem + L.w1 + s * hc + c, d.w_se1 + static_cast<int64_t>(s) * HD + c0 + c, true);
  }
  cp_async_commit();
  wait_for_prior_grid();

  // 1. The input: every channel where the block expands (or read from L2 where it did not fit), else the slice's.
  const float* xi = x + static_cast<int64_t>(n) * C * P;
  const float* xs = smem + L.x;
  int xrow = P;  // the input's row stride where the expand reads it
  float* e = smem + L.e;
  if (d.expand) {
    if (stage_x) {
      xrow = x_stride(hc, P);
      if (xrow == P) {
        cp_async_floats<T>(smem + L.x, xi, C * P);
      } else {
        for (int i = tid; i < C * P; i += T) {
          const int k = in_px.div(i);
          cp_async_4(smem + L.x + k * xrow + (i - k * P), xi + i, true);
        }
      }
    } else {
      xs = xi;
    }
  } else {
    cp_async_floats<T>(e, xi + static_cast<int64_t>(c0) * P, my * P);
  }
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  // 2. Expand: KS lanes 4 channels of one pixel (rows past `my` are read, never stored), lane r of them input channels
  // r, r + KS, ..., their sums added by shuffles (a fixed order). Whole warps run each round (the shuffles need every
  // lane); lanes past the items add zeros.
  if (d.expand) {
    const Epilogue ep = d.exp_epilogue;
    const float* wexp = smem + L.wexp;
    const int chunks = (my + 3) / 4, KS = expand_lanes(hc, P), items = chunks * P * KS;
    for (int base = tid - lane; base < items; base += T) {
      const int item = base + lane, r = item % KS, pix = item / KS;
      const bool valid = item < items;
      const int q = valid ? in_px.div(pix) : 0, p = pix - q * P, cb = 4 * q;
      const float* w0 = wexp + cb * C;
      float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      if (valid) {
#pragma unroll 4
        for (int k = r; k < C; k += KS) {
          const float v = xs[k * xrow + p];
#pragma unroll
          for (int j = 0; j < 4; ++j) acc[j] = fmaf(w0[j * C + k], v, acc[j]);
        }
      }
      for (int m = KS / 2; m > 0; m /= 2) {
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[j] += __shfl_xor_sync(0xffffffffu, acc[j], m);
      }
      if (valid && r == 0) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          if (cb + j < my) {
            e[(cb + j) * P + p] = param_activate(acc[j] + smem[L.bexp + cb + j], ep.param_act, ep.alpha, ep.beta);
          }
        }
      }
    }
    __syncthreads();
  }

  // 3. Depthwise: a thread an output, into shared memory (for the means) and to global memory.
  float* dmap = smem + L.dmap;
  const float* wdw = smem + L.wdw;
  const Epilogue dep = d.dw_epilogue;
  float* out = dw_out + (static_cast<int64_t>(n) * HD + c0) * OP;
  for (int item = tid; item < my * OP; item += T) {
    const int c = out_px.div(item), q = item - c * OP, oy = out_w.div(q), ox = q - oy * g.OW;
    const int iy0 = oy * g.stride_h - g.pad_top, ix0 = ox * g.stride_w - g.pad_left;
    const float acc = depthwise_window(e + c * P, 0, wdw + c * KK, iy0, ix0, g);
    const float v = param_activate(acc + smem[L.bdw + c], dep.param_act, dep.alpha, dep.beta);
    dmap[item] = v;
    out[item] = v;
  }
  if (S == 0) return;
  __syncthreads();

  // 4. The gate's first half: the slice's channel means (a warp a channel), its share of the squeeze layer's sums.
  float* mean = smem + L.mean;
  const float inv = 1.0f / static_cast<float>(OP);
  for (int c = warp; c < my; c += kWarps) {
    float s = 0.0f;
    for (int q = lane; q < OP; q += 32) s += dmap[c * OP + q];
    s = warp_allreduce(s, [](float u, float v) { return u + v; });
    if (lane == 0) mean[c] = s * inv;
  }
  __syncthreads();
  float* part = squeeze_part + (static_cast<int64_t>(n) * slices + slice) * S;
  for (int s = tid; s < S; s += T) {
    const float* w1 = smem + L.w1 + s * hc;
    float acc = 0.0f;
    for (int c = 0; c < my; ++c) acc = fmaf(w1[c], mean[c], acc);
    part[s] = acc;
  }
}

// The second launch: block (n, fo, pg) computes outputs [fo*FO, +FO) x pixels [pg*PG, +PG) of image n. Where the
// block has a gate, every block finishes the squeeze layer (the slices' shares added in slice order) and the gate of
// every hidden channel, and scales its project weights by it (FO x hidden products instead of hidden x PG); then the
// project layer in 4 x 4 tiles of outputs x pixels a thread over a share of the hidden channels, the shares added in
// order, the epilogue (bias, residual, activation).
__global__ void __launch_bounds__(T)
    mbconv_split_project(const float* __restrict__ dw_out, const float* __restrict__ squeeze_part,
                         const float* __restrict__ residual, float* __restrict__ y, const __grid_constant__ MbconvDesc d,
                         int FO, int PG, int slices) {
  extern __shared__ __align__(16) float smem[];
  const int tid = threadIdx.x;
  const int n = static_cast<int>(blockIdx.x), f0 = static_cast<int>(blockIdx.y) * FO;
  const int p0 = static_cast<int>(blockIdx.z) * PG;
  const SplitBLayout L = split_b_layout(d, FO, PG, slices);
  const int HD = d.hidden, S = d.squeeze, F = d.F, OP = d.dw.OH * d.dw.OW;
  const int fo = min(FO, F - f0), pg = min(PG, OP - p0);
  float* wt = smem + L.wt;

  // 0. Constants before the prior grid's end, from their packed layouts (mbconv_split_pack) by 16-byte copies: the
  // block's FO columns of the project weights [hidden][Fp] (zeros past F), the gate's second layer [S][hidden].
  const int Fp = split_pack_columns(F), chunks = FO / 4, chunk_shift = __ffs(chunks) - 1;  // FO: 4, 8 or 16
  for (int i = tid; i < HD * chunks; i += T) {
    const int h = i >> chunk_shift, c = 4 * (i & (chunks - 1));
    cp_async_16(wt + h * FO + c, d.w_split + static_cast<int64_t>(h) * Fp + f0 + c, true);
  }
  if (S > 0) {
    cp_async_floats<T>(smem + L.w2, d.w_split + static_cast<int64_t>(HD) * Fp, HD * S);
    for (int i = tid; i < HD; i += T) smem[L.b2 + i] = bias_at(d.b_se2, i);
  }
  cp_async_commit();
  wait_for_prior_grid();

  // 1. The depthwise outputs of the block's pixels (zeros past the map), and the squeeze layer.
  float* dm = smem + L.dm;
  const float* src = dw_out + static_cast<int64_t>(n) * HD * OP + p0;
  if (OP % 4 == 0 && PG % 4 == 0) {
    const int q4 = PG / 4;
    for (int i = tid; i < HD * q4; i += T) {
      const int h = i / q4, q = 4 * (i - h * q4);
      const bool valid = q < pg;
      cp_async_16(dm + h * PG + q, src + (valid ? static_cast<int64_t>(h) * OP + q : 0), valid);
    }
  } else {
    for (int i = tid; i < HD * PG; i += T) {
      const int h = i / PG, q = i - h * PG;
      const bool valid = q < pg;
      cp_async_4(dm + h * PG + q, src + (valid ? static_cast<int64_t>(h) * OP + q : 0), valid);
    }
  }
  if (S > 0) cp_async_floats<T>(smem + L.part, squeeze_part + static_cast<int64_t>(n) * slices * S, slices * S);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  // 2. The squeeze layer (a warp a channel, its lanes over the slices' shares: a fixed order), then the gate of every
  // hidden channel, folded into the project weights.
  if (S > 0) {
    constexpr int kWarps = T / 32;
    const int warp = tid / 32, lane = tid % 32;
    float* z = smem + L.z;
    const float* part = smem + L.part;
    for (int s = warp; s < S; s += kWarps) {
      float acc = 0.0f;
      for (int r = lane; r < slices; r += 32) acc += part[r * S + s];
      acc = warp_allreduce(acc, [](float u, float v) { return u + v; });
      if (lane == 0) z[s] = param_activate(acc + bias_at(d.b_se1, s), d.se_act, d.se_alpha, d.se_beta);
    }
    __syncthreads();
    // Each thread its channels h, h + T, ... (up to kGateRows at once: independent sums), the gates in place of the
    // biases it read.
    constexpr int kGateRows = 4;
    float* gate = smem + L.b2;
    const float* w2 = smem + L.w2;
    for (int h0 = tid; h0 < HD; h0 += kGateRows * T) {
      float acc[kGateRows] = {};
      for (int s = 0; s < S; ++s) {
        const float zs = z[s];
#pragma unroll
        for (int r = 0; r < kGateRows; ++r) {
          const int h = h0 + r * T;
          if (h < HD) acc[r] = fmaf(w2[s * HD + h], zs, acc[r]);
        }
      }
#pragma unroll
      for (int r = 0; r < kGateRows; ++r) {
        const int h = h0 + r * T;
        if (h < HD) gate[h] = param_activate(acc[r] + gate[h], d.se_gate, d.gate_alpha, d.gate_beta);
      }
    }
    __syncthreads();
    for (int i = tid; i < HD * chunks; i += T) {
      float4& w = reinterpret_cast<float4*>(wt)[i];
      const float g = gate[i >> chunk_shift];
      w = make_float4(w.x * g, w.y * g, w.z * g, w.w * g);
    }
    __syncthreads();
  }

  // 3. Project: 4 outputs x 4 pixels a thread over its share of the hidden channels; consecutive threads take
  // consecutive pixel quads (their float4 reads of `dm` cover consecutive banks; of `wt`, a broadcast).
  const int pq = PG / 4, tiles = (FO / 4) * pq, ways = split_ways(FO, PG);
  float* red = smem + L.red;
  for (int item = tid; item < tiles * ways; item += T) {
    const int k = item / tiles, tile = item - k * tiles, oq = tile / pq, q = tile - oq * pq;
    const int h0 = static_cast<int>(static_cast<int64_t>(HD) * k / ways);
    const int h1 = static_cast<int>(static_cast<int64_t>(HD) * (k + 1) / ways);
    float acc[4][4] = {};
#pragma unroll 4
    for (int h = h0; h < h1; ++h) {
      fma_4x4(acc, *reinterpret_cast<const float4*>(wt + h * FO + 4 * oq),
              *reinterpret_cast<const float4*>(dm + h * PG + 4 * q));
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      *reinterpret_cast<float4*>(red + (k * FO + 4 * oq + i) * PG + 4 * q) =
          make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
    }
  }
  __syncthreads();

  // 4. The shares added in order, the epilogue, stored to NCHW.
  const Epilogue ep = d.pj_epilogue;
  for (int i = tid; i < fo * pg; i += T) {
    const int o = i / pg, q = i - o * pg;
    const float s = sum_shares(red + o * PG + q, ways, FO * PG);
    const int64_t at = (static_cast<int64_t>(n) * F + f0 + o) * OP + p0 + q;
    float v = s + bias_at(ep.bias, f0 + o);
    if (residual) v += residual[at];
    y[at] = param_activate(v, ep.param_act, ep.alpha, ep.beta);
  }
}

int64_t split_a_bytes(const MbconvDesc& d, int hc, bool stage_x) {
  return int64_t(split_a_layout(d, hc, stage_x).floats) * 4;
}
int slices_of(const MbconvDesc& d, int hc) { return (d.hidden + hc - 1) / hc; }

int64_t split_b_bytes(const MbconvDesc& d, int FO, int PG, int hc) {
  return int64_t(split_b_layout(d, FO, PG, slices_of(d, hc)).floats) * 4;
}

}  // namespace

std::vector<MbconvVariant> mbconv_split_variants(const MbconvDesc& d, int smem_optin_bytes) {
  std::vector<MbconvVariant> out;
  const int OP4 = round4(d.dw.OH * d.dw.OW);
  for (int hc : kSliceChannels) {
    if (hc > kSliceChannels[0] && slices_of(d, hc / 2) <= 1) break;  // a larger slice adds nothing: one slice already
    bool stage_x = true;
    if (split_a_bytes(d, hc, true) > smem_optin_bytes) {
      if (!d.expand || split_a_bytes(d, hc, false) > smem_optin_bytes) continue;
      stage_x = false;
    }
    int last_pg = 0, last_fo = 0;
    for (const auto& t : kOutputTiles) {
      const int FO = t[0], PG = std::min(t[1], OP4);
      if (FO == last_fo && PG == last_pg) continue;  // the map clipped the tile to one already offered
      last_fo = FO;
      last_pg = PG;
      if (split_b_bytes(d, FO, PG, hc) > smem_optin_bytes) continue;
      MbconvVariant v;
      v.name = fmt::format("mbconv_split{}_{}x{}", hc, FO, t[1]);  // the tile as named, whatever the map clips
      v.stage_x = stage_x;
      v.split_channels = hc;
      v.split_outputs = FO;
      v.split_pixels = PG;
      out.push_back(std::move(v));
    }
  }
  return out;
}

std::vector<std::string> mbconv_split_variant_names() {
  std::vector<std::string> names;
  for (int hc : kSliceChannels) {
    for (const auto& t : kOutputTiles) names.push_back(fmt::format("mbconv_split{}_{}x{}", hc, t[0], t[1]));
  }
  return names;
}

std::vector<float> mbconv_split_pack(const std::vector<float>& w_pj, const std::vector<float>& w_se2,
                                     const MbconvDesc& d) {
  const int HD = d.hidden, F = d.F, S = d.squeeze, Fp = split_pack_columns(F);
  if (w_pj.size() != size_t(F) * HD || w_se2.size() != size_t(S) * HD) {
    throw std::invalid_argument("mbconv_split_pack: " + std::to_string(w_pj.size()) + " project and " +
                                std::to_string(w_se2.size()) + " gate weights for " + std::to_string(F) + " outputs, " +
                                std::to_string(HD) + " hidden and " + std::to_string(S) + " squeeze channels");
  }
  std::vector<float> out(size_t(HD) * Fp + size_t(S) * HD, 0.0f);
  for (int o = 0; o < F; ++o) {
    for (int h = 0; h < HD; ++h) out[size_t(h) * Fp + o] = w_pj[size_t(o) * HD + h];
  }
  float* se2 = out.data() + size_t(HD) * Fp;
  for (int h = 0; h < HD; ++h) {
    for (int s = 0; s < S; ++s) se2[size_t(s) * HD + h] = w_se2[size_t(h) * S + s];
  }
  return out;
}

int64_t mbconv_workspace_floats(const MbconvVariant& v, const MbconvDesc& d) {
  if (v.split_channels == 0) return 0;
  const int64_t maps = int64_t(d.batch) * d.hidden * d.dw.OH * d.dw.OW;
  return (maps + 3) / 4 * 4 + int64_t(d.batch) * slices_of(d, v.split_channels) * d.squeeze;
}

void launch_mbconv_split(const MbconvVariant& v, const float* x, const float* residual, float* y, const MbconvDesc& d,
                         float* workspace, int smem_optin_bytes, cudaStream_t stream) {
  if (d.w_split == nullptr) {
    throw std::invalid_argument("launch_mbconv_split: MbconvDesc::w_split is not set (mbconv_split_pack)");
  }
  const int hc = v.split_channels, FO = v.split_outputs, PG = v.split_pixels, slices = slices_of(d, hc);
  const int OP = d.dw.OH * d.dw.OW;
  float* dw_out = workspace;
  float* part = workspace + (int64_t(d.batch) * d.hidden * OP + 3) / 4 * 4;
  const int a_bytes = static_cast<int>(split_a_bytes(d, hc, v.stage_x));
  if (a_bytes > 48 * 1024) allow_dynamic_smem<mbconv_split_channels>(smem_optin_bytes);
  launch_overlapped(mbconv_split_channels, dim3(static_cast<unsigned>(d.batch), static_cast<unsigned>(slices)),
                    dim3(T), static_cast<size_t>(a_bytes), stream, 1u, x, dw_out, part, d, hc, v.stage_x ? 1 : 0,
                    FastDiv(d.H * d.W), FastDiv(OP), FastDiv(d.dw.OW));
  const int b_bytes = static_cast<int>(split_b_bytes(d, FO, PG, hc));
  if (b_bytes > 48 * 1024) allow_dynamic_smem<mbconv_split_project>(smem_optin_bytes);
  launch_overlapped(mbconv_split_project,
                    dim3(static_cast<unsigned>(d.batch), static_cast<unsigned>((d.F + FO - 1) / FO),
                         static_cast<unsigned>((OP + PG - 1) / PG)),
                    dim3(T), static_cast<size_t>(b_bytes), stream, 1u, dw_out, part, d.residual ? residual : nullptr, y,
                    d, FO, PG, slices);
}

}  // namespace cnnrt::kernels
