// An inverted residual block in one launch (see mbconv.cuh).
#include "kernels/mbconv.cuh"

#include <fmt/format.h>

#include "kernels/cluster_ranks.cuh"
#include "kernels/conv_chain_device.cuh"
#include "kernels/conv_device.cuh"
#include "kernels/cp_async.cuh"
#include "kernels/fast_div.cuh"
#include "kernels/launch.cuh"
#include "kernels/mbconv_device.cuh"
#include "kernels/row_reduce.cuh"

namespace cnnrt::kernels {

namespace {

constexpr int kClusterRanks[] = {16, 8, 4, 2};

using mbconv_device::bias_at;
using mbconv_device::depthwise_window;
using mbconv_device::round4;

// A block's shared memory, in floats (each array 16-byte aligned): its share of the weights, the gate's vectors
// (`zall`: every rank's share of the squeeze sums), its channels' expanded map `e` and depthwise map `dmap`, the
// image's input `x` (where the block expands and it fits; else the expand reads it from global memory), and `red`:
// every rank's partial sums of the outputs this rank adds up. Other ranks store into zall and red while this one
// may still be computing, so nothing else lives there. In a chain of blocks each region is as large as the chain's
// largest, at the same place for every block, and the weights come first (the next block's are staged while this
// one adds up its outputs).
struct MbconvSizes {
  int wexp = 0, bexp = 0, wdw = 0, bdw = 0, wpj = 0, w1 = 0, b1 = 0, w2 = 0, b2 = 0;  // the weights
  int mean = 0, zall = 0, z = 0, gate = 0, e = 0, dmap = 0, x = 0, red = 0;
  int weights() const { return wexp + bexp + wdw + bdw + wpj + w1 + b1 + w2 + b2; }
};

struct MbconvLayout {
  int share = 0;  // hidden channels a rank
  int per = 0;    // outputs a rank adds up: red holds every rank's partial sums of them
  int wexp = 0, bexp = 0, wdw = 0, bdw = 0, wpj = 0;
  int w1 = 0, b1 = 0, w2 = 0, b2 = 0, mean = 0, zall = 0, z = 0, gate = 0;
  int e = 0, dmap = 0, x = 0, red = 0, floats = 0;
};

__host__ __device__ inline MbconvSizes mbconv_sizes(const MbconvDesc& d, int ranks, bool stage_x) {
  const int hc = (d.hidden + ranks - 1) / ranks, hc4 = round4(hc), S = d.squeeze;
  const int P = d.H * d.W, OP = d.dw.OH * d.dw.OW, KK = d.dw.KH * d.dw.KW;
  MbconvSizes z;
  z.wexp = round4(d.expand ? hc4 * d.C : 0);  // 4 rows a thread: rows up to a multiple of 4
  z.bexp = round4(d.expand ? hc4 : 0);
  z.wdw = round4(hc * KK);
  z.bdw = round4(hc);
  z.wpj = round4(d.F * hc);
  z.w1 = round4(S * hc);
  z.b1 = round4(S);
  z.w2 = round4(hc * S);
  z.b2 = round4(S > 0 ? hc : 0);
  z.mean = round4(S > 0 ? hc : 0);
  z.zall = round4(ranks * S);
  z.z = round4(S);
  z.gate = round4(S > 0 ? hc : 0);
  z.e = round4(hc * P);
  z.dmap = round4(hc * OP);
  z.x = round4(d.expand && stage_x ? d.C * P : 0);
  z.red = round4(ranks * ((d.F * OP + ranks - 1) / ranks));
  return z;
}

MbconvSizes max_sizes(const MbconvSizes& a, const MbconvSizes& b) {
  MbconvSizes m;
  m.wexp = std::max(a.weights(), b.weights());  // the weights as one region
  m.mean = std::max(a.mean, b.mean);
  m.zall = std::max(a.zall, b.zall);
  m.z = std::max(a.z, b.z);
  m.gate = std::max(a.gate, b.gate);
  m.e = std::max(a.e, b.e);
  m.dmap = std::max(a.dmap, b.dmap);
  m.x = std::max(a.x, b.x);
  m.red = std::max(a.red, b.red);
  return m;
}

// The block's own weights packed from 0, the other regions where `cap` (the chain's largest sizes) puts them.
MbconvLayout mbconv_place(const MbconvDesc& d, int ranks, const MbconvSizes& own, const MbconvSizes& cap) {
  MbconvLayout L;
  L.share = (d.hidden + ranks - 1) / ranks;
  L.per = (d.F * d.dw.OH * d.dw.OW + ranks - 1) / ranks;
  int at = 0;
  auto take = [&at](int floats) {
    const int here = at;
    at += floats;
    return here;
  };
  L.wexp = take(own.wexp);
  L.bexp = take(own.bexp);
  L.wdw = take(own.wdw);
  L.bdw = take(own.bdw);
  L.wpj = take(own.wpj);
  L.w1 = take(own.w1);
  L.b1 = take(own.b1);
  L.w2 = take(own.w2);
  L.b2 = take(own.b2);
  at = std::max(at, cap.weights());
  L.mean = take(cap.mean);
  L.zall = take(cap.zall);
  L.z = take(cap.z);
  L.gate = take(cap.gate);
  L.e = take(cap.e);
  L.dmap = take(cap.dmap);
  L.x = take(cap.x);
  L.red = take(cap.red);
  L.floats = at;
  return L;
}

// What a block of the kernel needs: the layer description, its shared memory layout and divisors.
struct MbconvStage {
  MbconvDesc d;
  MbconvLayout L;
  int stage_x = 1;
  FastDiv in_px, out_px, out_w, per;
};

MbconvStage make_stage(const MbconvDesc& d, int ranks, bool stage_x, const MbconvSizes& cap) {
  MbconvStage s;
  s.d = d;
  s.L = mbconv_place(d, ranks, mbconv_sizes(d, ranks, stage_x), cap);
  s.stage_x = stage_x ? 1 : 0;
  s.in_px = FastDiv(d.H * d.W);
  s.out_px = FastDiv(d.dw.OH * d.dw.OW);
  s.out_w = FastDiv(d.dw.OW);
  s.per = FastDiv(s.L.per);
  return s;
}

// Copies n floats from global src to shared dst (cp.async, not committed).
__device__ __forceinline__ void stage(float* dst, const float* src, int n) {
  cp_async_floats<kMbconvThreads>(dst, src, n);
}

// Copies this rank's share of the block's weights into shared memory (cp.async, not committed).
__device__ void stage_weights(const MbconvStage& st, float* smem, int rank, int ranks) {
  constexpr int T = kMbconvThreads;
  const int tid = threadIdx.x;
  const MbconvDesc& d = st.d;
  const MbconvLayout& L = st.L;
  const int C = d.C, HD = d.hidden, S = d.squeeze, F = d.F, KK = d.dw.KH * d.dw.KW;
  const int hc = L.share, c0 = min(HD, rank * hc), my = min(HD, c0 + hc) - c0;
  if (d.expand) {
    stage(smem + L.wexp, d.w_exp + static_cast<int64_t>(c0) * C, my * C);
    for (int i = tid; i < my; i += T) smem[L.bexp + i] = bias_at(d.exp_epilogue.bias, c0 + i);
  }
  stage(smem + L.wdw, d.w_dw + static_cast<int64_t>(c0) * KK, my * KK);
  for (int i = tid; i < my; i += T) smem[L.bdw + i] = bias_at(d.dw_epilogue.bias, c0 + i);
  for (int i = tid; i < F * my; i += T) {  // [F][hidden] -> [F][my]
    const int f = i / my, c = i - f * my;
    cp_async_4(smem + L.wpj + f * hc + c, d.w_pj + static_cast<int64_t>(f) * HD + c0 + c, true);
  }
  if (S > 0) {
    for (int i = tid; i < S * my; i += T) {  // [S][hidden] -> [S][my]
      const int s = i / my, c = i - s * my;
      cp_async_4(smem + L.w1 + s * hc + c, d.w_se1 + static_cast<int64_t>(s) * HD + c0 + c, true);
    }
    stage(smem + L.w2, d.w_se2 + static_cast<int64_t>(c0) * S, my * S);  // rows [c0, c0 + my) of [hidden][S]
    for (int i = tid; i < S; i += T) smem[L.b1 + i] = bias_at(d.b_se1, i);
    for (int i = tid; i < my; i += T) smem[L.b2 + i] = bias_at(d.b_se2, c0 + i);
  }
  (void)ranks;
}

// One block for image n, its weights already staged (or in flight). `next`: the block after it in a chain (its
// weights are staged once this block's project sums are done), or null.
__device__ void block_body(const MbconvStage& st, float* smem, const float* __restrict__ x,
                           const float* __restrict__ residual, float* __restrict__ y, int n, int rank, int ranks,
                           const MbconvStage* next) {
  constexpr int T = kMbconvThreads, kWarps = T / 32;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  // The description's scalars as locals (registers): in a chain `st` lives in shared memory, and the inner loops
  // would otherwise read it there at every use.
  const MbconvDesc& d = st.d;
  const MbconvLayout L = st.L;
  const bool stage_x = st.stage_x != 0;
  const FastDiv in_px = st.in_px, out_px = st.out_px, out_w = st.out_w, per_rank = st.per;
  const ConvGeometry g = d.dw;
  const Epilogue exp_ep = d.exp_epilogue, dw_ep = d.dw_epilogue, ep = d.pj_epilogue;
  const int C = d.C, HD = d.hidden, S = d.squeeze, F = d.F;
  const int P = d.H * d.W, OP = d.dw.OH * d.dw.OW, KH = d.dw.KH, KW = d.dw.KW, KK = KH * KW;
  const int hc = L.share, c0 = min(HD, rank * hc), my = min(HD, c0 + hc) - c0;
  const float* wexp = smem + L.wexp;
  const float* bexp = smem + L.bexp;
  const float* wdw = smem + L.wdw;
  const float* bdw = smem + L.bdw;
  const float* wpj = smem + L.wpj;
  float* e = smem + L.e;
  float* dmap = smem + L.dmap;
  const float* xs = smem + L.x;
  float* red = smem + L.red;

  // 1. The input: every channel where the block expands, else this rank's.
  const float* xi = x + static_cast<int64_t>(n) * C * P;
  if (d.expand) {
    if (stage_x) {
      stage(smem + L.x, xi, C * P);
    } else {
      xs = xi;
    }
  } else {
    stage(e, xi + static_cast<int64_t>(c0) * P, my * P);
  }
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  // 2. Expand: a thread 4 channels of one pixel (rows past `my` are read, never stored); the input from shared memory,
  // or where it did not fit from global memory (L2).
  if (d.expand) {
    const int chunks = (my + 3) / 4;
    for (int item = tid; item < chunks * P; item += T) {
      const int q = in_px.div(item), p = item - q * P, cb = 4 * q;
      const float* w0 = wexp + cb * C;
      float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 4
      for (int k = 0; k < C; ++k) {
        const float v = xs[k * P + p];
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[j] = fmaf(w0[j * C + k], v, acc[j]);
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if (cb + j < my) {
          e[(cb + j) * P + p] = param_activate(acc[j] + bexp[cb + j], exp_ep.param_act, exp_ep.alpha, exp_ep.beta);
        }
      }
    }
    __syncthreads();
  }

  // 3. Depthwise: a thread an output.
  for (int item = tid; item < my * OP; item += T) {
    const int c = out_px.div(item), q = item - c * OP, oy = out_w.div(q), ox = q - oy * g.OW;
    const int iy0 = oy * g.stride_h - g.pad_top, ix0 = ox * g.stride_w - g.pad_left;
    const float acc = depthwise_window(e + c * P, 0, wdw + c * KK, iy0, ix0, g);
    dmap[item] = param_activate(acc + bdw[c], dw_ep.param_act, dw_ep.alpha, dw_ep.beta);
  }
  __syncthreads();

  // 4. The gate.
  if (S > 0) {
    float* mean = smem + L.mean;
    float* zall = smem + L.zall;
    float* z = smem + L.z;
    float* gate = smem + L.gate;
    const float inv = 1.0f / static_cast<float>(OP);
    for (int c = warp; c < my; c += kWarps) {
      float s = 0.0f;
      for (int q = lane; q < OP; q += 32) s += dmap[c * OP + q];
      s = warp_allreduce(s, [](float u, float v) { return u + v; });
      if (lane == 0) mean[c] = s * inv;
    }
    __syncthreads();
    for (int s = tid; s < S; s += T) {  // this rank's share of the squeeze sums, into every rank
      const float* w1 = smem + L.w1 + s * hc;
      float acc = 0.0f;
      for (int c = 0; c < my; ++c) acc = fmaf(w1[c], mean[c], acc);
      for (int r = 0; r < ranks; ++r) store_in_rank(zall, rank * S + s, acc, r, ranks);
    }
    rank_barrier(ranks);
    for (int s = tid; s < S; s += T) {
      float acc = 0.0f;
      for (int r = 0; r < ranks; ++r) acc += zall[r * S + s];
      z[s] = param_activate(acc + smem[L.b1 + s], d.se_act, d.se_alpha, d.se_beta);
    }
    __syncthreads();
    for (int c = tid; c < my; c += T) {
      const float* w2 = smem + L.w2 + c * S;
      float acc = 0.0f;
      for (int s = 0; s < S; ++s) acc = fmaf(w2[s], z[s], acc);
      gate[c] = param_activate(acc + smem[L.b2 + c], d.se_gate, d.gate_alpha, d.gate_beta);
    }
    __syncthreads();
    for (int item = tid; item < my * OP; item += T) dmap[item] *= gate[out_px.div(item)];
    __syncthreads();
  }

  // 5. Project: this rank's partial sums of every output, each stored into the rank that adds that output up; then
  // that rank's share of the outputs, the ranks' partials added in rank order, the epilogue.
  const int per = L.per;
  for (int item = tid; item < F * OP; item += T) {
    const int f = out_px.div(item), q = item - f * OP;
    const float* wf = wpj + f * hc;
    float acc = 0.0f;
#pragma unroll 4
    for (int c = 0; c < my; ++c) acc = fmaf(wf[c], dmap[c * OP + q], acc);
    const int owner = per_rank.div(item);
    store_in_rank(red, rank * per + (item - owner * per), acc, owner, ranks);
  }
  if (next) {  // this block's weights are no longer read: the next block's go in their place
    __syncthreads();
    stage_weights(*next, smem, rank, ranks);
    cp_async_commit();
  }
  rank_barrier(ranks);  // after it, no rank stores into another's shared memory until the next block
  const int total = F * OP, i0 = min(total, rank * per), i1 = min(total, i0 + per);
  const int64_t image = static_cast<int64_t>(n) * total;
  for (int i = i0 + tid; i < i1; i += T) {
    float s = 0.0f;
    for (int r = 0; r < ranks; ++r) s += red[r * per + (i - i0)];
    float v = s + bias_at(ep.bias, out_px.div(i));
    if (residual) v += residual[image + i];
    y[image + i] = param_activate(v, ep.param_act, ep.alpha, ep.beta);
  }
  if (next) rank_barrier(ranks);  // the outputs visible to every rank, and zall and red free, for the next block
}

__global__ void __launch_bounds__(kMbconvThreads)
    mbconv_kernel(const float* __restrict__ x, const float* __restrict__ residual, float* __restrict__ y,
                  const __grid_constant__ MbconvStage st) {
  extern __shared__ __align__(16) float smem[];
  const int ranks = static_cast<int>(gridDim.z), rank = static_cast<int>(blockIdx.z);  // the cluster spans z
  stage_weights(st, smem, rank, ranks);  // constants: before the prior grid's end
  cp_async_commit();
  if (ranks > 1) {
    chain_detail::wait_for_prior_grid_in_cluster(ranks);  // every rank has started before any rank stores into another
  } else {
    wait_for_prior_grid();
  }
  block_body(st, smem, x, residual, y, static_cast<int>(blockIdx.x), rank, ranks, nullptr);
}

// Blocks in order, a cluster barrier between them; the stage records copied into shared memory first.
__global__ void __launch_bounds__(kMbconvThreads)
    mbconv_chain_kernel(const MbconvStage* __restrict__ stages, int n_blocks, const __grid_constant__ MbconvChainTensors t) {
  extern __shared__ __align__(16) float smem[];
  const int ranks = static_cast<int>(gridDim.z), rank = static_cast<int>(blockIdx.z);
  auto* table = reinterpret_cast<MbconvStage*>(smem);
  const int table_words = n_blocks * static_cast<int>(sizeof(MbconvStage) / 4);
  float* arena = smem + (table_words + 3) / 4 * 4;
  for (int i = threadIdx.x; i < table_words; i += kMbconvThreads) {
    reinterpret_cast<unsigned*>(smem)[i] = __ldg(reinterpret_cast<const unsigned*>(stages) + i);
  }
  __syncthreads();
  stage_weights(table[0], arena, rank, ranks);
  cp_async_commit();
  if (ranks > 1) {
    chain_detail::wait_for_prior_grid_in_cluster(ranks);
  } else {
    wait_for_prior_grid();
  }
  const int n = static_cast<int>(blockIdx.x);
  for (int b = 0; b < n_blocks; ++b) {
    block_body(table[b], arena, t.x[b], t.residual[b], t.y[b], n, rank, ranks, b + 1 < n_blocks ? &table[b + 1] : nullptr);
  }
}

// The pixel split (`_px` variants), for blocks of large maps and few channels: rank r owns a band of output rows,
// every channel of it, and computes the expanded map of the input rows its band reads (the halo rows computed by both
// ranks next to it), the depthwise outputs and the project outputs of its band; the gate's means are the one thing
// shared (each rank's sums of each channel stored into every rank, one cluster barrier, added in rank order). Every
// rank stages every weight: for early blocks, whose weights are small.
struct MbconvPxLayout {
  int band = 0;     // output rows a rank
  int rows_in = 0;  // input rows a band reads at most
  int wexp = 0, bexp = 0, wdw = 0, bdw = 0, wpj = 0, w1 = 0, b1 = 0, w2 = 0, b2 = 0;
  int msum = 0, z = 0, gate = 0, x = 0, e = 0, dmap = 0, floats = 0;
};

__host__ __device__ inline MbconvPxLayout mbconv_px_layout(const MbconvDesc& d, int ranks) {
  MbconvPxLayout L;
  const ConvGeometry& g = d.dw;
  const int HD = d.hidden, HD4 = round4(HD), S = d.squeeze, KK = g.KH * g.KW;
  L.band = (g.OH + ranks - 1) / ranks;
  L.rows_in = min(d.H, (L.band - 1) * g.stride_h + (g.KH - 1) * g.dil_h + 1);
  int at = 0;
  auto take = [&at](int floats) {
    const int here = at;
    at += round4(floats);
    return here;
  };
  L.wexp = take(d.expand ? HD4 * d.C : 0);
  L.bexp = take(d.expand ? HD4 : 0);
  L.wdw = take(HD * KK);
  L.bdw = take(HD);
  L.wpj = take(d.F * HD);
  L.w1 = take(S * HD);
  L.b1 = take(S);
  L.w2 = take(HD * S);
  L.b2 = take(S > 0 ? HD : 0);
  L.msum = take(S > 0 ? ranks * HD : 0);
  L.z = take(S);
  L.gate = take(S > 0 ? HD : 0);
  L.x = take(d.expand ? d.C * L.rows_in * d.W : 0);
  L.e = take(HD * L.rows_in * d.W);
  L.dmap = take(HD * L.band * g.OW);
  L.floats = at;
  return L;
}

__global__ void __launch_bounds__(kMbconvThreads)
    mbconv_px_kernel(const float* __restrict__ x, const float* __restrict__ residual, float* __restrict__ y,
                     const __grid_constant__ MbconvDesc d, FastDiv in_stride, FastDiv out_stride, FastDiv out_w) {
  extern __shared__ __align__(16) float smem[];
  constexpr int T = kMbconvThreads, kWarps = T / 32;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int ranks = static_cast<int>(gridDim.z), rank = static_cast<int>(blockIdx.z);
  const int n = static_cast<int>(blockIdx.x);
  const MbconvPxLayout L = mbconv_px_layout(d, ranks);
  const ConvGeometry& g = d.dw;
  const int C = d.C, HD = d.hidden, S = d.squeeze, F = d.F, W = d.W, P = d.H * d.W, OP = g.OH * g.OW;
  const int KH = g.KH, KW = g.KW, KK = KH * KW;
  // This rank's output rows and the input rows they read (clamped to the image).
  const int oy0 = min(g.OH, rank * L.band), oy1 = min(g.OH, oy0 + L.band);
  const int iy_lo = max(0, oy0 * g.stride_h - g.pad_top);
  const int iy_hi = oy1 > oy0 ? min(d.H, (oy1 - 1) * g.stride_h - g.pad_top + (KH - 1) * g.dil_h + 1) : iy_lo;
  const int rows = max(0, iy_hi - iy_lo), band_in = rows * W, band_out = (oy1 - oy0) * g.OW;
  // Maps of the band a channel apart by the largest band's size (BI, BO: fixed divisors); a rank's own band may be
  // shorter (the last), its items past band_in or band_out skipped.
  const int BI = L.rows_in * W, BO = L.band * g.OW;

  // 0. Every weight (constants: before the prior grid's end).
  if (d.expand) {
    stage(smem + L.wexp, d.w_exp, HD * C);
    for (int i = tid; i < HD; i += T) smem[L.bexp + i] = bias_at(d.exp_epilogue.bias, i);
  }
  stage(smem + L.wdw, d.w_dw, HD * KK);
  for (int i = tid; i < HD; i += T) smem[L.bdw + i] = bias_at(d.dw_epilogue.bias, i);
  stage(smem + L.wpj, d.w_pj, F * HD);
  if (S > 0) {
    stage(smem + L.w1, d.w_se1, S * HD);
    stage(smem + L.w2, d.w_se2, HD * S);
    for (int i = tid; i < S; i += T) smem[L.b1 + i] = bias_at(d.b_se1, i);
    for (int i = tid; i < HD; i += T) smem[L.b2 + i] = bias_at(d.b_se2, i);
  }
  cp_async_commit();
  if (ranks > 1) {
    chain_detail::wait_for_prior_grid_in_cluster(ranks);
  } else {
    wait_for_prior_grid();
  }

  // 1. The input rows of the band, every channel (into x where the block expands, else straight into e).
  const float* xi = x + static_cast<int64_t>(n) * C * P + iy_lo * W;
  float* dst = d.expand ? smem + L.x : smem + L.e;
  for (int c = 0; c < C; ++c) stage(dst + c * BI, xi + static_cast<int64_t>(c) * P, band_in);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  float* e = smem + L.e;
  // 2. Expand: a thread 4 channels of one pixel of the band.
  if (d.expand) {
    const float* xs = smem + L.x;
    const float* wexp = smem + L.wexp;
    const int chunks = (HD + 3) / 4;
    for (int item = tid; item < chunks * BI; item += T) {
      const int q = in_stride.div(item), p = item - q * BI, cb = 4 * q;
      if (p >= band_in) continue;
      const float* w0 = wexp + cb * C;
      float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 4
      for (int k = 0; k < C; ++k) {
        const float v = xs[k * BI + p];
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[j] = fmaf(w0[j * C + k], v, acc[j]);
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if (cb + j < HD) {
          e[(cb + j) * BI + p] = param_activate(acc[j] + smem[L.bexp + cb + j], d.exp_epilogue.param_act,
                                                     d.exp_epilogue.alpha, d.exp_epilogue.beta);
        }
      }
    }
    __syncthreads();
  }

  // 3. Depthwise: a thread an output of the band.
  float* dmap = smem + L.dmap;
  const float* wdw = smem + L.wdw;
  for (int item = tid; item < HD * BO; item += T) {
    const int c = out_stride.div(item), q = item - c * BO;
    if (q >= band_out) continue;
    const int ly = out_w.div(q), ox = q - ly * g.OW;
    const int iy0 = (oy0 + ly) * g.stride_h - g.pad_top, ix0 = ox * g.stride_w - g.pad_left;
    const float acc = depthwise_window(e + c * BI, iy_lo, wdw + c * KK, iy0, ix0, g);
    dmap[item] = param_activate(acc + smem[L.bdw + c], d.dw_epilogue.param_act, d.dw_epilogue.alpha,
                                d.dw_epilogue.beta);
  }
  __syncthreads();

  // 4. The gate: each rank's sums of each channel over its band into every rank, then the means in rank order.
  if (S > 0) {
    float* msum = smem + L.msum;
    float* z = smem + L.z;
    float* gate = smem + L.gate;
    for (int c = warp; c < HD; c += kWarps) {
      float sum = 0.0f;
      for (int q = lane; q < band_out; q += 32) sum += dmap[c * BO + q];
      sum = warp_allreduce(sum, [](float u, float v) { return u + v; });
      if (lane < ranks) store_in_rank(msum, rank * HD + c, sum, lane, ranks);
    }
    rank_barrier(ranks);
    const float inv = 1.0f / static_cast<float>(OP);
    float* mean = gate;  // the means, then (after the squeeze layer) the gate in their place
    for (int c = tid; c < HD; c += T) {
      float sum = 0.0f;
      for (int r = 0; r < ranks; ++r) sum += msum[r * HD + c];
      mean[c] = sum * inv;
    }
    __syncthreads();
    for (int j = tid; j < S; j += T) {
      const float* w1 = smem + L.w1 + j * HD;
      float acc = 0.0f;
      for (int c = 0; c < HD; ++c) acc = fmaf(w1[c], mean[c], acc);
      z[j] = param_activate(acc + smem[L.b1 + j], d.se_act, d.se_alpha, d.se_beta);
    }
    __syncthreads();
    for (int c = tid; c < HD; c += T) {
      const float* w2 = smem + L.w2 + c * S;
      float acc = 0.0f;
      for (int j = 0; j < S; ++j) acc = fmaf(w2[j], z[j], acc);
      gate[c] = param_activate(acc + smem[L.b2 + c], d.se_gate, d.gate_alpha, d.gate_beta);
    }
    __syncthreads();
    for (int item = tid; item < HD * BO; item += T) dmap[item] *= gate[out_stride.div(item)];
    __syncthreads();
  }

  // 5. Project: a thread an output of the band, the epilogue, stored to NCHW.
  const float* wpj = smem + L.wpj;
  const int64_t image = static_cast<int64_t>(n) * F * OP + oy0 * g.OW;
  const Epilogue& ep = d.pj_epilogue;
  for (int item = tid; item < F * BO; item += T) {
    const int f = out_stride.div(item), q = item - f * BO;
    if (q >= band_out) continue;
    const float* wf = wpj + f * HD;
    float acc = 0.0f;
#pragma unroll 4
    for (int c = 0; c < HD; ++c) acc = fmaf(wf[c], dmap[c * BO + q], acc);
    const int64_t at = image + static_cast<int64_t>(f) * OP + q;
    float v = acc + bias_at(ep.bias, f);
    if (residual) v += residual[at];
    y[at] = param_activate(v, ep.param_act, ep.alpha, ep.beta);
  }
}

}  // namespace

bool mbconv_supports(const MbconvDesc& d, std::string* why) {
  auto no = [why](std::string reason) {
    if (why) *why = std::move(reason);
    return false;
  };
  const ConvGeometry& g = d.dw;
  if (g.groups != d.hidden || g.C != d.hidden || g.F != d.hidden) return no("the middle layer is not depthwise");
  if (g.H != d.H || g.W != d.W) return no("the depthwise layer's input is not the block's map");
  if (!d.expand && d.C != d.hidden) return no("no expand layer, but the channels change");
  if (d.dw_epilogue.pool.kind != FusedPool::None || d.exp_epilogue.pool.kind != FusedPool::None ||
      d.pj_epilogue.pool.kind != FusedPool::None) {
    return no("a fused pool");
  }
  if (int64_t(d.C) * d.H * d.W >= (int64_t(1) << 30) || int64_t(d.F) * g.OH * g.OW >= (int64_t(1) << 30)) {
    return no("maps beyond 32-bit offsets");
  }
  return true;
}

namespace {

// The shared memory (bytes) of `v` running `d` (one block: no stage table).
int64_t single_bytes(const MbconvDesc& d, int ranks, bool stage_x) {
  const MbconvSizes own = mbconv_sizes(d, ranks, stage_x);
  return int64_t(mbconv_place(d, ranks, own, own).floats) * 4;
}

MbconvSizes chain_sizes(const std::vector<MbconvDesc>& blocks, int ranks, bool stage_x) {
  MbconvSizes cap;
  for (const MbconvDesc& d : blocks) cap = max_sizes(cap, mbconv_sizes(d, ranks, stage_x));
  return cap;
}

int64_t chain_table_floats(size_t n) { return (int64_t(n) * int64_t(sizeof(MbconvStage) / 4) + 3) / 4 * 4; }

int64_t chain_bytes(const std::vector<MbconvDesc>& blocks, int ranks, bool stage_x) {
  const MbconvSizes cap = chain_sizes(blocks, ranks, stage_x);
  return (chain_table_floats(blocks.size()) + mbconv_place(blocks[0], ranks, cap, cap).floats) * 4;
}

}  // namespace

std::vector<MbconvVariant> mbconv_variants(const MbconvDesc& d, int smem_optin_bytes, int arch) {
  std::vector<MbconvVariant> out;
  if (!mbconv_supports(d) || d.batch > kMbconvMaxBatch) return out;
  auto fits = [&](int ranks, bool stage_x) { return single_bytes(d, ranks, stage_x) <= smem_optin_bytes; };
  auto offer = [&](int ranks, std::string name) {
    if (fits(ranks, true)) {
      out.push_back({std::move(name), ranks, true});
    } else if (d.expand && fits(ranks, false)) {
      out.push_back({std::move(name), ranks, false});
    }
  };
  if (arch >= 90) {
    for (int ranks : kClusterRanks) {
      if (ranks <= d.hidden) offer(ranks, fmt::format("mbconv_cl{}", ranks));
    }
  }
  offer(1, "mbconv");
  if (arch >= 90) {
    for (int ranks : kClusterRanks) {
      if (ranks <= d.dw.OH && int64_t(mbconv_px_layout(d, ranks).floats) * 4 <= smem_optin_bytes) {
        out.push_back({fmt::format("mbconv_px_cl{}", ranks), ranks, true, true});
      }
    }
  }
  for (MbconvVariant& v : mbconv_split_variants(d, smem_optin_bytes)) out.push_back(std::move(v));
  for (MbconvVariant& v : mbconv_tile_variants(d, smem_optin_bytes)) out.push_back(std::move(v));
  return out;
}

std::vector<std::string> mbconv_variant_names() {
  std::vector<std::string> names = {"mbconv"};
  for (int ranks : kClusterRanks) names.push_back(fmt::format("mbconv_cl{}", ranks));
  for (int ranks : kClusterRanks) names.push_back(fmt::format("mbconv_px_cl{}", ranks));
  for (std::string& name : mbconv_split_variant_names()) names.push_back(std::move(name));
  for (std::string& name : mbconv_tile_variant_names()) names.push_back(std::move(name));
  return names;
}

void launch_mbconv(const MbconvVariant& v, const float* x, const float* residual, float* y, const MbconvDesc& d,
                   int smem_optin_bytes, cudaStream_t stream, float* workspace) {
  if (v.split_channels > 0) {
    launch_mbconv_split(v, x, residual, y, d, workspace, smem_optin_bytes, stream);
    return;
  }
  if (v.tile_h > 0) {
    launch_mbconv_tile(v, x, residual, y, d, smem_optin_bytes, stream);
    return;
  }
  if (v.pixel_split) {
    const MbconvPxLayout L = mbconv_px_layout(d, v.ranks);
    const int bytes = L.floats * static_cast<int>(sizeof(float));
    if (bytes > 48 * 1024) allow_dynamic_smem<mbconv_px_kernel>(smem_optin_bytes);
    if (v.ranks > 8) allow_large_clusters<mbconv_px_kernel>();
    launch_overlapped(mbconv_px_kernel, dim3(static_cast<unsigned>(d.batch), 1, static_cast<unsigned>(v.ranks)),
                      dim3(kMbconvThreads), static_cast<size_t>(bytes), stream, static_cast<unsigned>(v.ranks), x,
                      d.residual ? residual : nullptr, y, d, FastDiv(L.rows_in * d.W), FastDiv(L.band * d.dw.OW),
                      FastDiv(d.dw.OW));
    return;
  }
  const int bytes = static_cast<int>(single_bytes(d, v.ranks, v.stage_x));
  if (bytes > 48 * 1024) allow_dynamic_smem<mbconv_kernel>(smem_optin_bytes);
  if (v.ranks > 8) allow_large_clusters<mbconv_kernel>();
  const MbconvSizes own = mbconv_sizes(d, v.ranks, v.stage_x);
  const MbconvStage st = make_stage(d, v.ranks, v.stage_x, own);
  launch_overlapped(mbconv_kernel, dim3(static_cast<unsigned>(d.batch), 1, static_cast<unsigned>(v.ranks)),
                    dim3(kMbconvThreads), static_cast<size_t>(bytes), stream, static_cast<unsigned>(v.ranks), x,
                    d.residual ? residual : nullptr, y, st);
}

std::vector<MbconvVariant> mbconv_chain_variants(const std::vector<MbconvDesc>& blocks, int smem_optin_bytes, int arch) {
  std::vector<MbconvVariant> out;
  if (blocks.size() < 2 || blocks.size() > size_t(kMbconvChainMax)) return out;
  for (const MbconvDesc& d : blocks) {
    if (!mbconv_supports(d) || d.batch > kMbconvMaxBatch || d.batch != blocks[0].batch) return out;
  }
  auto offer = [&](int ranks, std::string name) {
    for (const MbconvDesc& d : blocks) {
      if (ranks > d.hidden) return;
    }
    if (chain_bytes(blocks, ranks, true) <= smem_optin_bytes) {
      out.push_back({std::move(name), ranks, true});
    } else if (chain_bytes(blocks, ranks, false) <= smem_optin_bytes) {
      out.push_back({std::move(name), ranks, false});
    }
  };
  if (arch >= 90) {
    for (int ranks : {16, 8}) offer(ranks, fmt::format("mbchain_cl{}", ranks));
  }
  return out;
}

std::vector<std::string> mbconv_chain_variant_names() { return {"mbchain_cl16", "mbchain_cl8"}; }

std::vector<unsigned char> mbconv_chain_table(const MbconvVariant& v, const std::vector<MbconvDesc>& blocks) {
  const MbconvSizes cap = chain_sizes(blocks, v.ranks, v.stage_x);
  std::vector<MbconvStage> stages;
  for (const MbconvDesc& d : blocks) stages.push_back(make_stage(d, v.ranks, v.stage_x, cap));
  const auto* bytes = reinterpret_cast<const unsigned char*>(stages.data());
  return std::vector<unsigned char>(bytes, bytes + stages.size() * sizeof(MbconvStage));
}

void launch_mbconv_chain(const MbconvVariant& v, const std::vector<MbconvDesc>& blocks, const void* table,
                         const MbconvChainTensors& t, int smem_optin_bytes, cudaStream_t stream) {
  const int bytes = static_cast<int>(chain_bytes(blocks, v.ranks, v.stage_x));
  if (bytes > 48 * 1024) allow_dynamic_smem<mbconv_chain_kernel>(smem_optin_bytes);
  if (v.ranks > 8) allow_large_clusters<mbconv_chain_kernel>();
  launch_overlapped(mbconv_chain_kernel, dim3(static_cast<unsigned>(blocks[0].batch), 1, static_cast<unsigned>(v.ranks)),
                    dim3(kMbconvThreads), static_cast<size_t>(bytes), stream, static_cast<unsigned>(v.ranks),
                    static_cast<const MbconvStage*>(table), static_cast<int>(blocks.size()), t);
}

}  // namespace cnnrt::kernels
