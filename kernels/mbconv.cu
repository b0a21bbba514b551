// An inverted residual block in one launch (see mbconv.cuh).
#include "kernels/mbconv.cuh"

#include <cooperative_groups.h>
#include <fmt/format.h>

#include "kernels/conv_chain_device.cuh"
#include "kernels/conv_device.cuh"
#include "kernels/cp_async.cuh"
#include "kernels/fast_div.cuh"
#include "kernels/launch.cuh"
#include "kernels/row_reduce.cuh"

namespace cnnrt::kernels {

namespace {

namespace cg = cooperative_groups;

constexpr int kClusterRanks[] = {16, 8, 4, 2};

__host__ __device__ inline int round4(int n) { return (n + 3) / 4 * 4; }

// A block's shared memory, in floats (each array 16-byte aligned): its share of the weights, the gate's vectors
// (`zall`: every rank's share of the squeeze sums), its channels' expanded map `e` and depthwise map `dmap`, the
// image's input `x` (where the block expands and it fits; else the expand reads it from global memory), and `red`: every rank's partial sums of the outputs this rank adds up.
// Other ranks store into zall and red while this one may still be computing, so nothing else lives there.
struct MbconvLayout {
  int share = 0;  // hidden channels a rank
  int wexp = 0, bexp = 0, wdw = 0, bdw = 0, wpj = 0;
  int w1 = 0, b1 = 0, w2 = 0, b2 = 0, mean = 0, zall = 0, z = 0, gate = 0;
  int e = 0, dmap = 0, x = 0, red = 0, floats = 0;
  int per = 0;  // outputs a rank sums: red holds every rank's partial sums of them
};

__host__ __device__ inline MbconvLayout mbconv_layout(const MbconvDesc& d, int ranks, bool stage_x) {
  MbconvLayout L;
  const int hc = (d.hidden + ranks - 1) / ranks, hc4 = round4(hc), S = d.squeeze;
  const int P = d.H * d.W, OP = d.dw.OH * d.dw.OW, KK = d.dw.KH * d.dw.KW;
  L.share = hc;
  int at = 0;
  auto take = [&at](int floats) {
    const int here = at;
    at += round4(floats);
    return here;
  };
  L.wexp = take(d.expand ? hc4 * d.C : 0);  // 4 rows a thread: rows up to a multiple of 4
  L.bexp = take(d.expand ? hc4 : 0);
  L.wdw = take(hc * KK);
  L.bdw = take(hc);
  L.wpj = take(d.F * hc);
  L.w1 = take(S * hc);
  L.b1 = take(S);
  L.w2 = take(hc * S);
  L.b2 = take(S > 0 ? hc : 0);
  L.mean = take(S > 0 ? hc : 0);
  L.zall = take(ranks * S);
  L.z = take(S);
  L.gate = take(S > 0 ? hc : 0);
  L.e = take(hc * P);
  L.dmap = take(hc * OP);
  L.x = take(d.expand && stage_x ? d.C * P : 0);
  L.per = (d.F * OP + ranks - 1) / ranks;
  L.red = take(ranks * L.per);
  L.floats = at;
  return L;
}

// A barrier over the cluster (ranks > 1: release and acquire, so that each rank's shared memory writes are visible
// to the others), else over the block.
__device__ __forceinline__ void rank_barrier(int ranks) {
#if !CNNRT_ARCH_BELOW(900)
  if (ranks > 1) {
    cg::this_cluster().sync();
    return;
  }
#endif
  __syncthreads();
}

// Stores v at offset i of `array` (shared memory) in rank r of the cluster (ranks > 1), else in this block's.
__device__ __forceinline__ void store_in_rank(float* array, int i, float v, int r, int ranks) {
#if !CNNRT_ARCH_BELOW(900)
  if (ranks > 1) {
    cg::this_cluster().map_shared_rank(array, r)[i] = v;
    return;
  }
#endif
  array[i] = v;
}

// Copies n floats from global src to shared dst (16-byte copies where both allow).
__device__ __forceinline__ void stage(float* dst, const float* src, int n, int tid) {
  constexpr int T = kMbconvThreads;
  if (n % 4 == 0 && reinterpret_cast<uintptr_t>(src) % 16 == 0) {
    for (int i = tid; i < n / 4; i += T) cp_async_16(dst + 4 * i, src + 4 * i, true);
  } else {
    for (int i = tid; i < n; i += T) cp_async_4(dst + i, src + i, true);
  }
}

__device__ __forceinline__ float bias_at(const float* bias, int i) { return bias ? __ldg(bias + i) : 0.0f; }

__global__ void __launch_bounds__(kMbconvThreads)
    mbconv_kernel(const float* __restrict__ x, const float* __restrict__ residual, float* __restrict__ y,
                  const __grid_constant__ MbconvDesc d, bool stage_x, FastDiv in_px, FastDiv out_px, FastDiv out_w,
                  FastDiv per_rank) {
  extern __shared__ __align__(16) float smem[];
  constexpr int T = kMbconvThreads, kWarps = T / 32;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int ranks = static_cast<int>(gridDim.z), rank = static_cast<int>(blockIdx.z);  // the cluster spans z
  const int n = static_cast<int>(blockIdx.x);
  const MbconvLayout L = mbconv_layout(d, ranks, stage_x);
  const int C = d.C, HD = d.hidden, S = d.squeeze, F = d.F;
  const int P = d.H * d.W, OP = d.dw.OH * d.dw.OW, KH = d.dw.KH, KW = d.dw.KW, KK = KH * KW;
  const int hc = L.share, c0 = min(HD, rank * hc), my = min(HD, c0 + hc) - c0;
  float* wexp = smem + L.wexp;
  float* bexp = smem + L.bexp;
  float* wdw = smem + L.wdw;
  float* bdw = smem + L.bdw;
  float* wpj = smem + L.wpj;
  float* e = smem + L.e;
  float* dmap = smem + L.dmap;
  const float* xs = smem + L.x;
  float* red = smem + L.red;

  // 0. The rank's weights (constants: before the prior grid's end).
  if (d.expand) {
    stage(wexp, d.w_exp + static_cast<int64_t>(c0) * C, my * C, tid);
    for (int i = tid; i < my; i += T) bexp[i] = bias_at(d.exp_epilogue.bias, c0 + i);
  }
  stage(wdw, d.w_dw + static_cast<int64_t>(c0) * KK, my * KK, tid);
  for (int i = tid; i < my; i += T) bdw[i] = bias_at(d.dw_epilogue.bias, c0 + i);
  for (int i = tid; i < F * my; i += T) {  // [F][hidden] -> [F][my]
    const int f = i / my, c = i - f * my;
    cp_async_4(wpj + f * hc + c, d.w_pj + static_cast<int64_t>(f) * HD + c0 + c, true);
  }
  if (S > 0) {
    for (int i = tid; i < S * my; i += T) {  // [S][hidden] -> [S][my]
      const int s = i / my, c = i - s * my;
      cp_async_4(smem + L.w1 + s * hc + c, d.w_se1 + static_cast<int64_t>(s) * HD + c0 + c, true);
    }
    stage(smem + L.w2, d.w_se2 + static_cast<int64_t>(c0) * S, my * S, tid);  // rows [c0, c0 + my) of [hidden][S]
    for (int i = tid; i < S; i += T) smem[L.b1 + i] = bias_at(d.b_se1, i);
    for (int i = tid; i < my; i += T) smem[L.b2 + i] = bias_at(d.b_se2, c0 + i);
  }
  cp_async_commit();
  if (ranks > 1) {
    chain_detail::wait_for_prior_grid_in_cluster(ranks);  // every rank has started before any rank reads another
  } else {
    wait_for_prior_grid();
  }

  // 1. The input: every channel where the block expands, else this rank's.
  const float* xi = x + static_cast<int64_t>(n) * C * P;
  if (d.expand) {
    if (stage_x) {
      stage(smem + L.x, xi, C * P, tid);
    } else {
      xs = xi;
    }
  } else {
    stage(e, xi + static_cast<int64_t>(c0) * P, my * P, tid);
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
          e[(cb + j) * P + p] = param_activate(acc[j] + bexp[cb + j], d.exp_epilogue.param_act,
                                               d.exp_epilogue.alpha, d.exp_epilogue.beta);
        }
      }
    }
    __syncthreads();
  }

  // 3. Depthwise: a thread an output.
  const ConvGeometry& g = d.dw;
  for (int item = tid; item < my * OP; item += T) {
    const int c = out_px.div(item), q = item - c * OP, oy = out_w.div(q), ox = q - oy * g.OW;
    const int iy0 = oy * g.stride_h - g.pad_top, ix0 = ox * g.stride_w - g.pad_left;
    const float* ec = e + c * P;
    const float* wc = wdw + c * KK;
    float acc = 0.0f;
    for (int ky = 0; ky < KH; ++ky) {
      const int iy = iy0 + ky * g.dil_h;
      if (iy < 0 || iy >= g.H) continue;
      for (int kx = 0; kx < KW; ++kx) {
        const int ix = ix0 + kx * g.dil_w;
        if (ix >= 0 && ix < g.W) acc = fmaf(wc[ky * KW + kx], ec[iy * g.W + ix], acc);
      }
    }
    dmap[item] = param_activate(acc + bdw[c], d.dw_epilogue.param_act, d.dw_epilogue.alpha, d.dw_epilogue.beta);
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
  rank_barrier(ranks);  // after it, no rank touches another's shared memory
  const int total = F * OP, i0 = min(total, rank * per), i1 = min(total, i0 + per);
  const int64_t image = static_cast<int64_t>(n) * total;
  const Epilogue& ep = d.pj_epilogue;
  for (int i = i0 + tid; i < i1; i += T) {
    float s = 0.0f;
    for (int r = 0; r < ranks; ++r) s += red[r * per + (i - i0)];
    float v = s + bias_at(ep.bias, out_px.div(i));
    if (residual) v += residual[image + i];
    y[image + i] = param_activate(v, ep.param_act, ep.alpha, ep.beta);
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

std::vector<MbconvVariant> mbconv_variants(const MbconvDesc& d, int smem_optin_bytes, int arch) {
  std::vector<MbconvVariant> out;
  if (!mbconv_supports(d) || d.batch > kMbconvMaxBatch) return out;
  auto fits = [&](int ranks, bool stage_x) {
    return int64_t(mbconv_layout(d, ranks, stage_x).floats) * 4 <= smem_optin_bytes;
  };
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
  return out;
}

std::vector<std::string> mbconv_variant_names() {
  std::vector<std::string> names = {"mbconv"};
  for (int ranks : kClusterRanks) names.push_back(fmt::format("mbconv_cl{}", ranks));
  return names;
}

void launch_mbconv(const MbconvVariant& v, const float* x, const float* residual, float* y, const MbconvDesc& d,
                   int smem_optin_bytes, cudaStream_t stream) {
  const MbconvLayout L = mbconv_layout(d, v.ranks, v.stage_x);
  const int bytes = L.floats * static_cast<int>(sizeof(float));
  if (bytes > 48 * 1024) allow_dynamic_smem<mbconv_kernel>(smem_optin_bytes);
  if (v.ranks > 8) allow_large_clusters<mbconv_kernel>();
  const int out_px = d.dw.OH * d.dw.OW;
  launch_overlapped(mbconv_kernel, dim3(static_cast<unsigned>(d.batch), 1, static_cast<unsigned>(v.ranks)),
                    dim3(kMbconvThreads), static_cast<size_t>(bytes), stream, static_cast<unsigned>(v.ranks), x,
                    d.residual ? residual : nullptr, y, d, v.stage_x, FastDiv(d.H * d.W), FastDiv(out_px),
                    FastDiv(d.dw.OW), FastDiv(L.per));
}

}  // namespace cnnrt::kernels
