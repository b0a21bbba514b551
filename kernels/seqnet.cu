// The sequence kernel (seqnet.cuh): one cluster an image runs a chain of layers, its activations in shared memory.
#include <algorithm>
#include <array>
#include <climits>
#include <cstring>
#include <map>
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
  int table_floats, act_floats, partial_floats, weight_floats;
  int staged_floats;  // a rank's packed block: its weights (weight_floats), then the tap offsets
  // The inputs as they lie in shared memory (SeqProgram's, for the staging before the table is there).
  struct Input {
    const float* x;
    int image, base, c, h, w, cs, rs, pt, pl;
    FastDiv cs_d, rs_d;
  } in[kSeqMaxInputs];
  int n_inputs;
  int out_image;
  const float* packed;
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

// Layer `l`'s second operand (a residual, or a binary op's b) at (c, y, x).
__device__ __forceinline__ float seq_operand(const SeqLayer& l, const float* act, int c, int y, int x) {
  return act[l.res_base + c * l.res_cs + y * l.res_rs + x * l.res_xs + l.res_off];
}

// Where layer `l`'s outputs go: the last layer's into this image's dense output in global memory; the others' into
// this rank's activation area, whose share of channels (values and zero halo) then goes to every other rank (share()).
struct Sink {
  const SeqLayer& l;
  float* act;   // this block's activation area (at the same address in every rank)
  float* next;  // act + l.out_base
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
  // Channels [c_lo, c_hi) of this rank's output (one contiguous run: the channels' planes) into every other
  // rank's, 16 bytes a store where the run is aligned, as asynchronous stores that each rank's mbarrier `ready`
  // counts (no cluster barrier: a rank waits for its own mbarrier only); each rank starts with the rank after it.
  // After a block barrier (the block's stores complete).
#if !CNNRT_ARCH_BELOW(900)
  __device__ __forceinline__ void share(int c_lo, int c_hi, int rank, int ranks, uint64_t* ready) const {
    if (y || ranks == 1 || c_hi <= c_lo) return;
    // (Offsets from the area's start, which is 16-byte aligned.)
    const int a = l.out_base + c_lo * l.out_cs, b = l.out_base + c_hi * l.out_cs;
    const int a4 = (a + 3) / 4 * 4, b4 = max(a4, b / 4 * 4);
    const uint32_t local = chain_detail::shared_address(act), bar = chain_detail::shared_address(ready);
    // Each value read once, then stored into every rank back to back.
    for (int i = a4 + static_cast<int>(threadIdx.x) * 4; i < b4; i += kSeqThreads * 4) {
      const float4 v = *reinterpret_cast<const float4*>(act + i);
      for (int step = 1, r = rank + 1; step < ranks; ++step, ++r) {
        if (r == ranks) r = 0;
        store_async4(local + 4u * static_cast<uint32_t>(i), v, bar, r);
      }
    }
    // The unaligned ends, up to three floats each: threads 0-3 the first, 4-7 the last.
    const int t = static_cast<int>(threadIdx.x);
    const int e = t < 4 ? (a + t < min(a4, b) ? a + t : -1) : t < 8 && b4 + t - 4 < b && b4 + t - 4 >= a4 ? b4 + t - 4 : -1;
    if (e >= 0) {
      const float v = act[e];
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
  const float* act = sink.act;
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
      if (l.bias) acc += __ldg(l.bias + f);
      if (l.res_base >= 0) acc += seq_operand(l, act, f, oy, ox);
      const float v = seq_act(acc, l);
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
  // The epilogue over the sums: the splits added in order, the bias, the residual, the activation (the lanes'
  // outputs have them already), and the pool where there is one (not with a residual: build_seqnet).
  __syncthreads();
  trace_point(trace, 1);
  const int ks_n = l.ks;
  const bool activated = !l.direct;
  const float* bs = weights + l.b_at;
  auto sum = [&](int fl, int p) {
    float v = 0.0f;
    for (int ks = 0; ks < ks_n; ++ks) v += partials[(ks * nf + fl) * P + p];
    return v;
  };
  if (!pooled) {
    for (int o = threadIdx.x; o < nf * P; o += kSeqThreads) {
      const int fl = l.p_d.div(o), p = o - fl * P;
      const int oy = l.ow_d.div(p), ox = p - oy * g.OW;
      float v = sum(fl, p) + bs[fl];
      if (l.res_base >= 0) v += seq_operand(l, sink.act, c_lo + fl, oy, ox);
      sink.put(c_lo + fl, oy, ox, seq_act(v, l));
    }
    return;
  }
  auto value = [&](int fl, int p) { return activated ? sum(fl, p) : seq_act(sum(fl, p) + bs[fl], l); };
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

__device__ __forceinline__ void run_permute(const SeqLayer& l, const float* in, const int* map, const Sink& sink,
                                            int c_lo, int c_hi) {
  const int hw = static_cast<int>(l.in_p_d.d);
  for (int i = threadIdx.x; i < (c_hi - c_lo) * hw; i += kSeqThreads) {
    const int cl = l.in_p_d.div(i), q = i - cl * hw, c = c_lo + cl;
    const int yy = l.in_w_d.div(q), xx = q - yy * l.W;
    sink.put(c, yy, xx, in[map[c] * l.in_cs + yy * l.in_rs + xx + l.in_off]);
  }
}

__device__ __forceinline__ void run_binary(const SeqLayer& l, const float* in, const Sink& sink, int c_lo, int c_hi) {
  const int hw = static_cast<int>(l.in_p_d.d);
  for (int i = threadIdx.x; i < (c_hi - c_lo) * hw; i += kSeqThreads) {
    const int cl = l.in_p_d.div(i), q = i - cl * hw, c = c_lo + cl;
    const int yy = l.in_w_d.div(q), xx = q - yy * l.W;
    const float a = in[c * l.in_cs + yy * l.in_rs + xx + l.in_off], b = seq_operand(l, sink.act, c, yy, xx);
    sink.put(c, yy, xx, apply_binary(l.binary, a, b));  // (the output has the input's extents)
  }
}

// (At least one block an SM, said explicitly: without it ptxas held the kernel to 64 registers and spilled.)
__global__ void __launch_bounds__(kSeqThreads, 1) seqnet_kernel(const __grid_constant__ SeqParams p) {
  extern __shared__ __align__(16) unsigned char smem[];
  SeqLayer* layers = reinterpret_cast<SeqLayer*>(smem);
  trace_point(p.trace, 0);
  // Layer k's mbarrier (k < n_layers - 1): complete when the other ranks' shares of its output are here.
  [[maybe_unused]] uint64_t* ready = reinterpret_cast<uint64_t*>(reinterpret_cast<float*>(smem) + p.table_floats);
  float* act = reinterpret_cast<float*>(smem) + p.table_floats + kSeqBarrierFloats;
  float* partials = act + p.act_floats;
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
  for (int s = 0; s < p.n_inputs; ++s) {
    // The inputs, all of them in every rank: their padded planes, zeros around the image's values, by cp.async too
    // (their layouts from the parameters: in flight with the table and weights, one wait for all).
    const SeqParams::Input& in = p.in[s];
    const float* x = in.x + static_cast<size_t>(image) * in.image;
    float* staged = act + in.base;
    for (int i = threadIdx.x; i < in.c * in.cs; i += kSeqThreads) {
      const int c = in.cs_d.div(i), q = i - c * in.cs;
      const int qy = in.rs_d.div(q);
      const int yy = qy - in.pt, xx = q - qy * in.rs - in.pl;
      const bool inside = yy >= 0 && yy < in.h && xx >= 0 && xx < in.w;
      cp_async_4(staged + i, inside ? x + (c * in.h + yy) * in.w + xx : x, inside);
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
    const float* in = act + l.in_base;
    float* y = last ? p.y + static_cast<size_t>(image) * p.out_image : nullptr;
    const Sink sink{l, act, act + l.out_base, y};
    const int c_lo = min(l.OC, rank * l.cb), c_hi = min(l.OC, c_lo + l.cb);
    switch (l.kind) {
      case NetOpKind::Conv:
        run_conv(l, in, weights, taps, partials, sink, c_lo, c_hi, p.trace ? p.trace + 4 + 3 * p.n_layers + 2 * k : nullptr);
        break;
      case NetOpKind::Pool: run_pool(l, in, sink, c_lo, c_hi); break;
      case NetOpKind::GlobalPool: run_global_pool(l, in, sink, c_lo, c_hi); break;
      case NetOpKind::Binary: run_binary(l, in, sink, c_lo, c_hi); break;
      case NetOpKind::Permute: run_permute(l, in, taps + l.t_at, sink, c_lo, c_hi); break;
      default: run_affine(l, in, sink, c_lo, c_hi); break;
    }
    sink.zero_halo(c_lo, c_hi);
    trace_point(p.trace, 4 + 3 * k);
    if (last) break;
    // The layer's outputs in every rank before the next layer (a local layer's in this rank only). Where a layer's
    // shares go no rank still reads (build_seqnet): every rank has sent the last shared layer before it, after its
    // own reads.
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

// A tensor's layout: dense [C][H][W], or with the zero halo of a convolution's padding.
struct Layout {
  int cs = 1, rs = 1, off = 0, pt = 0, pl = 0, hp = 1, wp = 1;
};
Layout dense_layout(int H, int W) { return {H * W, W, 0, 0, 0, H, W}; }

}  // namespace

size_t SeqProgram::smem_bytes() const {
  return layers.size() * sizeof(SeqLayer) +
         (kSeqBarrierFloats + static_cast<size_t>(act_floats) + partial_floats + staged_floats()) * sizeof(float);
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

std::optional<SeqProgram> build_seqnet(const std::vector<NetOp>& ops, int ranks, int smem_optin, std::string* why,
                                       const SeqAliases* aliases) {
  auto refuse = [why](const std::string& reason) {
    if (why) *why = reason;
    return std::optional<SeqProgram>{};
  };
  if (ops.empty()) return refuse("no ops");
  SeqProgram prog;
  prog.ranks = ranks;
  const int input = ops.front().in0;
  // Each layer's tensors by slot: what it reads (in; res: a residual or a binary op's b; their floats from one image
  // to the next in global memory, where they come from before the cut) and writes (out, from float out_at of it: a
  // Concat's block copied); `bcast`: res has one value a channel.
  struct Io {
    int in = -1, res = -1, out = -1;
    int in_stride = 0, res_stride = 0;
    int64_t out_at = 0;
    bool bcast = false;
  };
  std::vector<Io> io;
  std::map<int, int> op_readers;
  for (const NetOp& o : ops) {
    for (int s : {o.in0, o.in1}) {
      if (s >= 0) ++op_readers[s];
    }
  }
  std::map<int, std::array<int, 3>> written_shape;  // per slot an op wrote: its [C, H, W]
  // The ops as layers: a Conv and the Pool that alone reads it (the network kernel's pooled convolution, or a
  // pooling node after one) as one layer.
  for (size_t k = 0; k < ops.size(); ++k) {
    const NetOp& o = ops[k];
    SeqLayer l;
    l.kind = o.kind;
    Io t;
    t.in = o.in0;
    t.in_stride = o.in0_stride, t.res_stride = o.in1_stride;
    t.out = o.out;
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
        t.res = o.in1;
        if (o.in1 < 0 && k + 1 < ops.size() && ops[k + 1].kind == NetOpKind::Pool && ops[k + 1].in0 == o.out &&
            op_readers[o.out] == 1) {
          const NetOp& pool = ops[k + 1];
          if (pool.g.C != g.F || pool.g.H != g.OH || pool.g.W != g.OW) return refuse("a pool of another shape");
          l.pool = pool.pool;
          l.OH = pool.g.OH, l.OW = pool.g.OW;
          t.out = pool.out;
          ++k;
        }
        break;
      }
      case NetOpKind::Pool:
        l.C = l.OC = o.g.C, l.H = o.g.H, l.W = o.g.W;
        l.OH = o.g.OH, l.OW = o.g.OW;
        l.pool = o.pool;
        break;
      case NetOpKind::GlobalPool:
        l.C = l.OC = o.g.C, l.H = o.g.H, l.W = std::max(1, o.g.W);
        l.pool = o.pool;
        break;
      case NetOpKind::Affine:
        if (o.inner < 1 || o.count % o.inner != 0) return refuse("an affine map's extents");
        l.C = l.OC = o.count / o.inner, l.H = l.OH = o.inner, l.W = l.OW = 1;
        l.w = o.w;
        l.bias = o.bias;
        l.act = o.act;
        l.alpha = o.alpha;
        l.beta = o.beta;
        break;
      case NetOpKind::Binary: {
        // [C], [C][W] or [C][H][W]: a and b dense, or one of them one value a channel (b, swapped where the op
        // commutes).
        const int r = o.rank;
        if (r < 1 || r > 3 || o.in1 < 0) return refuse("a binary op of rank other than 1 to 3");
        auto dense = [&](const int* st) {
          int64_t stride = 1;
          for (int d = r - 1; d >= 0; --d) {
            if (o.dims[d] != 1 && st[d] != stride) return false;
            stride *= o.dims[d];
          }
          return true;
        };
        auto per_channel = [&](const int* st) {
          for (int d = 1; d < r; ++d) {
            if (o.dims[d] != 1 && st[d] != 0) return false;
          }
          return o.dims[0] == 1 || st[0] == 1;
        };
        t.res = o.in1;
        if (dense(o.sa) && dense(o.sb)) {
        } else if (dense(o.sa) && per_channel(o.sb)) {
          t.bcast = true;
        } else if (dense(o.sb) && per_channel(o.sa) && (o.binary == NetBinary::Add || o.binary == NetBinary::Mul)) {
          std::swap(t.in, t.res);
          std::swap(t.in_stride, t.res_stride);
          t.bcast = true;
        } else {
          return refuse("a binary op that broadcasts other than one value a channel");
        }
        l.C = l.OC = o.dims[0];
        l.H = l.OH = r == 3 ? o.dims[1] : 1;
        l.W = l.OW = r == 1 ? 1 : o.dims[r - 1];
        l.binary = o.binary;
        break;
      }
      case NetOpKind::Permute: {
        // A channel shuffle: the axes after the batch permuted, the last two (rows, columns) kept; out channel c
        // reads in channel map[c] (staged with the tap offsets).
        const int r = o.rank;
        if (r < 3 || o.sa[r - 1] != 1 || o.sa[r - 2] != o.dims[r - 1]) {
          return refuse("a transpose that moves a map's rows or columns");
        }
        const int H = o.dims[r - 2], W = o.dims[r - 1], plane = H * W;
        int C = 1;
        for (int d = 0; d < r - 2; ++d) C *= o.dims[d];
        l.C = l.OC = C, l.H = l.OH = H, l.W = l.OW = W;
        l.t_at = static_cast<int>(prog.channel_maps.size());
        for (int c = 0; c < C; ++c) {
          int64_t at = 0;
          for (int d = r - 3, rest = c; d >= 0; --d) {
            at += int64_t(rest % o.dims[d]) * o.sa[d];
            rest /= o.dims[d];
          }
          if (at % plane != 0 || at / plane >= C) return refuse("a transpose that is not a channel permutation");
          prog.channel_maps.push_back(static_cast<int>(at / plane));
        }
        break;
      }
      case NetOpKind::Copy: {
        // A block of a Concat that is not written in place: the input copied (an affine map of scale 1, shift 0).
        auto at = written_shape.find(o.in0);
        if (at == written_shape.end()) return refuse("a Concat block of the cut's input");
        l.kind = NetOpKind::Affine;
        l.C = l.OC = at->second[0], l.H = l.OH = at->second[1], l.W = l.OW = at->second[2];
        t.out_at = o.out_offset;
        break;
      }
      default: return refuse("an op other than a convolution, pool, global pool, affine map, binary op, Concat or channel shuffle");
    }
    if (t.out_at == 0) written_shape[t.out] = {l.OC, l.OH, l.OW};
    prog.out_image_floats = ops[k].out_stride;
    prog.layers.push_back(l);
    io.push_back(t);
  }
  const size_t n = prog.layers.size();
  if (n > size_t(kSeqMaxLayers)) return refuse("more layers than the kernel's table holds");
  if (io.back().out_at != 0 || (aliases && aliases->count(io.back().out))) return refuse("an output inside another tensor");

  // The tensors in shared memory: each slot a block of a root (itself, or the in-place Concat's output it lies in),
  // `c0` its first channel there. A root's channels are written once each, by a layer or the staged input (-1).
  struct Root {
    int H = 0, W = 0, C = 0;
    int pt = 0, pb = 0, pl = 0, pr = 0;  // the most padding of a convolution that reads it
    bool flat = false;                   // read as other extents of as many values (a flatten)
    std::vector<int> writer;             // per channel: the layer that writes it (-1: the input)
    std::vector<int> writes, reads;      // the layers
    Layout lay;
    int base = 0, begin = 0, end = 0;
  };
  struct View {
    int root = -1, c0 = 0, C = 1, H = 1, W = 1;
    bool flat = false;  // read as the reader's extents (the root dense)
  };
  std::map<int, Root> roots;
  auto root_of = [aliases](int slot) -> std::pair<int, int64_t> {
    if (aliases) {
      auto at = aliases->find(slot);
      if (at != aliases->end()) return {at->second.first, at->second.second / static_cast<int64_t>(sizeof(float))};
    }
    return {slot, 0};
  };
  constexpr int kUnwritten = INT_MAX;
  // A block of C channels of H x W from float `at` of root `r`'s image, written by `layer`.
  auto write = [&](int r, int64_t at, int C, int H, int W, int layer, View* view) -> std::string {
    Root& root = roots[r];
    if (root.H == 0) root.H = H, root.W = W;
    if (root.H != H || root.W != W) return "Concat blocks of other extents";
    if (at % (int64_t(H) * W) != 0) return "a Concat block that does not start at a channel";
    const int c0 = static_cast<int>(at / (int64_t(H) * W));
    if (int(root.writer.size()) < c0 + C) root.writer.resize(static_cast<size_t>(c0 + C), kUnwritten);
    for (int c = c0; c < c0 + C; ++c) {
      if (root.writer[static_cast<size_t>(c)] != kUnwritten) return "a tensor written twice";
      root.writer[static_cast<size_t>(c)] = layer;
    }
    root.C = std::max(root.C, c0 + C);
    if (layer >= 0) root.writes.push_back(layer);
    *view = {r, c0, C, H, W, false};
    return {};
  };
  // What layer j reads from slot s as [C][H][W]: the block the layer before wrote there, the whole of a Concat (or a
  // block of one) written before it, or a tensor from before the cut (the first op's input first), staged as an input
  // (`stride`: its floats from one image to the next). With `adopt` (a per-channel layer that takes its input's
  // extents), H and W become the tensor's where it has C channels of H * W values.
  std::map<int, View> latest;  // per slot: the block last written there
  std::vector<std::pair<int, int>> staged;  // the inputs: slot, stride
  auto read = [&](int s, int j, int C, int& H, int& W, bool adopt, int stride, View* view) -> std::string {
    auto it = latest.find(s);
    bool found = it != latest.end();
    if (found) {
      *view = it->second;
    } else if (s != input) {
      // A Concat or a block of one, where layers before j wrote every channel of it.
      const auto [r, at] = root_of(s);
      auto root = roots.find(r);
      if (root != roots.end() && root->second.H > 0) {
        const int64_t plane = int64_t(root->second.H) * root->second.W, numel = int64_t(C) * H * W;
        if (at % plane != 0 || numel % plane != 0) return "a read of a Concat's channels that is not whole channels";
        const int c0 = static_cast<int>(at / plane), n_c = static_cast<int>(numel / plane);
        found = c0 + n_c <= int(root->second.writer.size());
        for (int c = c0; found && c < c0 + n_c; ++c) found = root->second.writer[static_cast<size_t>(c)] < j;
        if (found) *view = {r, c0, n_c, root->second.H, root->second.W, false};
      }
    }
    if (!found) {
      if (staged.size() == size_t(kSeqMaxInputs)) return "more tensors from before the cut than the kernel stages";
      const auto [r, at] = root_of(s);
      if (std::string e = write(r, at, C, H, W, -1, view); !e.empty()) return e;
      latest[s] = *view;
      staged.emplace_back(s, stride);
    }
    Root& root = roots[view->root];
    for (int c = view->c0; c < view->c0 + view->C; ++c) {
      if (c >= int(root.writer.size()) || root.writer[static_cast<size_t>(c)] >= j) {
        return "an op that reads a tensor from before the cut";
      }
    }
    if (adopt && view->C == C && view->H * view->W == H * W) H = view->H, W = view->W;
    if (!(view->C == C && view->H == H && view->W == W)) {
      if (int64_t(view->C) * view->H * view->W != int64_t(C) * H * W) {
        return "a layer whose input has other extents";
      }
      view->flat = true;
      view->C = C, view->H = H, view->W = W;
      root.flat = true;
    }
    root.reads.push_back(j);
    return {};
  };
  std::vector<View> in_view(n), res_view(n), out_view(n);
  for (size_t j = 0; j < n; ++j) {
    SeqLayer& l = prog.layers[j];
    const Io& t = io[j];
    const int J = static_cast<int>(j);
    // An affine map and a global pool take their input's extents (an affine map's output has them too).
    const bool adopt = l.kind == NetOpKind::Affine || l.kind == NetOpKind::GlobalPool;
    if (std::string e = read(t.in, J, l.C, l.H, l.W, adopt, t.in_stride, &in_view[j]); !e.empty()) return refuse(e);
    if (l.kind == NetOpKind::Affine) l.OH = l.H, l.OW = l.W;
    if (t.res >= 0) {
      // A residual has the convolution's output extents (no pool after it: build merges none after a residual).
      int rh = t.bcast ? 1 : l.OH, rw = t.bcast ? 1 : l.OW;
      if (std::string e = read(t.res, J, l.OC, rh, rw, false, t.res_stride, &res_view[j]); !e.empty()) {
        return refuse(e);
      }
      if (res_view[j].flat && t.bcast) return refuse("a binary op's operand of other extents");
    }
    if (j + 1 == n) break;
    const auto [r, at] = root_of(t.out);
    if (std::string e = write(r, at + t.out_at, l.OC, l.OH, l.OW, J, &out_view[j]); !e.empty()) return refuse(e);
    if (t.out_at == 0) latest[t.out] = out_view[j];
  }
  for (size_t j = 0; j + 1 < n; ++j) {
    if (io[j].out == io.back().out) return refuse("an output inside another tensor");
  }
  // The roots' layouts: a convolution's padding as a zero halo (the most of any convolution that reads it; planes a
  // multiple of 16 bytes apart: a rank's channels go to the others by 16-byte stores); dense where read flattened.
  for (size_t j = 0; j < n; ++j) {
    const SeqLayer& l = prog.layers[j];
    if (l.kind != NetOpKind::Conv || in_view[j].flat) continue;
    Root& root = roots[in_view[j].root];
    root.pt = std::max(root.pt, l.g.pad_top), root.pb = std::max(root.pb, l.g.pad_bottom);
    root.pl = std::max(root.pl, l.g.pad_left), root.pr = std::max(root.pr, l.g.pad_right);
  }
  for (auto& [slot, root] : roots) {
    Layout lay = dense_layout(root.H, root.W);
    if (root.pt + root.pb + root.pl + root.pr > 0) {
      if (root.flat) return refuse("a tensor read both padded and flattened");
      lay.pt = root.pt, lay.pl = root.pl;
      lay.hp = root.H + root.pt + root.pb, lay.wp = root.W + root.pl + root.pr;
      lay.rs = lay.wp, lay.cs = (lay.hp * lay.wp + 3) / 4 * 4, lay.off = lay.pt * lay.rs + lay.pl;
    }
    root.lay = lay;
  }
  // Each layer's reads and writes in those layouts, the ranks' shares, the convolutions' work.
  auto read_layout = [&roots](const View& v, int* cs, int* rs, int* off) {
    const Layout& lay = roots[v.root].lay;
    if (v.flat) {
      *cs = v.H * v.W, *rs = v.W, *off = 0;
    } else {
      *cs = lay.cs, *rs = lay.rs, *off = lay.off;
    }
  };
  int tap_at = static_cast<int>(prog.channel_maps.size());  // (the channel maps first)
  for (size_t k = 0; k < n; ++k) {
    SeqLayer& l = prog.layers[k];
    const bool last = k + 1 == n;
    read_layout(in_view[k], &l.in_cs, &l.in_rs, &l.in_off);
    if (io[k].res >= 0) {
      read_layout(res_view[k], &l.res_cs, &l.res_rs, &l.res_off);
      l.res_xs = 1;
      if (io[k].bcast) l.res_rs = l.res_xs = 0;
    }
    const Layout out = last ? dense_layout(l.OH, l.OW) : roots[out_view[k].root].lay;
    l.out_cs = out.cs, l.out_rs = out.rs, l.out_off = out.off;
    l.out_pt = out.pt, l.out_pl = out.pl, l.out_hp = out.hp, l.out_wp = out.wp;
    l.cb = (l.OC + ranks - 1) / ranks;
    l.in_p_d = FastDiv(std::max(1, l.H * l.W)), l.in_w_d = FastDiv(std::max(1, l.W));
    l.out_p_d = FastDiv(std::max(1, l.OH * l.OW)), l.out_w_d = FastDiv(std::max(1, l.OW));
    if (!last) {
      // The output's zero halo a channel: the rows above the interior, the side columns of its rows, the rows below.
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
  // Local layers: every layer that reads their output reads only the rank's own channels of it (per channel, the same
  // split: a pool, global pool, affine map, binary op, a residual, a depthwise convolution), and it is a tensor of its
  // own (not a block of a Concat).
  std::vector<int> can_be_local(n, 0);
  for (size_t k = 0; k + 1 < n; ++k) {
    const SeqLayer& l = prog.layers[k];
    const Root& root = roots[out_view[k].root];
    bool ok = root.writes.size() == 1 && root.C == l.OC && out_view[k].c0 == 0;
    for (size_t j = k + 1; ok && j < n; ++j) {
      const SeqLayer& r = prog.layers[j];
      for (int operand = 0; operand < 2 && ok; ++operand) {
        const View& v = operand == 0 ? in_view[j] : res_view[j];
        if ((operand == 1 && io[j].res < 0) || v.root != out_view[k].root) continue;
        const bool depthwise = r.kind == NetOpKind::Conv && r.g.groups == r.g.C && r.g.F == r.g.C;
        const bool per_channel = operand == 1 || r.kind == NetOpKind::Pool || r.kind == NetOpKind::GlobalPool ||
                                 r.kind == NetOpKind::Affine || r.kind == NetOpKind::Binary || depthwise;
        ok = per_channel && !v.flat && v.C == l.OC && r.OC == l.OC && r.cb == l.cb;
      }
    }
    can_be_local[k] = ok ? 1 : 0;
  }
  // Where each tensor lies: from the first layer any rank may write it at (a local layer's own; a shared layer's: the
  // one after the last shared layer before it, which every rank has sent, after its reads, before any rank's share
  // of this one arrives) to its last reader, no two of overlapping spans in overlapping floats (first fit).
  auto place_tensors = [&](bool locals) {
    int last_shared = -1;
    std::vector<int> first_at(n, 0);
    for (size_t k = 0; k + 1 < n; ++k) {
      SeqLayer& l = prog.layers[k];
      l.local = locals ? can_be_local[k] : 0;
      first_at[k] = l.local ? static_cast<int>(k) : last_shared + 1;
      if (!l.local) last_shared = static_cast<int>(k);
    }
    std::vector<Root*> order;
    for (auto& [slot, root] : roots) {
      root.begin = root.writer.empty() || *std::min_element(root.writer.begin(), root.writer.end()) < 0 ? 0 : INT_MAX;
      for (int w : root.writes) root.begin = std::min(root.begin, first_at[static_cast<size_t>(w)]);
      root.end = root.begin;
      for (int w : root.writes) root.end = std::max(root.end, w);
      for (int r : root.reads) root.end = std::max(root.end, r);
      order.push_back(&root);
    }
    std::stable_sort(order.begin(), order.end(), [](const Root* a, const Root* b) { return a->begin < b->begin; });
    std::vector<const Root*> placed;
    prog.act_floats = 0;
    for (Root* root : order) {
      const int size = (root->C * root->lay.cs + 4 + 3) / 4 * 4;
      int at = 0;
      for (bool moved = true; moved;) {
        moved = false;
        for (const Root* other : placed) {
          const int other_size = (other->C * other->lay.cs + 4 + 3) / 4 * 4;
          const bool live = other->begin <= root->end && root->begin <= other->end;
          if (live && other->base < at + size && at < other->base + other_size) {
            at = other->base + other_size;
            moved = true;
          }
        }
      }
      root->base = at;
      placed.push_back(root);
      prog.act_floats = std::max(prog.act_floats, at + size);
    }
    for (size_t k = 0; k < n; ++k) {
      SeqLayer& l = prog.layers[k];
      auto base = [&roots](const View& v) { return roots[v.root].base + v.c0 * roots[v.root].lay.cs; };
      l.in_base = base(in_view[k]);
      if (io[k].res >= 0) l.res_base = base(res_view[k]);
      if (k + 1 < n) l.out_base = base(out_view[k]);
    }
  };
  // Where each rank stages its weights: the direct layers' tap-major (rows 16-byte aligned) with their biases beside
  // them, the lanes' layers' as they are; those of one output position (each weight read once) too where all fit,
  // else they are read from global memory.
  auto place_weights = [&prog](bool stage_single) {
    int at = 0;
    for (SeqLayer& l : prog.layers) {
      if (l.kind != NetOpKind::Conv) continue;
      if (l.direct) {
        at = (at + 3) / 4 * 4;
        l.w_at = at;
        at += l.T * seq_weight_row(l.cb);
        l.b_at = at;
        at += l.cb;
      } else if (stage_single || l.g.OH * l.g.OW > 1) {
        l.w_at = at;
        at += l.cb * l.T;
      } else {
        l.w_at = -1;
      }
    }
    prog.weight_floats = (at + 3) / 4 * 4;  // (each rank's block 16-byte aligned: copied by 16-byte cp.async)
  };
  const size_t limit = static_cast<size_t>(std::max(0, smem_optin - 1024));
  place_tensors(true);
  place_weights(true);
  if (prog.smem_bytes() > limit) place_weights(false);
  if (prog.smem_bytes() > limit) place_tensors(false);
  if (prog.smem_bytes() > limit) return refuse("activations and weights beyond a block's shared memory");
  // The inputs as they are staged.
  for (const auto& [slot, stride] : staged) {
    const View& v = latest[slot];
    const Root& root = roots[v.root];
    SeqInput in;
    in.slot = slot;
    in.image_floats = stride;
    in.base = root.base + v.c0 * root.lay.cs;
    in.c = v.C, in.h = root.H, in.w = root.W;
    in.cs = root.lay.cs, in.rs = root.lay.rs, in.pt = root.lay.pt, in.pl = root.lay.pl;
    prog.inputs.push_back(in);
  }
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
  for (int rank = 0; rank < program.ranks; ++rank) {
    if (!program.channel_maps.empty()) {
      std::memcpy(packed.data() + static_cast<size_t>(rank) * WF + program.weight_floats, program.channel_maps.data(),
                  program.channel_maps.size() * sizeof(int));
    }
  }
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
    const int T = l.T;
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

void launch_seqnet(const SeqProgram& program, const SeqLayer* layers, const float* const* x, float* y, int batch,
                   cudaStream_t stream, unsigned long long* trace) {
  const int n = static_cast<int>(program.layers.size());
  const int n_inputs = static_cast<int>(program.inputs.size());
  if (n < 1 || n > kSeqMaxLayers || batch < 1 || batch > 65535 || (program.staged_floats() > 0 && !program.packed) ||
      n_inputs < 1 || n_inputs > kSeqMaxInputs) {
    throw std::invalid_argument("launch_seqnet: " + std::to_string(n) + " layers, " + std::to_string(n_inputs) +
                                " inputs, batch " + std::to_string(batch) + ": beyond the kernel's limits");
  }
  SeqParams p{};
  p.layers = layers;
  p.n_layers = n;
  p.ranks = program.ranks;
  p.table_floats = n * static_cast<int>(sizeof(SeqLayer) / sizeof(float));
  p.act_floats = program.act_floats;
  p.partial_floats = program.partial_floats;
  p.weight_floats = program.weight_floats;
  p.staged_floats = program.staged_floats();
  p.n_inputs = n_inputs;
  for (int s = 0; s < n_inputs; ++s) {
    const SeqInput& in = program.inputs[static_cast<size_t>(s)];
    p.in[s] = {x[s], in.image_floats, in.base, in.c, in.h, in.w, in.cs, in.rs, in.pt, in.pl,
               FastDiv(std::max(1, in.cs)), FastDiv(std::max(1, in.rs))};
  }
  p.out_image = program.out_image_floats;
  p.packed = program.packed;
  p.y = y;
  p.trace = trace;
  allow_all_dynamic_smem<seqnet_kernel>();  // (the table and the staging may take all a block can have)
  if (program.ranks > 8) allow_large_clusters<seqnet_kernel>();
  launch_overlapped(seqnet_kernel, dim3(1, static_cast<unsigned>(batch), static_cast<unsigned>(program.ranks)),
                    dim3(kSeqThreads), program.smem_bytes(), stream, static_cast<unsigned>(program.ranks), p);
}

void launch_seqnet(const SeqProgram& program, const SeqLayer* layers, const float* x, float* y, int batch,
                   cudaStream_t stream, unsigned long long* trace) {
  if (program.inputs.size() != 1) {
    throw std::invalid_argument("launch_seqnet: a program of " + std::to_string(program.inputs.size()) +
                                " inputs given one");
  }
  launch_seqnet(program, layers, &x, y, batch, stream, trace);
}

}  // namespace cnnrt::kernels
