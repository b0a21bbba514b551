// The network kernel (net.cuh): one cluster an image runs a table of layers in order.
#include <cooperative_groups.h>

#include <algorithm>
#include <stdexcept>

#include "kernels/conv_device.cuh"
#include "kernels/cp_async.cuh"
#include "kernels/launch.cuh"
#include "kernels/net.cuh"
#include "kernels/row_reduce.cuh"
#include "kernels/smem_optin.cuh"

namespace cnnrt::kernels {

namespace cg = cooperative_groups;

namespace {

struct NetParams {
  const NetOp* ops;
  int n_ops;
  int table_floats;  // the op table's share of shared memory; the staging follows
  unsigned long long* trace;  // null, or the phases' times of block 0 (net_lab): 6 an op
  float* tensors[kNetMaxTensors];
};

// A pointwise layer's staged weight rows: an odd number of floats apart, so that the lanes of a warp reading one
// channel of 32 filters hit 32 banks.
__host__ __device__ __forceinline__ int pointwise_row(int channels) { return channels | 1; }

// The device code is built for compute capability 9.0 and up only (clusters): below, the kernel is empty and
// net_variants never offers it.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900

// The activation, one copy of its code for every op that applies one (param_activate inlined at each would
// repeat its switch and transcendental paths).
__device__ __noinline__ float net_activate(float v, ParamAct act, float alpha, float beta) {
  return act == ParamAct::None ? v : param_activate(v, act, alpha, beta);
}

// Combines `v` over the `lanes` lanes of a group (a power of two, aligned within the warp), in a fixed order.
template <class Combine>
__device__ __forceinline__ float group_allreduce(float v, int lanes, Combine combine) {
  for (int s = lanes >> 1; s > 0; s >>= 1) v = combine(v, shuffle_xor(v, s));
  return v;
}
__device__ __forceinline__ float group_sum(float v, int lanes) {
  return group_allreduce(v, lanes, [](float a, float b) { return a + b; });
}

// The lab's trace (net_lab): block 0's first thread records the global timer at `phase` of op `k`.
__device__ __forceinline__ void trace_point(unsigned long long* trace, int k, int phase) {
  if (trace && blockIdx.y == 0 && blockIdx.z == 0 && threadIdx.x == 0) {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    trace[k * 6 + phase] = t;
  }
}

// The block's share of a convolution: filters [f_lo, f_hi) and the input channels of their groups [c_lo, c_hi).
struct ConvShare {
  int f_lo, f_hi, c_lo, c_hi;
  __device__ ConvShare(const NetOp& op, int rank) {
    const ConvGeometry& g = op.g;
    const int cg = g.C / g.groups, fg = g.F / g.groups;
    f_lo = min(g.F, rank * op.fb);
    f_hi = min(g.F, f_lo + op.fb);
    c_lo = f_hi > f_lo ? (f_lo / fg) * cg : 0;
    c_hi = f_hi > f_lo ? ((f_hi - 1) / fg + 1) * cg : 0;
  }
};

// `rows` rows of `n` floats from `src` (contiguous) into shared rows `stride` floats apart.
__device__ __forceinline__ void stage_rows(float* dst, const float* src, int rows, int n, int stride) {
  for (int i = threadIdx.x; i < rows * n; i += kNetThreads) {
    const int row = i / n;
    cp_async_4(dst + row * stride + (i - row * n), src + i, true);
  }
}

// The weights a block stages for its filters (constants: issued before the barrier).
__device__ void stage_conv_weights(const NetOp& op, int rank, float* sw) {
  const ConvShare sh(op, rank);
  if (sh.f_hi <= sh.f_lo) return;
  const ConvGeometry& g = op.g;
  const int per_filter = g.C / g.groups * g.KH * g.KW;
  if (op.pointwise) {
    stage_rows(sw, op.w + static_cast<size_t>(sh.f_lo) * g.C, sh.f_hi - sh.f_lo, g.C, pointwise_row(g.C));
  } else {
    cp_async_floats<kNetThreads>(sw, op.w + static_cast<size_t>(sh.f_lo) * per_filter,
                                 (sh.f_hi - sh.f_lo) * per_filter);
  }
  cp_async_commit();
}

// Outputs are handed out a group of `lanes` threads each, whole warps at a time, so that every lane of a warp runs
// the same iterations (the shuffles need the whole warp): over the block (threads = kNetThreads, t = threadIdx.x) or
// over the cluster.
struct Groups {
  int lanes, lane, first, step, slot;
  __device__ Groups(int lanes_, int t, int threads) : lanes(lanes_) {
    lane = t & (lanes - 1);
    const int per_warp = 32 / lanes;
    first = (t >> 5) * per_warp;
    step = (threads >> 5) * per_warp;
    slot = (t & 31) / lanes;
  }
};

template <int RP>
__device__ void pointwise_sums(const NetOp& op, const ConvShare& sh, const float* sx, const float* sw, const float* r,
                               float* y) {
  const int P = op.g.OH * op.g.OW, C = op.g.C;
  const int nf = sh.f_hi - sh.f_lo;
  const int blocks = (P + RP - 1) / RP, items = nf * blocks;
  const Groups grp(op.lanes, threadIdx.x, kNetThreads);
  for (int base = grp.first; base < items; base += grp.step) {
    const int item = base + grp.slot;
    const bool valid = item < items;
    // Adjacent items: adjacent filters at the same pixels (their inputs one broadcast read for the warp).
    const int pb = valid ? item / nf : 0;
    const int fl = valid ? item - pb * nf : 0;
    const int p0 = pb * RP;
    float acc[RP];
#pragma unroll
    for (int j = 0; j < RP; ++j) acc[j] = 0.0f;
    if (valid) {
      const float* wr = sw + fl * pointwise_row(C);
      int at[RP];
#pragma unroll
      for (int j = 0; j < RP; ++j) at[j] = min(p0 + j, P - 1);
#pragma unroll 2
      for (int c = grp.lane; c < C; c += grp.lanes) {
        const float w = wr[c];
        const float* xc = sx + c * P;
#pragma unroll
        for (int j = 0; j < RP; ++j) acc[j] = fmaf(w, xc[at[j]], acc[j]);
      }
    }
#pragma unroll
    for (int j = 0; j < RP; ++j) acc[j] = group_sum(acc[j], grp.lanes);
    if (valid && grp.lane == 0) {
      const int f = sh.f_lo + fl;
      const float b = op.bias ? __ldg(op.bias + f) : 0.0f;
#pragma unroll
      for (int j = 0; j < RP; ++j) {
        const int p = p0 + j;
        if (p < P) {
          float v = acc[j] + b;
          if (r) v += r[f * P + p];
          y[f * P + p] = net_activate(v, op.act, op.alpha, op.beta);
        }
      }
    }
  }
}

__device__ void run_conv(const NetOp& op, float* const* tensors, int image, int rank, float* sx, const float* sw,
                         unsigned long long* trace, int k) {
  const ConvGeometry& g = op.g;
  const ConvShare sh(op, rank);
  const float* x = tensors[op.in0] + static_cast<size_t>(image) * op.in0_stride;
  const float* r = op.in1 >= 0 ? tensors[op.in1] + static_cast<size_t>(image) * op.in1_stride : nullptr;
  float* y = tensors[op.out] + static_cast<size_t>(image) * op.out_stride;
  const int ohw = g.OH * g.OW;
  const int hw = g.H * g.W, kk = g.KH * g.KW;
  const int cg = g.C / g.groups, fg = g.F / g.groups;
  if (op.stage) {
    if (sh.f_hi > sh.f_lo) {
      cp_async_floats<kNetThreads>(sx, x + static_cast<size_t>(sh.c_lo) * hw, (sh.c_hi - sh.c_lo) * hw);
    }
    trace_point(trace, k, 4);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    trace_point(trace, k, 5);
    if (sh.f_hi <= sh.f_lo) return;
    if (op.pointwise) {
      switch (op.rp) {
        case 1: pointwise_sums<1>(op, sh, sx, sw, r, y); break;
        default: pointwise_sums<4>(op, sh, sx, sw, r, y); break;
      }
      return;
    }
  }
  if (sh.f_hi <= sh.f_lo) return;
  // Staged: x's channels from c_lo and the filters from f_lo in shared memory; else both in global memory.
  const float* xs = op.stage ? sx - static_cast<ptrdiff_t>(sh.c_lo) * hw : x;
  const float* ws = op.stage ? sw - static_cast<ptrdiff_t>(sh.f_lo) * cg * kk : op.w;
  const int o_lo = sh.f_lo * ohw, total = (sh.f_hi - sh.f_lo) * ohw;
  const Groups grp(op.lanes, threadIdx.x, kNetThreads);
  for (int base = grp.first; base < total; base += grp.step) {
    const int o = o_lo + base + grp.slot;
    const bool valid = base + grp.slot < total;
    float acc = 0.0f;
    int f = 0;
    if (valid) {
      f = o / ohw;
      const int p = o - f * ohw;
      const int oy = p / g.OW, ox = p - oy * g.OW;
      const float* xg = xs + static_cast<size_t>(f / fg) * cg * hw;
      const float* wf = ws + static_cast<size_t>(f) * cg * kk;
      const int iy0 = oy * g.stride_h - g.pad_top, ix0 = ox * g.stride_w - g.pad_left;
      for (int c = grp.lane; c < cg; c += grp.lanes) {
        const float* xc = xg + static_cast<size_t>(c) * hw;
        const float* wc = wf + c * kk;
        for (int kh = 0; kh < g.KH; ++kh) {
          const int iy = iy0 + kh * g.dil_h;
          if (static_cast<unsigned>(iy) >= static_cast<unsigned>(g.H)) continue;
          const float* xr = xc + iy * g.W;
          const float* wr = wc + kh * g.KW;
          for (int kw = 0; kw < g.KW; ++kw) {
            const int ix = ix0 + kw * g.dil_w;
            if (static_cast<unsigned>(ix) < static_cast<unsigned>(g.W)) acc = fmaf(xr[ix], wr[kw], acc);
          }
        }
      }
    }
    acc = group_sum(acc, grp.lanes);
    if (valid && grp.lane == 0) {
      if (op.bias) acc += __ldg(op.bias + f);
      if (r) acc += r[o];
      y[o] = net_activate(acc, op.act, op.alpha, op.beta);
    }
  }
}

__device__ void run_pool(const NetOp& op, float* const* tensors, int image, int t, int threads) {
  const ConvGeometry& g = op.g;
  const PoolGeometry& p = op.pool;
  const float* x = tensors[op.in0] + static_cast<size_t>(image) * op.in0_stride;
  float* y = tensors[op.out] + static_cast<size_t>(image) * op.out_stride;
  const int ohw = g.OH * g.OW, total = g.C * ohw;
  for (int o = t; o < total; o += threads) {
    const int c = o / ohw;
    const int q = o - c * ohw;
    const int py = q / g.OW, px = q - py * g.OW;
    const float* xc = x + static_cast<size_t>(c) * g.H * g.W;
    y[o] = pool_window(p, py, px, g.H, g.W, [&](int iy, int ix) { return xc[iy * g.W + ix]; });
  }
}

__device__ void run_global_pool(const NetOp& op, float* const* tensors, int image, int t, int threads) {
  const ConvGeometry& g = op.g;
  const float* x = tensors[op.in0] + static_cast<size_t>(image) * op.in0_stride;
  float* y = tensors[op.out] + static_cast<size_t>(image) * op.out_stride;
  const int hw = g.H * g.W;
  const bool max = op.pool.kind == FusedPool::Max;
  const Groups grp(op.lanes, t, threads);
  for (int base = grp.first; base < g.C; base += grp.step) {
    const int c = base + grp.slot;
    float v = max ? -INFINITY : 0.0f;
    if (c < g.C) {
      const float* xc = x + static_cast<size_t>(c) * hw;
#pragma unroll 4
      for (int i = grp.lane; i < hw; i += grp.lanes) v = max ? fmaxf(v, xc[i]) : v + xc[i];
    }
    v = max ? group_allreduce(v, grp.lanes, [](float a, float b) { return fmaxf(a, b); }) : group_sum(v, grp.lanes);
    if (c < g.C && grp.lane == 0) y[c] = max ? v : v / static_cast<float>(hw);
  }
}

// The offsets of output element `o` of `dims` in two operands read through strides `sa` and `sb`.
__device__ __forceinline__ void strided_offsets(const NetOp& op, int o, int& a, int& b) {
  a = 0;
  b = 0;
  for (int d = op.rank - 1; d >= 0; --d) {
    const int i = o % op.dims[d];
    o /= op.dims[d];
    a += i * op.sa[d];
    b += i * op.sb[d];
  }
}

__device__ void run_binary(const NetOp& op, float* const* tensors, int image, int t, int threads) {
  const float* a = tensors[op.in0] + static_cast<size_t>(image) * op.in0_stride;
  const float* b = tensors[op.in1] + static_cast<size_t>(image) * op.in1_stride;
  float* y = tensors[op.out] + static_cast<size_t>(image) * op.out_stride;
  for (int o = t; o < op.count; o += threads) {
    int ia, ib;
    strided_offsets(op, o, ia, ib);
    y[o] = apply_binary(op.binary, a[ia], b[ib]);
  }
}

__device__ void run_affine(const NetOp& op, float* const* tensors, int image, int t, int threads) {
  const float* x = tensors[op.in0] + static_cast<size_t>(image) * op.in0_stride;
  float* y = tensors[op.out] + static_cast<size_t>(image) * op.out_stride;
  for (int o = t; o < op.count; o += threads) {
    const int c = o / op.inner;
    float v = x[o];
    if (op.w) v *= __ldg(op.w + c);
    if (op.bias) v += __ldg(op.bias + c);
    y[o] = net_activate(v, op.act, op.alpha, op.beta);
  }
}

__device__ void run_copy(const NetOp& op, float* const* tensors, int image, int t, int threads) {
  const float* x = tensors[op.in0] + static_cast<size_t>(image) * op.in0_stride;
  float* y = tensors[op.out] + static_cast<size_t>(image) * op.out_stride + op.out_offset;
  for (int o = t; o < op.count; o += threads) y[o] = x[o];
}

__device__ void run_permute(const NetOp& op, float* const* tensors, int image, int t, int threads) {
  const float* x = tensors[op.in0] + static_cast<size_t>(image) * op.in0_stride;
  float* y = tensors[op.out] + static_cast<size_t>(image) * op.out_stride;
  for (int o = t; o < op.count; o += threads) {
    int ia, ib;
    strided_offsets(op, o, ia, ib);
    y[o] = x[ia];
  }
}

#endif  // !__CUDA_ARCH__ || __CUDA_ARCH__ >= 900

__global__ void __launch_bounds__(kNetThreads) net_kernel(const __grid_constant__ NetParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(16) unsigned char smem[];
  NetOp* ops = reinterpret_cast<NetOp*>(smem);
  // The op table is a constant of the plan: staged before the wait, under the tail of the grid before.
  {
    const int4* from = reinterpret_cast<const int4*>(p.ops);
    int4* to = reinterpret_cast<int4*>(smem);
    const int n = static_cast<int>(p.n_ops * sizeof(NetOp) / sizeof(int4));
    for (int i = threadIdx.x; i < n; i += blockDim.x) to[i] = __ldg(from + i);
  }
  __syncthreads();
  float* sx = reinterpret_cast<float*>(smem) + p.table_floats;
  const int rank = static_cast<int>(blockIdx.z);
  const int image = static_cast<int>(blockIdx.y);
  const int threads = static_cast<int>(gridDim.z * blockDim.x);
  const int t = rank * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x);
  float* const* tensors = p.tensors;
  for (int k = 0; k < p.n_ops; ++k) {
    const NetOp& op = ops[k];
    float* sw = sx + op.w_at;
    trace_point(p.trace, k, 0);
    if (op.kind == NetOpKind::Conv && op.stage) stage_conv_weights(op, rank, sw);
    if (k == 0) {
      wait_for_prior_grid();
    } else if (op.barrier) {
      cg::this_cluster().sync();  // the ops before done in every block, their writes visible
    }
    trace_point(p.trace, k, 1);
    switch (op.kind) {
      case NetOpKind::Conv: run_conv(op, tensors, image, rank, sx, sw, p.trace, k); break;
      case NetOpKind::Pool: run_pool(op, tensors, image, t, threads); break;
      case NetOpKind::GlobalPool: run_global_pool(op, tensors, image, t, threads); break;
      case NetOpKind::Binary: run_binary(op, tensors, image, t, threads); break;
      case NetOpKind::Affine: run_affine(op, tensors, image, t, threads); break;
      case NetOpKind::Copy: run_copy(op, tensors, image, t, threads); break;
      case NetOpKind::Permute: run_permute(op, tensors, image, t, threads); break;
    }
    trace_point(p.trace, k, 2);
    __syncthreads();  // the staging buffers are free for the next op
    trace_point(p.trace, k, 3);
  }
#endif
}

static_assert(sizeof(NetOp) % sizeof(int4) == 0);

}  // namespace

std::vector<NetVariant> net_variants(int arch, int max_cluster) {
  std::vector<NetVariant> out;
  if (arch < 90) return out;
  for (int ranks : {16, 8}) {  // (clusters of 4 lost every zoo network to 8 and 16: too few threads an image)
    if (ranks <= max_cluster) out.push_back({"net_cl" + std::to_string(ranks), ranks});
  }
  return out;
}

std::vector<std::string> net_variant_names() {
  std::vector<std::string> names;
  for (const NetVariant& v : net_variants(90)) names.push_back(v.name);
  return names;
}

NetStaging net_conv_staging(const NetOp& op, int ranks) {
  const ConvGeometry& g = op.g;
  const int cg = g.C / g.groups, fg = g.F / g.groups, kk = g.KH * g.KW;
  NetStaging s;
  for (int r = 0; r < ranks; ++r) {
    const int f_lo = std::min(g.F, r * op.fb), f_hi = std::min(g.F, f_lo + op.fb);
    if (f_hi <= f_lo) continue;
    const int channels = ((f_hi - 1) / fg + 1 - f_lo / fg) * cg;
    s.x_floats = std::max(s.x_floats, channels * g.H * g.W);
    s.w_floats = std::max(s.w_floats, (f_hi - f_lo) * (op.pointwise ? pointwise_row(g.C) : cg * kk));
  }
  s.x_floats = (s.x_floats + 3) / 4 * 4;
  return s;
}

NetStaging configure_net_conv(NetOp& op, int ranks, int budget_floats) {
  const ConvGeometry& g = op.g;
  const int cg = g.C / g.groups;
  op.fb = (g.F + ranks - 1) / ranks;
  op.pointwise = g.KH == 1 && g.KW == 1 && g.stride_h == 1 && g.stride_w == 1 && g.pad_top == 0 && g.pad_left == 0 &&
                 g.pad_bottom == 0 && g.pad_right == 0 && g.groups == 1 && g.OH == g.H && g.OW == g.W;
  NetStaging s = net_conv_staging(op, ranks);
  op.stage = s.total() <= budget_floats ? 1 : 0;
  op.w_at = s.x_floats;
  if (!op.stage) {
    op.pointwise = 0;
    s = NetStaging{};
  }
  const int P = g.OH * g.OW;
  op.lanes = 1;
  if (op.pointwise) {
    op.rp = P >= 4 ? 4 : 1;
    const int items = op.fb * ((P + op.rp - 1) / op.rp);
    while (op.lanes < 32 && items * op.lanes * 2 <= kNetThreads && op.lanes * 2 <= g.C) op.lanes *= 2;
  } else {
    const int outputs = op.fb * P;
    while (op.lanes < 32 && outputs * op.lanes * 2 <= kNetThreads && op.lanes * 2 <= cg) op.lanes *= 2;
  }
  return s;
}

int net_staging_floats(int n_ops, int smem_optin_bytes) {
  const int table = n_ops * static_cast<int>(sizeof(NetOp));
  return std::max(0, (smem_optin_bytes - table - 1024) / static_cast<int>(sizeof(float)) / 4 * 4);
}

void launch_net(const NetVariant& v, const NetOp* ops, int n_ops, const float* const* tensors, int n_tensors, int batch,
                int staging_floats, cudaStream_t stream, unsigned long long* trace) {
  if (n_tensors > kNetMaxTensors || n_ops > kNetMaxOps || n_ops < 1 || batch < 1 || batch > 65535) {
    throw std::invalid_argument("launch_net: " + std::to_string(n_ops) + " ops over " + std::to_string(n_tensors) +
                                " tensors, batch " + std::to_string(batch) + ": beyond the kernel's limits");
  }
  NetParams p{};
  p.ops = ops;
  p.n_ops = n_ops;
  p.trace = trace;
  p.table_floats = n_ops * static_cast<int>(sizeof(NetOp) / sizeof(float));
  for (int i = 0; i < n_tensors; ++i) p.tensors[i] = const_cast<float*>(tensors[i]);
  const size_t smem = (static_cast<size_t>(p.table_floats) + staging_floats) * sizeof(float);
  allow_all_dynamic_smem<net_kernel>();  // (the table and the staging may take all a block can have)
  if (v.ranks > 8) allow_large_clusters<net_kernel>();
  launch_overlapped(net_kernel, dim3(1, static_cast<unsigned>(batch), static_cast<unsigned>(v.ranks)), dim3(kNetThreads),
                    smem, stream, static_cast<unsigned>(v.ranks), p);
}

}  // namespace cnnrt::kernels
