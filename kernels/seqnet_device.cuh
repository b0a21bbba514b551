// The sequence kernel's device code (see seqnet.cuh for the plan of one launch). Included by seqnet.cu, which
// builds the kernel for any program (its layers read from a table in shared memory), and by the source
// seqnet.cu compiles at plan time with NVRTC for one program (every layer's fields a constant): so this header
// and what it includes compile without the host's headers (__CUDACC_RTC__ guards the host-only parts).
#pragma once

#include "kernels/conv_chain_device.cuh"
#include "kernels/conv_device.cuh"
#include "kernels/cp_async.cuh"
#include "kernels/launch.cuh"
#include "kernels/net.cuh"
#include "kernels/seqnet.cuh"

namespace cnnrt::kernels::seq_detail {

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

__device__ __forceinline__ float seq_shuffle_xor(float v, int lane_mask) {
  return __shfl_xor_sync(0xffffffffu, v, lane_mask);
}

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
    const float* wf = wbase + static_cast<long long>(f) * cg * kk;
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
    for (int s = lanes >> 1; s > 0; s >>= 1) acc += seq_shuffle_xor(acc, s);
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
    const float* wbase = l.w_at >= 0 ? weights + l.w_at - static_cast<long long>(c_lo) * per_filter : l.w;
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
      const float u = seq_shuffle_xor(v, s);
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

// A block's shared memory as the kernel lays it out after the layer table (the built kernel's; none where the
// kernel is compiled for one program): the layers' mbarriers, the activation area, the convolutions' sums, the
// rank's staged weights, then its tap offsets.
struct SeqBlock {
  uint64_t* ready;  // layer k's mbarrier (k < n_layers - 1): complete when the other ranks' shares of its output are here
  float* act;
  float* partials;
  float* weights;
  const int* taps;
  int rank, image;
};

// Everything before the first layer: the table (where there is one) and the rank's weights, biases and tap
// offsets of every layer (packed as they lie in shared memory: seqnet_packed_weights), which are constants of the
// plan, copied at once by 16-byte cp.async under the tail of the grid before; the layers' mbarriers; after the
// wait for that grid, the inputs.
__device__ __forceinline__ SeqBlock seq_start(const SeqParams& p, unsigned char* smem) {
  trace_point(p.trace, 0);
  SeqBlock b;
  b.ready = reinterpret_cast<uint64_t*>(reinterpret_cast<float*>(smem) + p.table_floats);
  b.act = reinterpret_cast<float*>(smem) + p.table_floats + kSeqBarrierFloats;
  b.partials = b.act + p.act_floats;
  b.weights = b.partials + p.partial_floats;
  b.taps = reinterpret_cast<const int*>(b.weights + p.weight_floats);
  b.rank = static_cast<int>(blockIdx.z);
  b.image = static_cast<int>(blockIdx.y);
  [[maybe_unused]] const int ranks = p.ranks;  // (clusters: compute capability 9.0)
  {
    const float* table = reinterpret_cast<const float*>(p.layers);
    float* to = reinterpret_cast<float*>(smem);
    for (int i = threadIdx.x * 4; i < p.table_floats; i += kSeqThreads * 4) cp_async_16(to + i, table + i, true);
    const float* src = p.packed + static_cast<long long>(b.rank) * p.staged_floats;
    for (int i = threadIdx.x * 4; i < p.staged_floats; i += kSeqThreads * 4) cp_async_16(b.weights + i, src + i, true);
  }
  cp_async_commit();
#if !CNNRT_ARCH_BELOW(900)
  if (ranks > 1 && threadIdx.x == 0) {
    for (int k = 0; k + 1 < p.n_layers; ++k) chain_detail::mbarrier_init(b.ready + k, 1);
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
    const float* x = in.x + static_cast<long long>(b.image) * in.image;
    float* staged = b.act + in.base;
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
  if (ranks > 1) asm volatile("barrier.cluster.wait.acquire;" ::: "memory");
#endif
  trace_point(p.trace, 3);
  return b;
}

// Layer k of the block's image (`last`: the program's last, which writes the output): its share of the outputs,
// sent to the other ranks, and the wait for theirs.
__device__ __forceinline__ void seq_layer(const SeqLayer& l, int k, bool last, const SeqParams& p, const SeqBlock& b) {
  const float* in = b.act + l.in_base;
  float* y = last ? p.y + static_cast<long long>(b.image) * p.out_image : nullptr;
  const Sink sink{l, b.act, b.act + l.out_base, y};
  const int c_lo = min(l.OC, b.rank * l.cb), c_hi = min(l.OC, c_lo + l.cb);
  switch (l.kind) {
    case NetOpKind::Conv:
      run_conv(l, in, b.weights, b.taps, b.partials, sink, c_lo, c_hi,
               p.trace ? p.trace + 4 + 3 * p.n_layers + 2 * k : nullptr);
      break;
    case NetOpKind::Pool: run_pool(l, in, sink, c_lo, c_hi); break;
    case NetOpKind::GlobalPool: run_global_pool(l, in, sink, c_lo, c_hi); break;
    case NetOpKind::Binary: run_binary(l, in, sink, c_lo, c_hi); break;
    case NetOpKind::Permute: run_permute(l, in, b.taps + l.t_at, sink, c_lo, c_hi); break;
    default: run_affine(l, in, sink, c_lo, c_hi); break;
  }
  sink.zero_halo(c_lo, c_hi);
  trace_point(p.trace, 4 + 3 * k);
  if (last) return;
  // The layer's outputs in every rank before the next layer (a local layer's in this rank only). Where a layer's
  // shares go no rank still reads (build_seqnet): every rank has sent the last shared layer before it, after its
  // own reads.
  __syncthreads();
#if !CNNRT_ARCH_BELOW(900)
  const bool shared = p.ranks > 1 && !l.local;
  if (shared) {
    sink.share(c_lo, c_hi, b.rank, p.ranks, b.ready + k);
    if (threadIdx.x == 0) {
      // The mbarrier's one arrival, expecting the bytes of the other ranks' channels (some may have arrived
      // already: the phase cannot complete before the arrival).
      const int own = c_hi - c_lo;
      chain_detail::mbarrier_arrive_expect_tx(b.ready + k, static_cast<uint32_t>((l.OC - own) * l.out_cs * 4));
    }
  }
#endif
  trace_point(p.trace, 5 + 3 * k);
#if !CNNRT_ARCH_BELOW(900)
  if (shared) chain_detail::mbarrier_wait_parity0(b.ready + k);
#endif
  trace_point(p.trace, 6 + 3 * k);
}

}  // namespace cnnrt::kernels::seq_detail
