// The squeeze-and-excitation gate in one launch (see squeeze_excite.cuh).
#include "kernels/squeeze_excite.cuh"

#include <fmt/format.h>

#include "kernels/cluster_ranks.cuh"
#include "kernels/conv_chain_device.cuh"
#include "kernels/conv_device.cuh"
#include "kernels/cp_async.cuh"
#include "kernels/fast_div.cuh"
#include "kernels/launch.cuh"

namespace cnnrt::kernels {

namespace {

constexpr int kMaxSmemBytes = 48 * 1024;  // the default limit: no opt-in needed
constexpr int kClusterRanks[] = {2, 4, 8, 16};
constexpr int kClusterUpToBatch = 16;  // clusters are offered up to here (one an image)

// Shared memory of a block, in floats: the image's means, hidden layer and gate, a warp's partial sum of a map
// each; then, where they fit, the block's rows of both layers' weights (the first layer's rows of its share of the
// hidden outputs, the second's of its share of the channels), staged before the prior grid ends.
struct SmemLayout {
  int pooled = 0, hidden = 0, gate = 0, part = 0, w1 = 0, w2 = 0, floats = 0;
  bool staged = false;
};

__host__ __device__ inline SmemLayout smem_layout(const SqueezeExciteDesc& d, int ranks) {
  SmemLayout L;
  const int c_share = (d.channels + ranks - 1) / ranks, h_share = (d.hidden + ranks - 1) / ranks;
  L.hidden = d.channels;
  L.gate = L.hidden + d.hidden;
  L.part = L.gate + d.channels;
  L.w1 = L.part + kSqueezeExciteThreads / 32;
  L.w2 = L.w1 + h_share * d.channels;
  const int with_weights = L.w2 + c_share * d.hidden;
  L.staged = int64_t(with_weights) * 4 <= kMaxSmemBytes;
  L.floats = L.staged ? with_weights : L.w1;
  return L;
}

__device__ __forceinline__ float warp_sum(float s) {
#pragma unroll
  for (int off = 16; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
  return s;
}

// The dot product of w and v over n values, each lane of the warp taking every 32nd (every lane gets it).
__device__ __forceinline__ float warp_dot(const float* w, const float* v, int n, int lane) {
  float acc = 0.0f;
  for (int k = lane; k < n; k += 32) acc = fmaf(w[k], v[k], acc);
  return warp_sum(acc);
}

// Stores v at offset i of `array` in every rank of the cluster (ranks > 1), else in this block's.
__device__ __forceinline__ void store_everywhere(float* array, int i, float v, int ranks) {
  for (int r = 0; r < ranks; ++r) store_in_rank(array, i, v, r, ranks);
}

// The sum of the S values at p: a thread's own loop (S <= 32), float4 reads where p is 16-byte aligned.
__device__ __forceinline__ float thread_sum(const float* p, int S) {
  float s = 0.0f;
  if (S % 4 == 0) {
    const float4* p4 = reinterpret_cast<const float4*>(p);
#pragma unroll 4
    for (int k = 0; k < S / 4; ++k) {
      const float4 v = p4[k];
      s += (v.x + v.y) + (v.z + v.w);
    }
  } else {
#pragma unroll 4
    for (int k = 0; k < S; ++k) s += p[k];
  }
  return s;
}

// The sum of segment `seg` of `segs` of the S values at p (float4s where S allows) over the lanes of a warp
// (every lane gets it).
__device__ __forceinline__ float warp_map_sum(const float* p, int S, int seg, int segs, int lane) {
  float s = 0.0f;
  if (S % 4 == 0) {
    const int len = (S / 4 + segs - 1) / segs, end = min(S / 4, (seg + 1) * len);
    const float4* p4 = reinterpret_cast<const float4*>(p);
#pragma unroll 4
    for (int k = seg * len + lane; k < end; k += 32) {
      const float4 v = p4[k];
      s += (v.x + v.y) + (v.z + v.w);
    }
  } else {
    const int len = (S + segs - 1) / segs, end = min(S, (seg + 1) * len);
#pragma unroll 4
    for (int k = seg * len + lane; k < end; k += 32) s += p[k];
  }
  return warp_sum(s);
}

__global__ void __launch_bounds__(kSqueezeExciteThreads)
    squeeze_excite_kernel(const float* __restrict__ x, float* __restrict__ y, const __grid_constant__ SqueezeExciteDesc d,
                          FastDiv spatial) {
  extern __shared__ __align__(16) float smem[];
  constexpr int T = kSqueezeExciteThreads, kWarps = T / 32;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int ranks = static_cast<int>(gridDim.z), rank = static_cast<int>(blockIdx.z);  // the cluster spans z
  const int C = d.channels, H = d.hidden, S = d.spatial;
  const SmemLayout L = smem_layout(d, ranks);
  float* pooled = smem + L.pooled;
  float* hidden = smem + L.hidden;
  float* gate = smem + L.gate;
  // This block's share: every channel and hidden output with one rank.
  const int c_share = (C + ranks - 1) / ranks, h_share = (H + ranks - 1) / ranks;
  const int c0 = min(C, rank * c_share), c1 = min(C, c0 + c_share);
  const int h0 = min(H, rank * h_share), h1 = min(H, h0 + h_share);
  const int64_t image = static_cast<int64_t>(blockIdx.x) * C * S;
  const float* xi = x + image;
  float* yi = y + image;

  // 0. The block's weight rows (constants: before the prior grid's end), where they fit; else read in place.
  const float* w1 = d.w1 + static_cast<int64_t>(h0) * C;  // rows [h0, h1) of [H][C]
  const float* w2 = d.w2 + static_cast<int64_t>(c0) * H;  // rows [c0, c1) of [C][H]
  if (L.staged) {
    for (int i = tid; i < (h1 - h0) * C; i += T) cp_async_4(smem + L.w1 + i, w1 + i, true);
    for (int i = tid; i < (c1 - c0) * H; i += T) cp_async_4(smem + L.w2 + i, w2 + i, true);
    cp_async_commit();
    w1 = smem + L.w1;
    w2 = smem + L.w2;
  }
  chain_detail::wait_for_prior_grid_in_cluster(ranks);  // every rank has started before any rank stores into it

  // 1. The means of this block's channels, into every rank.
  const float inv = 1.0f / static_cast<float>(S);
  if (S <= 32) {
    for (int c = c0 + tid; c < c1; c += T) {
      store_everywhere(pooled, c, thread_sum(xi + static_cast<int64_t>(c) * S, S) * inv, ranks);
    }
  } else {
    // A warp a channel; with fewer channels than warps (a cluster's ranks at batch 1), a channel's map in `segs`
    // segments, a warp each, the segments' sums added in order.
    const int my_c = c1 - c0, segs = my_c > 0 ? max(1, kWarps / my_c) : 1;
    float* part = smem + L.part;
    for (int item = warp; item < my_c * segs; item += kWarps) {
      const int c = c0 + item / segs;
      const float s = warp_map_sum(xi + static_cast<int64_t>(c) * S, S, item % segs, segs, lane);
      if (lane == 0) {
        if (segs == 1) {
          store_everywhere(pooled, c, s * inv, ranks);
        } else {
          part[item] = s;
        }
      }
    }
    if (segs > 1) {
      __syncthreads();
      if (tid < my_c) {
        float s = 0.0f;
        for (int q = 0; q < segs; ++q) s += part[tid * segs + q];
        store_everywhere(pooled, c0 + tid, s * inv, ranks);
      }
    }
  }
  cp_async_wait<0>();
  rank_barrier(ranks);  // the means (and this block's staged weights) are in place

  // 2. This block's share of the hidden layer, a warp an output (lanes over the channels), into every rank.
  for (int j = h0 + warp; j < h1; j += kWarps) {
    const float acc = warp_dot(w1 + static_cast<int64_t>(j - h0) * C, pooled, C, lane);
    if (lane == 0) {
      const float b = d.b1 ? __ldg(d.b1 + j) : 0.0f;
      store_everywhere(hidden, j, param_activate(acc + b, d.act, d.act_alpha, d.act_beta), ranks);
    }
  }
  rank_barrier(ranks);  // after it, no rank touches another's shared memory

  // 3. The gate of this block's channels, a warp a channel (lanes over the hidden outputs).
  for (int c = c0 + warp; c < c1; c += kWarps) {
    const float acc = warp_dot(w2 + static_cast<int64_t>(c - c0) * H, hidden, H, lane);
    if (lane == 0) {
      const float b = d.b2 ? __ldg(d.b2 + c) : 0.0f;
      gate[c] = param_activate(acc + b, d.gate, d.gate_alpha, d.gate_beta);
    }
  }
  __syncthreads();

  // 4. y = x * gate over this block's maps, [c0 * S, c1 * S) of the image, four loads in flight a thread.
  const int begin = c0 * S, end = c1 * S;
  if (S % 4 == 0) {
    const float4* x4 = reinterpret_cast<const float4*>(xi);
    float4* y4 = reinterpret_cast<float4*>(yi);
    for (int i = begin / 4 + tid; i < end / 4; i += 4 * T) {
      float4 v[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        if (i + u * T < end / 4) v[u] = x4[i + u * T];
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int k = i + u * T;
        if (k >= end / 4) break;
        const float g = gate[spatial.div(4 * k)];
        y4[k] = make_float4(v[u].x * g, v[u].y * g, v[u].z * g, v[u].w * g);
      }
    }
  } else {
    for (int i = begin + tid; i < end; i += 4 * T) {
      float v[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        if (i + u * T < end) v[u] = xi[i + u * T];
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int k = i + u * T;
        if (k >= end) break;
        yi[k] = v[u] * gate[spatial.div(k)];
      }
    }
  }
}

}  // namespace

std::vector<SqueezeExciteVariant> squeeze_excite_variants(const SqueezeExciteDesc& d, int arch) {
  std::vector<SqueezeExciteVariant> out;
  if (int64_t(d.channels) * d.spatial >= (int64_t(1) << 31)) return out;  // 32-bit offsets within an image
  if (int64_t(smem_layout(d, 1).floats) * 4 <= kMaxSmemBytes) out.push_back({"squeeze_excite", 1});
  if (arch >= 90 && d.batch <= kClusterUpToBatch) {
    for (int ranks : kClusterRanks) {
      if (ranks > d.channels || int64_t(smem_layout(d, ranks).floats) * 4 > kMaxSmemBytes) break;
      out.push_back({fmt::format("squeeze_excite_cl{}", ranks), ranks});
    }
  }
  return out;
}

std::vector<std::string> squeeze_excite_variant_names() {
  std::vector<std::string> names = {"squeeze_excite"};
  for (int ranks : kClusterRanks) names.push_back(fmt::format("squeeze_excite_cl{}", ranks));
  return names;
}

void launch_squeeze_excite(const SqueezeExciteVariant& v, const float* x, float* y, const SqueezeExciteDesc& d,
                           cudaStream_t stream) {
  if (v.ranks > 8) allow_large_clusters<squeeze_excite_kernel>();
  launch_overlapped(squeeze_excite_kernel, dim3(static_cast<unsigned>(d.batch), 1, static_cast<unsigned>(v.ranks)),
                    dim3(kSqueezeExciteThreads), static_cast<size_t>(smem_layout(d, v.ranks).floats) * sizeof(float),
                    stream, static_cast<unsigned>(v.ranks), x, y, d, FastDiv(d.spatial));
}

}  // namespace cnnrt::kernels
