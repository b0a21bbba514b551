// The sequence kernel (seqnet.cuh): one cluster an image runs a chain of layers, its activations in shared memory.
#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "kernels/conv_chain_device.cuh"
#include "kernels/conv_device.cuh"
#include "kernels/cp_async.cuh"
#include "kernels/launch.cuh"
#include "kernels/row_reduce.cuh"
#include "kernels/smem_optin.cuh"
#include "kernels/seqnet.cuh"

namespace cnnrt::kernels {

namespace {

constexpr int kSeqWarps = kSeqThreads / 32;
constexpr int kSeqBarrierFloats = 2 * kSeqMaxLayers;  // the layers' mbarriers (8 bytes each)

// The floats of a staged tap-major weight row of `cb` filters (16-byte aligned rows, for the vector reads).
__host__ __device__ inline int seq_weight_row(int cb) { return (cb + 3) / 4 * 4; }

struct SeqParams {
  const SeqLayer* layers;
  int n_layers;
  int ranks;
  int table_floats, buffer_floats, aux_floats, partial_floats, weight_floats;
  int staged_floats;  // a rank's packed block: its weights (weight_floats), then the tap offsets
  // Layer 0's input as it lies in shared memory (its table entry's, for the staging before the table is there).
  int in_c, in_h, in_w, in_cs, in_rs, in_pt, in_pl;
  FastDiv in_cs_d, in_rs_d;
  int in_image, out_image;
  const float* packed;
  const float* x;
  float* y;
  unsigned long long* trace;  // null, or the phases' times of block 0 (seqnet_lab): 4 + 3 a layer
};

// The lab's trace (seqnet_lab): block 0's first thread records the global timer at point `at`.
__device__ __forceinline__ void trace_point(unsigned long long* trace, int at) {
  if (trace && blockIdx.y == 0 && blockIdx.z == 0 && threadIdx.x == 0) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    trace[at] = t;
  }
}

// The activation, inline: every function here is inlined into the kernel, so that its pointers stay shared-memory
// ones (no generic accesses) and no call saves registers to the stack.
__device__ __forceinline__ float seq_act(float v, const SeqLayer& l) {
  return l.act == ParamAct::None ? v : param_activate(v, l.act, l.alpha, l.beta);
}

// Where layer `l`'s outputs go: the last layer's into this image's dense output in global memory; the others' into
// this rank's next buffer, whose share of channels (values and zero halo) then goes to every other rank (share()).
struct Sink {
  const SeqLayer& l;
  float* next;  // this block's next buffer (the same offset in every rank)
  float* y;     // non-null: the last layer's output image
  __device__ __forceinline__ void put(int c, int oy, int ox, float v) const {
    if (y) {
      y[(c * l.OH + oy) * l.OW + ox] = v;
      return;
    }
    next[c * l.out_cs + oy * l.out_rs + ox + l.out_off] = v;
  }
  // The zero halo around channels [c_lo, c_hi) of the next buffer: the rows above and below the interior, and the
  // columns left and right of it in its rows.
  __device__ __forceinline__ void zero_halo(int c_lo, int c_hi) const {
    const int per_channel = l.halo_n;
    if (y || per_channel == 0) return;
    const int pt = l.out_pt, pl = l.out_pl, top = l.halo_top, sides = l.halo_sides;
    for (int i = threadIdx.x; i < (c_hi - c_lo) * per_channel; i += kSeqThreads) {
      const int cl = l.halo_d.div(i);
      int q = i - cl * per_channel, row, col;
      if (q < top) {
        row = l.halo_wp_d.div(q), col = q - row * l.out_wp;
      } else if ((q -= top) < l.OH * sides) {
        row = l.halo_sides_d.div(q), col = q - row * sides;
        row += pt;
        if (col >= pl) col += l.OW;
      } else {
        q -= l.OH * sides;
        row = l.halo_wp_d.div(q), col = q - row * l.out_wp;
        row += pt + l.OH;
      }
      next[(c_lo + cl) * l.out_cs + row * l.out_rs + col] = 0.0f;
    }
  }
  // Channels [c_lo, c_hi) of this rank's next buffer (one contiguous run: the channels' planes) into every other
  // rank's, 16 bytes a store where the run is aligned, as asynchronous stores that each rank's mbarrier `ready`
  // counts (no cluster barrier: a rank waits for its own mbarrier only); each rank starts with the rank after it.
  // After a block barrier (the block's stores complete).
#if !CNNRT_ARCH_BELOW(900)
  __device__ __forceinline__ void share(int c_lo, int c_hi, int rank, int ranks, uint64_t* ready) const {
    if (y || ranks == 1 || c_hi <= c_lo) return;
    const int a = c_lo * l.out_cs, b = c_hi * l.out_cs;
    const int a4 = (a + 3) / 4 * 4, b4 = max(a4, b / 4 * 4);
    const uint32_t local = chain_detail::shared_address(next), bar = chain_detail::shared_address(ready);
    // Each value read once, then stored into every rank back to back.
    for (int i = a4 + static_cast<int>(threadIdx.x) * 4; i < b4; i += kSeqThreads * 4) {
      const float4 v = *reinterpret_cast<const float4*>(next + i);
      for (int step = 1, r = rank + 1; step < ranks; ++step, ++r) {
        if (r == ranks) r = 0;
        store_async4(local + 4u * static_cast<uint32_t>(i), v, bar, r);
      }
    }
    // The unaligned ends, up to three floats each: threads 0-3 the first, 4-7 the last.
    const int t = static_cast<int>(threadIdx.x);
    const int e = t < 4 ? (a + t < min(a4, b) ? a + t : -1) : t < 8 && b4 + t - 4 < b && b4 + t - 4 >= a4 ? b4 + t - 4 : -1;
    if (e >= 0) {
      const float v = next[e];
      for (int step = 1, r = rank + 1; step < ranks; ++step, ++r) {
        if (r == ranks) r = 0;
        store_async1(local + 4u * static_cast<uint32_t>(e), v, bar, r);
      }
    }
  }

  // 16 bytes (4) at this block's shared address `at` into rank r's copy, counted by rank r's copy of the mbarrier
  // at this block's shared address `bar`.
  static __device__ __forceinline__ void store_async4(uint32_t at, float4 v, uint32_t bar, int r) {
    uint32_t remote, remote_bar;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(at), "r"(r));
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote_bar) : "r"(bar), "r"(r));
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];" ::"r"(
                     remote),
                 "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"(remote_bar)
                 : "memory");
  }
  static __device__ __forceinline__ void store_async1(uint32_t at, float v, uint32_t bar, int r) {
    uint32_t remote, remote_bar;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(at), "r"(r));
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote_bar) : "r"(bar), "r"(r));
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [%0], %1, [%2];" ::"r"(remote), "f"(v),
                 "r"(remote_bar)
                 : "memory");
  }
#endif
};

// FB consecutive staged weights (filters f0 .. f0 + FB - 1 of one tap), in one read where FB is 2, 4 or 8.
template <int FB>
__device__ __forceinline__ void load_weights(const float* at, float (&w)[FB]) {
  if constexpr (FB == 8) {
    const float4 a = reinterpret_cast<const float4*>(at)[0], b = reinterpret_cast<const float4*>(at)[1];
    w[0] = a.x, w[1] = a.y, w[2] = a.z, w[3] = a.w, w[4] = b.x, w[5] = b.y, w[6] = b.z, w[7] = b.w;
  } else if constexpr (FB == 4) {
    const float4 a = *reinterpret_cast<const float4*>(at);
    w[0] = a.x, w[1] = a.y, w[2] = a.z, w[3] = a.w;
  } else if constexpr (FB == 2) {
    const float2 a = *reinterpret_cast<const float2*>(at);
    w[0] = a.x, w[1] = a.y;
  } else {
    w[0] = at[0];
  }
}

// A convolution's sums for filters [f_lo, f_hi) a warp item at a time (FB filters x 32 * PB positions, and a share
// of the taps where l.ks > 1), into `partials` ([ks][filter][position]) for the epilogue's pass. The rank's
// weights are staged tap-major ([tap][filter from f_lo], rows of seq_weight_row(cb) floats) at `ws`; `taps[t]` is
// tap t's offset in the input (channel, row and column of the filter), so the sums run over one index. (The sums
// alone: every instantiation is code the layers fetch in turn, so the epilogue is one copy for all of them.)
template <int FB, int PB>
__device__ __forceinline__ void conv_direct(const SeqLayer& l, const float* in, const float* ws, const int* taps,
                                            float* partials, int f_lo, int f_hi) {
  const ConvGeometry& g = l.g;
  const int T = l.T, ks_n = l.ks, per = l.per;
  const int P = static_cast<int>(l.p_d.d), OW = g.OW, nf = f_hi - f_lo, row = seq_weight_row(l.cb);
  const int tiles = l.tiles;
  const int items = nf / FB * tiles * ks_n;
  const int lane = threadIdx.x & 31;
  const int in_rs = l.in_rs, sh = g.stride_h, sw = g.stride_w;
  const int origin = l.in_off - g.pad_top * in_rs - g.pad_left;
  const int group_floats = l.cg * l.in_cs;
  for (int it = threadIdx.x >> 5; it < items; it += kSeqWarps) {
    const int rest = l.ks_d.div(it), ks = it - rest * ks_n;
    const int fi = l.tiles_d.div(rest), tile = rest - fi * tiles;
    const int fl0 = fi * FB, f0 = f_lo + fl0;
    const float* xg = in + l.fg_d.div(f0) * group_floats + origin;
    int at[PB];
#pragma unroll
    for (int j = 0; j < PB; ++j) {
      const int p = min(tile * 32 * PB + j * 32 + lane, P - 1);
      const int oy = l.ow_d.div(p), ox = p - oy * OW;
      at[j] = oy * sh * in_rs + ox * sw;
    }
    const float* wf = ws + fl0;
    float acc[FB][PB];
#pragma unroll
    for (int a = 0; a < FB; ++a) {
#pragma unroll
      for (int j = 0; j < PB; ++j) acc[a][j] = 0.0f;
    }
    const int t_hi = min(T, (ks + 1) * per);  // (per: taps a split)
#pragma unroll 4
    for (int t = ks * per; t < t_hi; ++t) {
      const float* x = xg + taps[t];
      float w[FB];
      load_weights<FB>(wf + t * row, w);
#pragma unroll
      for (int j = 0; j < PB; ++j) {
        const float v = x[at[j]];
#pragma unroll
        for (int a = 0; a < FB; ++a) acc[a][j] = fmaf(w[a], v, acc[a][j]);
      }
    }
    float* out = partials + (ks * nf + fl0) * P + tile * 32 * PB + lane;
    const int room = P - tile * 32 * PB - lane;  // positions from this lane's first on
#pragma unroll
    for (int a = 0; a < FB; ++a) {
#pragma unroll
      for (int j = 0; j < PB; ++j) {
        if (j * 32 < room) out[a * P + j * 32] = acc[a][j];
      }
    }
  }
}

// A convolution's outputs for filters [f_lo, f_hi), `lanes` threads an output, each a share of the input channels
// (whole warps take the same iterations: the shuffles need every lane): activated, to the sink, or (pooled) into
// `partials` for the epilogue's pass.
__device__ __forceinline__ void conv_lanes(const SeqLayer& l, const float* in, const float* wbase, int f_lo,
                                           int f_hi, const Sink& sink, float* partials) {
  const ConvGeometry& g = l.g;
  const int cg = l.cg, kk = static_cast<int>(l.kk_d.d);
  const int P = static_cast<int>(l.p_d.d);
  const int lanes = l.lanes, lane = threadIdx.x & (lanes - 1);
  const int per_warp = 32 / lanes;
  const int total = (f_hi - f_lo) * P;
  const bool pooled = l.pool.kind != FusedPool::None;
  for (int base = (threadIdx.x >> 5) * per_warp; base < total; base += kSeqWarps * per_warp) {
    const int o = base + (threadIdx.x & 31) / lanes;
    const bool valid = o < total;
    const int oc = valid ? o : total - 1;
    const int fl = l.p_d.div(oc), p = oc - fl * P, f = f_lo + fl;
    const int oy = l.ow_d.div(p), ox = p - oy * g.OW;
    const float* xg = in + l.fg_d.div(f) * cg * l.in_cs + l.in_off + (oy * g.stride_h - g.pad_top) * l.in_rs +
                      ox * g.stride_w - g.pad_left;
    const float* wf = wbase + static_cast<size_t>(f) * cg * kk;
    float acc = 0.0f;
    if (kk == 1) {
#pragma unroll 4
      for (int c = lane; c < cg; c += lanes) acc = fmaf(wf[c], xg[c * l.in_cs], acc);
    } else {
      for (int c = lane; c < cg; c += lanes) {
        const float* xc = xg + c * l.in_cs;
        const float* wc = wf + c * kk;
        for (int kh = 0; kh < g.KH; ++kh) {
          for (int kw = 0; kw < g.KW; ++kw) {
            acc = fmaf(wc[kh * g.KW + kw], xc[kh * g.dil_h * l.in_rs + kw * g.dil_w], acc);
          }
        }
      }
    }
    for (int s = lanes >> 1; s > 0; s >>= 1) acc += shuffle_xor(acc, s);
    if (valid && lane == 0) {
      const float v = seq_act(acc + (l.bias ? __ldg(l.bias + f) : 0.0f), l);
      if (pooled) {
        partials[oc] = v;
      } else {
        sink.put(f, oy, ox, v);
      }
    }
  }
}

__device__ __forceinline__ void conv_sums(const SeqLayer& l, const float* in, const float* weights, const int* taps, float* partials,
                          int f_lo, int f_hi) {
  const float* ws = weights + l.w_at;
  const int* t = taps + l.t_at;
  switch (l.fb * 8 + l.pb) {
    case 8 * 8 + 2: return conv_direct<8, 2>(l, in, ws, t, partials, f_lo, f_hi);
    case 8 * 8 + 1: return conv_direct<8, 1>(l, in, ws, t, partials, f_lo, f_hi);
    case 4 * 8 + 2: return conv_direct<4, 2>(l, in, ws, t, partials, f_lo, f_hi);
    case 4 * 8 + 1: return conv_direct<4, 1>(l, in, ws, t, partials, f_lo, f_hi);
    case 2 * 8 + 1: return conv_direct<2, 1>(l, in, ws, t, partials, f_lo, f_hi);
    default: return conv_direct<1, 1>(l, in, ws, t, partials, f_lo, f_hi);
  }
}

__device__ __forceinline__ void run_conv(const SeqLayer& l, const float* in, const float* weights, const int* taps, float* partials,
                         const Sink& sink, int c_lo, int c_hi, unsigned long long* trace) {
  const ConvGeometry& g = l.g;
  const int P = static_cast<int>(l.p_d.d), nf = c_hi - c_lo;
  const bool pooled = l.pool.kind != FusedPool::None;
  if (!l.direct) {
    // Filter f's weights at wbase + f * (C / groups) * KH * KW: the rank's staged block (from c_lo) or global memory.
    const int per_filter = l.T;
    const float* wbase = l.w_at >= 0 ? weights + l.w_at - static_cast<ptrdiff_t>(c_lo) * per_filter : l.w;
    conv_lanes(l, in, wbase, c_lo, c_hi, sink, partials);
    if (!pooled) return;
  } else {
    conv_sums(l, in, weights, taps, partials, c_lo, c_hi);
  }
  trace_point(trace, 0);
  // The epilogue over the sums: the splits added in order, the bias, the activation (the lanes' outputs have them
  // already), and the pool where there is one.
  __syncthreads();
  trace_point(trace, 1);
  const int ks_n = l.ks;
  const bool activated = !l.direct;
  const float* bs = weights + l.b_at;
  auto value = [&](int fl, int p) {
    float v = 0.0f;
    for (int ks = 0; ks < ks_n; ++ks) v += partials[(ks * nf + fl) * P + p];
    return activated ? v : seq_act(v + bs[fl], l);
  };
  if (!pooled) {
    for (int o = threadIdx.x; o < nf * P; o += kSeqThreads) {
      const int fl = l.p_d.div(o), p = o - fl * P;
      const int oy = l.ow_d.div(p);
      sink.put(c_lo + fl, oy, p - oy * g.OW, value(fl, p));
    }
    return;
  }
  const int pp = static_cast<int>(l.out_p_d.d);
  for (int i = threadIdx.x; i < nf * pp; i += kSeqThreads) {
    const int fl = l.out_p_d.div(i), q = i - fl * pp;
    const int py = l.out_w_d.div(q), px = q - py * l.OW;
    sink.put(c_lo + fl, py, px,
             pool_window(l.pool, py, px, g.OH, g.OW, [&](int yy, int xx) { return value(fl, yy * g.OW + xx); }));
  }
}

__device__ __forceinline__ void run_pool(const SeqLayer& l, const float* in, const Sink& sink, int c_lo, int c_hi) {
  const int pp = static_cast<int>(l.out_p_d.d);
  for (int i = threadIdx.x; i < (c_hi - c_lo) * pp; i += kSeqThreads) {
    const int cl = l.out_p_d.div(i), q = i - cl * pp, c = c_lo + cl;
    const int py = l.out_w_d.div(q), px = q - py * l.OW;
    const float* map = in + c * l.in_cs + l.in_off;
    sink.put(c, py, px, pool_window(l.pool, py, px, l.H, l.W, [&](int yy, int xx) { return map[yy * l.in_rs + xx]; }));
  }
}

__device__ __forceinline__ void run_global_pool(const SeqLayer& l, const float* in, const Sink& sink, int c_lo,
                                                int c_hi) {
  const int hw = l.H * l.W, lane = threadIdx.x & 31;
  const bool max = l.pool.kind == FusedPool::Max;
  for (int c = c_lo + static_cast<int>(threadIdx.x >> 5); c < c_hi; c += kSeqWarps) {
    const float* map = in + c * l.in_cs + l.in_off;
    float v = max ? -INFINITY : 0.0f;
    for (int i = lane; i < hw; i += 32) {
      const int yy = l.in_w_d.div(i);
      const float u = map[yy * l.in_rs + i - yy * l.W];
      v = max ? fmaxf(v, u) : v + u;
    }
    for (int s = 16; s > 0; s >>= 1) {
      const float u = shuffle_xor(v, s);
      v = max ? fmaxf(v, u) : v + u;
    }
    if (lane == 0) sink.put(c, 0, 0, max ? v : v / static_cast<float>(hw));
  }
}

__device__ __forceinline__ void run_affine(const SeqLayer& l, const float* in, const Sink& sink, int c_lo, int c_hi) {
  const int hw = static_cast<int>(l.in_p_d.d);
  for (int i = threadIdx.x; i < (c_hi - c_lo) * hw; i += kSeqThreads) {
    const int cl = l.in_p_d.div(i), q = i - cl * hw, c = c_lo + cl;
    const int yy = l.in_w_d.div(q), xx = q - yy * l.W;
    float v = in[c * l.in_cs + yy * l.in_rs + xx + l.in_off];
    if (l.w) v *= __ldg(l.w + c);
    if (l.bias) v += __ldg(l.bias + c);
    // The output has the input's extents (OH = H, OW = W).
    sink.put(c, yy, xx, seq_act(v, l));
  }
}

// (At least one block an SM, said explicitly: without it ptxas held the kernel to 64 registers and spilled.)
__global__ void __launch_bounds__(kSeqThreads, 1) seqnet_kernel(const __grid_constant__ SeqParams p) {
  extern __shared__ __align__(16) unsigned char smem[];
  SeqLayer* layers = reinterpret_cast<SeqLayer*>(smem);
  trace_point(p.trace, 0);
  // Layer k's mbarrier (k < n_layers - 1): complete when the other ranks' shares of its output are here.
  [[maybe_unused]] uint64_t* ready = reinterpret_cast<uint64_t*>(reinterpret_cast<float*>(smem) + p.table_floats);
  float* buffer0 = reinterpret_cast<float*>(smem) + p.table_floats + kSeqBarrierFloats;
  float* buffer1 = buffer0 + p.buffer_floats;
  float* buffer2 = buffer1 + p.buffer_floats;
  float* partials = buffer2 + p.aux_floats;
  float* weights = partials + p.partial_floats;
  const int* taps = reinterpret_cast<const int*>(weights + p.weight_floats);
  [[maybe_unused]] const int ranks = p.ranks;  // (clusters: compute capability 9.0)
  const int rank = static_cast<int>(blockIdx.z);
  const int image = static_cast<int>(blockIdx.y);
  // The table, and the rank's weights, biases and tap offsets of every layer (packed as they lie in shared memory:
  // seqnet_packed_weights) are constants of the plan: copied at once by 16-byte cp.async, under the tail of the grid
  // before, and waited for after it.
  {
    const float* table = reinterpret_cast<const float*>(p.layers);
    float* to = reinterpret_cast<float*>(smem);
    for (int i = threadIdx.x * 4; i < p.table_floats; i += kSeqThreads * 4) cp_async_16(to + i, table + i, true);
    const float* src = p.packed + static_cast<size_t>(rank) * p.staged_floats;
    for (int i = threadIdx.x * 4; i < p.staged_floats; i += kSeqThreads * 4) cp_async_16(weights + i, src + i, true);
  }
  cp_async_commit();
#if !CNNRT_ARCH_BELOW(900)
  if (ranks > 1 && threadIdx.x == 0) {
    for (int k = 0; k + 1 < p.n_layers; ++k) chain_detail::mbarrier_init(ready + k, 1);
    chain_detail::fence_mbarrier_init();
  }
  // Every rank started (its mbarriers set up) before any stores into it: the cluster barrier's arrive now
  // (fence_mbarrier_init published the set-up), its wait after the input.
  if (ranks > 1) asm volatile("barrier.cluster.arrive.relaxed;" ::: "memory");
#endif
  trace_point(p.trace, 1);
  wait_for_prior_grid();
  trace_point(p.trace, 2);
  {
    // Layer 0's input, all of it in every rank: its padded planes, zeros around the image's values, by cp.async
    // too (its layout from the parameters: in flight with the table and weights, one wait for all).
    const float* x = p.x + static_cast<size_t>(image) * p.in_image;
    for (int i = threadIdx.x; i < p.in_c * p.in_cs; i += kSeqThreads) {
      const int c = p.in_cs_d.div(i), q = i - c * p.in_cs;
      const int qy = p.in_rs_d.div(q);
      const int yy = qy - p.in_pt, xx = q - qy * p.in_rs - p.in_pl;
      const bool inside = yy >= 0 && yy < p.in_h && xx >= 0 && xx < p.in_w;
      cp_async_4(buffer0 + i, inside ? x + (c * p.in_h + yy) * p.in_w + xx : x, inside);
    }
  }
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
#if !CNNRT_ARCH_BELOW(900)
  if (ranks > 1 && threadIdx.x == 0) {
    // Each layer's mbarrier expects one arrival (this thread's, now) and the bytes of the other ranks' channels (some
    // may have arrived already: the phase cannot complete before the arrival).
    for (int k = 0; k + 1 < p.n_layers; ++k) {
      const SeqLayer& l = layers[k];
      const int own = min(l.OC, rank * l.cb + l.cb) - min(l.OC, rank * l.cb);
      const int floats = l.local ? 0 : (l.OC - own) * l.out_cs;
      chain_detail::mbarrier_arrive_expect_tx(ready + k, static_cast<uint32_t>(floats * 4));
    }
  }
  if (ranks > 1) asm volatile("barrier.cluster.wait.acquire;" ::: "memory");
#endif
  trace_point(p.trace, 3);
  for (int k = 0; k < p.n_layers; ++k) {
    const SeqLayer& l = layers[k];
    const bool last = k + 1 == p.n_layers;
    const float* in = l.in_buf == 0 ? buffer0 : l.in_buf == 1 ? buffer1 : buffer2;
    float* y = last ? p.y + static_cast<size_t>(image) * p.out_image : nullptr;
    const Sink sink{l, l.out_buf == 0 ? buffer0 : l.out_buf == 1 ? buffer1 : buffer2, y};
    const int c_lo = min(l.OC, rank * l.cb), c_hi = min(l.OC, c_lo + l.cb);
    switch (l.kind) {
      case NetOpKind::Conv:
        run_conv(l, in, weights, taps, partials, sink, c_lo, c_hi, p.trace ? p.trace + 4 + 3 * p.n_layers + 2 * k : nullptr);
        break;
      case NetOpKind::Pool: run_pool(l, in, sink, c_lo, c_hi); break;
      case NetOpKind::GlobalPool: run_global_pool(l, in, sink, c_lo, c_hi); break;
      default: run_affine(l, in, sink, c_lo, c_hi); break;
    }
    sink.zero_halo(c_lo, c_hi);
    trace_point(p.trace, 4 + 3 * k);
    if (last) break;
    // The layer's outputs in every rank before the next reads them (a local layer's in this rank only). The buffer a
    // layer's shares go to is one no rank still reads (build_seqnet): every rank has sent the last shared layer
    // before it, after its own reads.
    __syncthreads();
#if !CNNRT_ARCH_BELOW(900)
    if (ranks > 1 && !l.local) sink.share(c_lo, c_hi, rank, ranks, ready + k);
#endif
    trace_point(p.trace, 5 + 3 * k);
#if !CNNRT_ARCH_BELOW(900)
    if (ranks > 1 && !l.local) chain_detail::mbarrier_wait_parity0(ready + k);
#endif
    trace_point(p.trace, 6 + 3 * k);
  }
}

static_assert(sizeof(SeqLayer) % sizeof(int4) == 0);

// Layer k's input layout: dense [C][H][W], or with the zero halo of a convolution's padding.
struct Layout {
  int cs = 1, rs = 1, off = 0, pt = 0, pl = 0, hp = 1, wp = 1;
};
Layout dense_layout(int H, int W) { return {H * W, W, 0, 0, 0, H, W}; }

}  // namespace

size_t SeqProgram::smem_bytes() const {
  return layers.size() * sizeof(SeqLayer) +
         (kSeqBarrierFloats + 2 * static_cast<size_t>(buffer_floats) + aux_floats + partial_floats + staged_floats()) *
             sizeof(float);
}

std::vector<SeqVariant> seqnet_variants(int arch, int max_cluster) {
  std::vector<SeqVariant> out;
  if (arch >= 90) {
    for (int ranks : {16, 8, 4}) {
      if (ranks <= max_cluster) out.push_back({"seqnet_cl" + std::to_string(ranks), ranks});
    }
  }
  out.push_back({"seqnet_cl1", 1});
  return out;
}

std::vector<std::string> seqnet_variant_names() {
  std::vector<std::string> names;
  for (const SeqVariant& v : seqnet_variants(90)) names.push_back(v.name);
  return names;
}

std::optional<SeqProgram> build_seqnet(const std::vector<NetOp>& ops, int ranks, int smem_optin, std::string* why) {
  auto refuse = [why](const std::string& reason) {
    if (why) *why = reason;
    return std::optional<SeqProgram>{};
  };
  if (ops.empty()) return refuse("no ops");
  SeqProgram prog;
  prog.ranks = ranks;
  prog.in_image_floats = ops.front().in0_stride;
  // The ops as layers: a Conv and the Pool that reads it (the network kernel's pooled convolution, or a pooling
  // node after one) as one layer.
  int prev_out = -1;
  for (size_t k = 0; k < ops.size(); ++k) {
    const NetOp& o = ops[k];
    if (k > 0 && o.in0 != prev_out) return refuse("an op that does not read the one before");
    if (o.in1 >= 0) return refuse("an op of two inputs");
    SeqLayer l;
    l.kind = o.kind;
    switch (o.kind) {
      case NetOpKind::Conv: {
        const ConvGeometry& g = o.g;
        if (g.groups < 1 || g.C % g.groups != 0 || g.F % g.groups != 0) return refuse("a convolution's groups");
        l.g = g;
        l.C = g.C, l.H = g.H, l.W = g.W;
        l.OC = g.F, l.OH = g.OH, l.OW = g.OW;
        l.w = o.w;
        l.bias = o.bias;
        l.act = o.act;
        l.alpha = o.alpha;
        l.beta = o.beta;
        if (k + 1 < ops.size() && ops[k + 1].kind == NetOpKind::Pool && ops[k + 1].in0 == o.out) {
          const NetOp& pool = ops[k + 1];
          if (pool.g.C != g.F || pool.g.H != g.OH || pool.g.W != g.OW) return refuse("a pool of another shape");
          l.pool = pool.pool;
          l.OH = pool.g.OH, l.OW = pool.g.OW;
          prev_out = pool.out;
          prog.out_image_floats = pool.out_stride;
          ++k;
          prog.layers.push_back(l);
          continue;
        }
        break;
      }
      case NetOpKind::Pool:
        l.C = l.OC = o.g.C, l.H = o.g.H, l.W = o.g.W;
        l.OH = o.g.OH, l.OW = o.g.OW;
        l.pool = o.pool;
        break;
      case NetOpKind::GlobalPool:
        l.C = l.OC = o.g.C, l.H = o.g.H, l.W = o.g.W;
        l.pool = o.pool;
        break;
      case NetOpKind::Affine: {
        if (o.inner < 1 || o.count % o.inner != 0) return refuse("an affine map's extents");
        l.C = l.OC = o.count / o.inner, l.H = l.OH = o.inner, l.W = l.OW = 1;
        // The extents of the layer before (a map's rows and columns), where it has as many values.
        if (!prog.layers.empty()) {
          const SeqLayer& before = prog.layers.back();
          if (before.OC == l.C && before.OH * before.OW == o.inner) l.H = l.OH = before.OH, l.W = l.OW = before.OW;
        }
        l.w = o.w;
        l.bias = o.bias;
        l.act = o.act;
        l.alpha = o.alpha;
        l.beta = o.beta;
        break;
      }
      default: return refuse("an op other than a convolution, pool, global pool or affine map");
    }
    prev_out = o.out;
    prog.out_image_floats = o.out_stride;
    prog.layers.push_back(l);
  }
  if (prog.layers.size() > size_t(kSeqMaxLayers)) return refuse("more layers than the kernel's table holds");

  // Each layer's input layout (a convolution's with its padding as a zero halo), checked against the layer before.
  std::vector<Layout> in_layout(prog.layers.size());
  for (size_t k = 0; k < prog.layers.size(); ++k) {
    SeqLayer& l = prog.layers[k];
    Layout lay = dense_layout(l.H, l.W);
    if (l.kind == NetOpKind::Conv) {
      const ConvGeometry& g = l.g;
      lay.pt = g.pad_top, lay.pl = g.pad_left;
      lay.hp = g.H + g.pad_top + g.pad_bottom, lay.wp = g.W + g.pad_left + g.pad_right;
      // (Padded planes a multiple of 16 bytes apart: a rank's channels go to the others by 16-byte stores.)
      const int plane = lay.hp * lay.wp;
      lay.rs = lay.wp, lay.cs = plane == l.H * l.W ? plane : (plane + 3) / 4 * 4, lay.off = lay.pt * lay.rs + lay.pl;
    }
    if (k > 0) {
      const SeqLayer& before = prog.layers[k - 1];
      const bool dense = lay.cs == l.H * l.W;
      const bool same = before.OC == l.C && before.OH == l.H && before.OW == l.W;
      const bool flat = int64_t(before.OC) * before.OH * before.OW == int64_t(l.C) * l.H * l.W;
      if (!(same || (dense && flat))) return refuse("a layer whose input is not the output of the one before");
    }
    in_layout[k] = lay;
    l.in_cs = lay.cs, l.in_rs = lay.rs, l.in_off = lay.off;
    prog.buffer_floats = std::max<int64_t>(prog.buffer_floats, int64_t(lay.cs) * l.C + 4);
  }
  prog.buffer_floats = (prog.buffer_floats + 3) / 4 * 4;

  // The outputs' layouts (the next layer's input's; the last one's dense), the ranks' shares, the convolutions' work.
  int tap_at = 0;
  for (size_t k = 0; k < prog.layers.size(); ++k) {
    SeqLayer& l = prog.layers[k];
    const bool last = k + 1 == prog.layers.size();
    // The next buffer as the next layer reads it where it is padded (same extents: checked above), else dense
    // in this layer's own [OC][OH][OW] order (a flatten in between changes nothing then).
    Layout out = dense_layout(l.OH, l.OW);
    if (!last && in_layout[k + 1].cs != prog.layers[k + 1].H * prog.layers[k + 1].W) out = in_layout[k + 1];
    l.out_cs = out.cs, l.out_rs = out.rs, l.out_off = out.off;
    l.out_pt = out.pt, l.out_pl = out.pl, l.out_hp = out.hp, l.out_wp = out.wp;
    l.cb = (l.OC + ranks - 1) / ranks;
    l.in_p_d = FastDiv(std::max(1, l.H * l.W)), l.in_w_d = FastDiv(std::max(1, l.W));
    l.in_cs_d = FastDiv(std::max(1, l.in_cs)), l.in_rs_d = FastDiv(std::max(1, l.in_rs));
    l.out_p_d = FastDiv(std::max(1, l.OH * l.OW)), l.out_w_d = FastDiv(std::max(1, l.OW));
    if (!last) {
      // The next buffer's zero halo a channel: the rows above the interior, the side columns of its rows, the rows
      // below.
      l.halo_top = out.pt * out.wp;
      l.halo_sides = out.wp - l.OW;
      l.halo_n = l.halo_top + l.OH * l.halo_sides + (out.hp - out.pt - l.OH) * out.wp;
      l.halo_d = FastDiv(std::max(1, l.halo_n)), l.halo_wp_d = FastDiv(std::max(1, out.wp));
      l.halo_sides_d = FastDiv(std::max(1, l.halo_sides));
    }
    if (l.kind != NetOpKind::Conv) continue;
    const ConvGeometry& g = l.g;
    const int cg = g.C / g.groups, fg = g.F / g.groups, kk = g.KH * g.KW;
    const int P = g.OH * g.OW, T = cg * kk;
    l.cg = cg, l.T = T;
    l.fg_d = FastDiv(fg), l.ow_d = FastDiv(std::max(1, g.OW)), l.p_d = FastDiv(std::max(1, P));
    l.kk_d = FastDiv(kk), l.kw_d = FastDiv(std::max(1, g.KW));
    if (P >= 24) {
      // Direct: the register block and tap split of the least estimated time: instructions an item (a tap: its
      // offset, the weights' vector reads, pb inputs, fb * pb multiply-adds) times the items a warp runs, stretched
      // where fewer items than warps leave the schedulers without warps to switch between; plus the epilogue's pass
      // over the split sums.
      double best = 1e30;
      for (int fb : {8, 4, 2, 1}) {
        if (l.cb % fb != 0 || fg % fb != 0) continue;
        for (int pb : {1, 2}) {
          if (pb > 1 && (16 * pb >= P || fb < 4)) continue;  // (its last 32 lanes would find no position; the
                                                             // blocks instantiated: conv_sums)
          for (int ks = 1; ks <= 16 && (ks == 1 || T / ks >= 8); ks *= 2) {
            const int items = l.cb / fb * ((P + 32 * pb - 1) / (32 * pb)) * ks;
            const double per_item = double((T + ks - 1) / ks) * (1 + (fb + 3) / 4 + pb + fb * pb);
            double cost = per_item * ((items + kSeqWarps - 1) / kSeqWarps) * kSeqWarps / std::min(items, kSeqWarps);
            if (ks > 1) cost += 100.0 + double((l.cb * P + kSeqThreads - 1) / kSeqThreads) * ks * 4;
            if (cost < best) best = cost, l.fb = fb, l.pb = pb, l.ks = ks;
          }
        }
      }
      l.lanes = 1;
      l.direct = 1;
      l.per = (T + l.ks - 1) / l.ks;
      l.tiles = (P + 32 * l.pb - 1) / (32 * l.pb);
      l.ks_d = FastDiv(l.ks), l.tiles_d = FastDiv(l.tiles);
      l.t_at = tap_at;
      tap_at += T;
      prog.partial_floats = std::max(prog.partial_floats, l.ks * l.cb * P);
    } else {
      l.fb = l.pb = l.ks = 1;
      l.lanes = 1;
      while (l.lanes < 32 && int64_t(l.cb) * P * l.lanes * 2 <= kSeqThreads && l.lanes * 2 <= cg) l.lanes *= 2;
      if (l.pool.kind != FusedPool::None) prog.partial_floats = std::max(prog.partial_floats, l.cb * P);
    }
  }
  prog.partial_floats = (prog.partial_floats + 3) / 4 * 4;
  prog.tap_ints = tap_at;
  // Local layers: the next one reads only the rank's own channels of their output (per channel, the same split).
  for (size_t k = 0; k + 1 < prog.layers.size(); ++k) {
    const SeqLayer& next = prog.layers[k + 1];
    const bool depthwise = next.kind == NetOpKind::Conv && next.g.groups == next.g.C && next.g.F == next.g.C;
    const bool per_channel = next.kind == NetOpKind::Pool || next.kind == NetOpKind::GlobalPool ||
                             next.kind == NetOpKind::Affine || depthwise;
    prog.layers[k].local = per_channel && next.C == prog.layers[k].OC && next.cb == prog.layers[k].cb ? 1 : 0;
  }
  // The buffers: a layer writes one it does not read, and where it shares its output (other ranks store into it),
  // one that no layer since the last shared one reads (a rank may still be there: every rank has sent that layer,
  // after its reads, and no later one). Buffers 0 and 1 first; the third sized to what goes in it. Runs of local
  // layers can leave none free: then no layer is local (with every layer shared, two buffers always do).
  auto assign_buffers = [&prog]() {
    prog.aux_floats = 0;
    int last_shared = -1;
    for (size_t k = 0; k + 1 < prog.layers.size(); ++k) {
      SeqLayer& l = prog.layers[k];
      bool busy[3] = {false, false, false};
      busy[l.in_buf] = true;
      if (!l.local) {
        for (size_t i = static_cast<size_t>(last_shared + 1); i <= k; ++i) busy[prog.layers[i].in_buf] = true;
        last_shared = static_cast<int>(k);
      }
      const int order[3] = {1 - std::min(l.in_buf, 1), std::min(l.in_buf, 1), 2};
      l.out_buf = -1;
      for (int b : order) {
        if (!busy[b]) {
          l.out_buf = b;
          break;
        }
      }
      if (l.out_buf < 0) return false;
      SeqLayer& next = prog.layers[k + 1];
      next.in_buf = l.out_buf;
      if (l.out_buf == 2) prog.aux_floats = std::max(prog.aux_floats, (next.in_cs * next.C + 4 + 3) / 4 * 4);
    }
    return true;
  };
  if (!assign_buffers()) {
    for (SeqLayer& l : prog.layers) l.local = 0;
    assign_buffers();
  }
  // Where each rank stages its weights: the direct layers' tap-major (rows 16-byte aligned) with their biases beside
  // them, the lanes' layers' as they are; those of one output position (each weight read once) too where all fit,
  // else they are read from global memory.
  auto place = [&prog](bool stage_single) {
    int at = 0;
    for (SeqLayer& l : prog.layers) {
      if (l.kind != NetOpKind::Conv) continue;
      const int T = l.g.C / l.g.groups * l.g.KH * l.g.KW;
      if (l.direct) {
        at = (at + 3) / 4 * 4;
        l.w_at = at;
        at += T * seq_weight_row(l.cb);
        l.b_at = at;
        at += l.cb;
      } else if (stage_single || l.g.OH * l.g.OW > 1) {
        l.w_at = at;
        at += l.cb * T;
      } else {
        l.w_at = -1;
      }
    }
    prog.weight_floats = (at + 3) / 4 * 4;  // (each rank's block 16-byte aligned: copied by 16-byte cp.async)
  };
  const size_t limit = static_cast<size_t>(std::max(0, smem_optin - 1024));
  place(true);
  if (prog.smem_bytes() > limit) place(false);
  if (prog.smem_bytes() > limit) return refuse("activations and weights beyond a block's shared memory");
  return prog;
}

std::vector<float> seqnet_packed_weights(const SeqProgram& program, SeqHostCopies* copies) {
  const int WF = program.staged_floats();
  std::vector<float> packed(static_cast<size_t>(WF) * program.ranks, 0.0f);
  SeqHostCopies own;
  SeqHostCopies& host = copies ? *copies : own;
  auto fetch = [&host](const float* device, size_t n) -> const std::vector<float>& {
    auto [it, added] = host.try_emplace(device);
    if (added || it->second.size() < n) {
      it->second.resize(n);
      if (n > 0 && cudaMemcpy(it->second.data(), device, n * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess) {
        host.erase(it);
        throw std::runtime_error("seqnet_packed_weights: reading a layer's weights back failed");
      }
    }
    return it->second;
  };
  static const std::vector<float> none;
  for (const SeqLayer& l : program.layers) {
    if (l.kind != NetOpKind::Conv || l.t_at < 0) continue;
    // Tap t's offset in the input (its channel, filter row and column), after every rank's weights.
    const ConvGeometry& g = l.g;
    for (int t = 0; t < l.T; ++t) {
      const int c = t / (g.KH * g.KW), r = t % (g.KH * g.KW);
      const int offset = c * l.in_cs + r / g.KW * g.dil_h * l.in_rs + r % g.KW * g.dil_w;
      for (int rank = 0; rank < program.ranks; ++rank) {
        std::memcpy(packed.data() + static_cast<size_t>(rank) * WF + program.weight_floats + l.t_at + t, &offset,
                    sizeof(float));
      }
    }
  }
  for (const SeqLayer& l : program.layers) {
    if (l.kind != NetOpKind::Conv || l.w_at < 0) continue;
    const int T = l.g.C / l.g.groups * l.g.KH * l.g.KW;
    const std::vector<float>& w = fetch(l.w, static_cast<size_t>(l.OC) * T);
    const std::vector<float>& b = l.bias ? fetch(l.bias, static_cast<size_t>(l.OC)) : none;
    for (int r = 0; r < program.ranks; ++r) {
      float* block = packed.data() + static_cast<size_t>(r) * WF;
      const int f_lo = std::min(l.OC, r * l.cb), nf = std::min(l.OC, f_lo + l.cb) - f_lo;
      for (int f = 0; f < nf; ++f) {
        for (int t = 0; t < T; ++t) {
          const float v = w[static_cast<size_t>(f_lo + f) * T + t];
          if (!l.direct) {
            block[l.w_at + f * T + t] = v;  // [filter][tap]
          } else {
            block[l.w_at + t * seq_weight_row(l.cb) + f] = v;  // tap-major
          }
        }
        if (l.b_at >= 0 && !b.empty()) block[l.b_at + f] = b[static_cast<size_t>(f_lo + f)];
      }
    }
  }
  return packed;
}

void launch_seqnet(const SeqProgram& program, const SeqLayer* layers, const float* x, float* y, int batch,
                   cudaStream_t stream, unsigned long long* trace) {
  const int n = static_cast<int>(program.layers.size());
  if (n < 1 || n > kSeqMaxLayers || batch < 1 || batch > 65535 || (program.staged_floats() > 0 && !program.packed)) {
    throw std::invalid_argument("launch_seqnet: " + std::to_string(n) + " layers, batch " + std::to_string(batch) +
                                ": beyond the kernel's limits");
  }
  SeqParams p{};
  p.layers = layers;
  p.n_layers = n;
  p.ranks = program.ranks;
  p.table_floats = n * static_cast<int>(sizeof(SeqLayer) / sizeof(float));
  p.buffer_floats = program.buffer_floats;
  p.aux_floats = program.aux_floats;
  p.partial_floats = program.partial_floats;
  p.weight_floats = program.weight_floats;
  p.staged_floats = program.staged_floats();
  const SeqLayer& first = program.layers.front();
  p.in_c = first.C, p.in_h = first.H, p.in_w = first.W, p.in_cs = first.in_cs, p.in_rs = first.in_rs;
  p.in_pt = first.in_off / first.in_rs, p.in_pl = first.in_off % first.in_rs;
  p.in_cs_d = first.in_cs_d, p.in_rs_d = first.in_rs_d;
  p.in_image = program.in_image_floats;
  p.out_image = program.out_image_floats;
  p.packed = program.packed;
  p.x = x;
  p.y = y;
  p.trace = trace;
  allow_all_dynamic_smem<seqnet_kernel>();  // (the table and the staging may take all a block can have)
  if (program.ranks > 8) allow_large_clusters<seqnet_kernel>();
  launch_overlapped(seqnet_kernel, dim3(1, static_cast<unsigned>(batch), static_cast<unsigned>(program.ranks)),
                    dim3(kSeqThreads), program.smem_bytes(), stream, static_cast<unsigned>(program.ranks), p);
}

}  // namespace cnnrt::kernels
