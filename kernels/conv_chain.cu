// The LeNet-class chain kernel (see conv_chain.cuh for the plan of one launch).
#include <cooperative_groups.h>
#include <fmt/format.h>

#include <algorithm>

#include "kernels/conv_chain.cuh"
#include "kernels/conv_device.cuh"
#include "kernels/conv_tile.cuh"
#include "kernels/cp_async.cuh"
#include "kernels/launch.cuh"

namespace cnnrt::kernels {

namespace cg = cooperative_groups;

// Phase timestamps for kernels/lab/chain_trace.cu, which compiles this file with CNNRT_CHAIN_TRACE defined:
// thread 0 of each block records clock64() at the end of each phase into g_chain_trace[block][phase].
// In the engine the stamps compile to nothing.
#ifdef CNNRT_CHAIN_TRACE
constexpr int kChainTracePhases = 12;
__device__ long long* g_chain_trace = nullptr;
#define CHAIN_STAMP(phase)                                                                                       \
  do {                                                                                                          \
    if (threadIdx.x == 0 && g_chain_trace) {                                                                    \
      g_chain_trace[(static_cast<int64_t>(blockIdx.x) * gridDim.z + blockIdx.z) * kChainTracePhases + (phase)] = \
          clock64();                                                                                            \
    }                                                                                                           \
  } while (0)
#else
#define CHAIN_STAMP(phase) \
  do {                     \
  } while (0)
#endif

namespace {

// Cluster sizes tried, portable ones first (16 is H100's largest, non-portable, cluster).
constexpr int kChainRanks[] = {8, 16, 4, 2, 1};
constexpr int kMaxChainSmemBytes = 160 * 1024;  // what a variant may stage (opted in once per kernel)

// `p` (this block's shared memory) as seen in rank `q`'s shared memory.
__device__ __forceinline__ float* in_rank(float* p, int q, int ranks) {
  return ranks == 1 ? p : cg::this_cluster().map_shared_rank(p, q);
}

// Block and cluster barriers, in PTX's non-aligned forms: a warp may reach them with its threads diverged
// (the aligned forms, __syncthreads' bar.sync and barrier.cluster.*.aligned, require every thread of a warp
// to execute the same barrier instruction together; compute-sanitizer's synccheck reported "Divergent
// thread(s) in warp" at the first block barrier after a cluster barrier with them, in every arrangement of
// the loops tried). The memory ordering is the same: the block barrier orders shared-memory accesses like
// __syncthreads, the cluster barrier releases on arrive and acquires on wait.
__device__ __forceinline__ void block_barrier() { asm volatile("barrier.sync 0;" ::: "memory"); }

__device__ __forceinline__ void cluster_barrier(int ranks) {
  if (ranks > 1) {
    asm volatile("barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;" ::: "memory");
  } else {
    block_barrier();
  }
}

// The cluster barrier split in two, so that work independent of the other ranks runs between: arrive
// publishes this thread's earlier writes, wait returns once every thread of the cluster has arrived.
__device__ __forceinline__ void cluster_arrive(int ranks) {
  if (ranks > 1) asm volatile("barrier.cluster.arrive.release;" ::: "memory");
}

__device__ __forceinline__ void cluster_wait(int ranks) {
  if (ranks > 1) asm volatile("barrier.cluster.wait.acquire;" ::: "memory");
}

// An mbarrier in shared memory: initialised by one thread (arrival count `count`), the initialisation
// published to the cluster by fence_mbarrier_init and a cluster barrier.
__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbarrier_init(uint64_t* bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_address(bar)), "r"(count) : "memory");
}

__device__ __forceinline__ void fence_mbarrier_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }

// One arrival, and `bytes` more expected from asynchronous stores before the phase completes.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_address(bar)), "r"(bytes) : "memory");
}

// Waits until the mbarrier's first phase has completed (its writes then visible to this thread).
__device__ __forceinline__ void mbarrier_wait_parity0(uint64_t* bar) {
  uint32_t done = 0;
  while (!done) {
    asm volatile(
        "{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n\tselp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(done)
        : "r"(shared_address(bar))
        : "memory");
  }
}

// `v` into rank `rank`'s copy of the shared-memory float `p` (this block's address of it), counted as 4 bytes
// by that rank's copy of the mbarrier `bar`: an asynchronous store that needs no barrier to be seen there.
__device__ __forceinline__ void store_async(float* p, float v, int rank, uint64_t* bar) {
  uint32_t remote_p, remote_bar;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote_p) : "r"(shared_address(p)), "r"(rank));
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote_bar) : "r"(shared_address(bar)), "r"(rank));
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [%0], %1, [%2];" ::"r"(remote_p), "f"(v),
               "r"(remote_bar)
               : "memory");
}

// for_block_items (conv_tile.cuh) over this kernel's kChainThreads threads.
template <class F>
__device__ __forceinline__ void for_items(int n, F&& f) {
  for_block_items(n, kChainThreads, static_cast<F&&>(f));
}

// acc[k] += the K x K window at column k of `in` (row pitch `pitch`) times `w` ([K][K]), k < SEG: one channel
// of SEG adjacent outputs of a row, each input row loaded once into registers and reused across its K taps.
template <int K, int SEG>
__device__ __forceinline__ void accumulate_row_segment(float (&acc)[SEG], const float* in, int pitch, const float* w) {
#pragma unroll
  for (int i = 0; i < K; ++i) {
    float row[SEG + K - 1];
#pragma unroll
    for (int k = 0; k < SEG + K - 1; ++k) row[k] = in[i * pitch + k];
#pragma unroll
    for (int j = 0; j < K; ++j) {
      const float wv = w[i * K + j];
#pragma unroll
      for (int k = 0; k < SEG; ++k) acc[k] = fmaf(row[k + j], wv, acc[k]);
    }
  }
}

template <int KA, int KB>
__global__ void __launch_bounds__(kChainThreads)
    conv_chain_kernel(const float* __restrict__ x, float* __restrict__ y, const __grid_constant__ ConvChainDesc d,
                      const __grid_constant__ ChainLayout L) {
  extern __shared__ float smem[];
  __shared__ uint64_t b_input_ready;  // completes when every rank's pooled values of A are in this rank's B input
  CHAIN_STAMP(0);
  constexpr int T = kChainThreads, SEG = kChainSeg, SEG_A = kChainSegA;
  const ChainConv& A = d.a;
  const ChainConv& B = d.b;
  const int tid = threadIdx.x;
  const int image = blockIdx.x;
  const int rank = blockIdx.z;  // the cluster spans z: blockIdx.z is the block's rank in it
  const int R = L.ranks;
  float* img = smem + L.img;
  float* wa = smem + L.wa;
  float* ba = smem + L.ba;
  float* src = smem + L.src;
  float* map_a = smem + L.map_a;
  float* wb = smem + L.wb;
  float* bb = smem + L.bb;
  float* part = smem + L.part;
  float* feat = smem + L.feat;
  float* wfc = smem + L.wfc;
  float* bfc = smem + L.bfc;
  float* fc_part = smem + L.fc_part;
  const int P = B.PH() * B.PW();  // pooled outputs per B filter
  const int slice = L.fb * P;     // this rank's features: [rank * slice, (rank + 1) * slice) of the flattened B output

  // 0. Weights. No kernel writes them, so they may stream in while the prior grid still runs.
  const int warp = tid / 32, lane = tid % 32;
  constexpr int kWarps = T / 32;
  for_items(A.F * KA * KA, [&](int i) { cp_async_4(wa + i, A.weights + i, true); });
  for_items(A.F, [&](int i) { cp_async_4(ba + i, A.bias ? A.bias + i : A.weights, A.bias != nullptr); });
  const int wb_count = L.fb * B.C * KB * KB;
  for_items(wb_count, [&](int i) { cp_async_4(wb + i, B.weights + rank * wb_count + i, true); });
  for_items(L.fb, [&](int i) { cp_async_4(bb + i, B.bias ? B.bias + rank * L.fb + i : B.weights, B.bias != nullptr); });
  const int features = B.F * P;
  for_items(d.fc.N * slice, [&](int i) {
    const int n = L.by_slice.div(i), j = i - n * slice;
    cp_async_4(wfc + i, d.fc.weights + static_cast<int64_t>(n) * features + rank * slice + j, true);
  });
  for_items(d.fc.N, [&](int i) { cp_async_4(bfc + i, d.fc.bias ? d.fc.bias + i : d.fc.weights, d.fc.bias != nullptr); });
  cp_async_commit();
  // B's input starts as zeros (its padding); the barrier below orders this before any rank's stores into it.
  for_items(L.src_floats / 4, [&](int i) { reinterpret_cast<float4*>(src)[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f); });
  // This rank's B input is zeroed and its mbarrier set up (waited for below, before any rank stores into
  // it). Before the image's copies are issued: arriving after them only moved the release's wait for the
  // copies in flight into the image phase (chain_trace, round 6: 1.40 + 1.39 us against 1.94 + 0.94 us).
  if (R > 1 && tid == 0) {  // (st.async needs a cluster of 2 or more blocks: one block stores plainly)
    mbarrier_init(&b_input_ready, 1);
    fence_mbarrier_init();
    // One arrival (this one) and the bytes every rank's pushes bring (each pooled value of A, once).
    mbarrier_arrive_expect_tx(&b_input_ready, static_cast<uint32_t>(A.F * A.PH() * A.PW()) * 4u);
  }
  cluster_arrive(R);
  CHAIN_STAMP(1);

  // The image, zero-padded (it may be the prior grid's output).
  wait_for_prior_grid();
  CHAIN_STAMP(2);
  stage_plane_tile(img, L.img_w, L.img_h, x + static_cast<int64_t>(image) * A.H * A.W, A.H, A.W, -A.pad_top,
                   -A.pad_left, T);  // also waits for the weights' copies (this thread's)
  block_barrier();   // the image, for every thread of this block
  cluster_wait(R);   // every rank has started and zeroed its B input before any rank stores into it
  CHAIN_STAMP(3);

  // 1. A's pooled rows (channel, pooled row), split evenly across the ranks. First the conv rows under each
  // pooling window row, SEG_A outputs per thread, activated, into map_a; then the pooling, each value stored
  // into every rank's copy of B's input.
  const int PHa = A.PH(), PWa = A.PW();
  const bool pool_a = A.pool.kind != FusedPool::None;
  const int win_rows = pool_a ? A.pool.kh : 1;
  const int map_w = L.segs_a * SEG_A;
  const int row0 = rank * L.rows_a;
  const int rows = max(0, min(A.F * PHa, row0 + L.rows_a) - row0);
  // map_a holds, for pooled row j, the conv rows y0 + [0, span_a) of its window (y0 its first), those at
  // the window's dilation steps filled.
  for_items(rows * win_rows * L.segs_a, [&](int item) {
    const int t = L.by_segs_a.div(item), s = item - t * L.segs_a;
    const int j = L.by_win_rows.div(t), i = t - j * win_rows;
    const int c = L.by_pha.div(row0 + j), py = row0 + j - c * PHa;
    const int oy = pool_a ? py * A.pool.sh - A.pool.pad_top + i * A.pool.dil_h : py;
    if (oy < 0 || oy >= A.OH) return;  // a padded window row: the pooling skips it
    const float* w = wa + c * KA * KA;
    float acc[SEG_A];
#pragma unroll
    for (int k = 0; k < SEG_A; ++k) acc[k] = ba[c];
    accumulate_row_segment<KA>(acc, img + oy * L.img_w + s * SEG_A, L.img_w, w);
    float* out = map_a + (j * L.span_a + i * A.pool.dil_h) * map_w + s * SEG_A;
#pragma unroll
    for (int k = 0; k < SEG_A; ++k) out[k] = param_activate(acc[k], A.act, A.alpha, A.beta);
  });
  block_barrier();
  CHAIN_STAMP(4);
  // One thread per pooled value, stored into every rank (starting at this rank's successor, so the ranks do
  // not all store into rank 0 first); the stores do not wait on each other. (Spreading the destinations over
  // more threads, each value pooled once per destination, measured slower: 3.6 us against 2.2 us.)
  for_items(rows * PWa, [&](int k) {
    const int j = L.by_pwa.div(k), px = k - j * PWa;
    const int c = L.by_pha.div(row0 + j), py = row0 + j - c * PHa;
    const float* map = map_a + j * L.span_a * map_w;
    float v;
    if (pool_a) {
      const int y0 = py * A.pool.sh - A.pool.pad_top;
      v = pool_window(A.pool, py, px, A.OH, A.OW, [&](int yy, int xx) { return map[(yy - y0) * map_w + xx]; });
    } else {
      v = map[px];
    }
    const int at = (c * L.src_h + py + B.pad_top) * L.src_w + px + B.pad_left;
    if (R == 1) {
      src[at] = v;
    } else {
      for (int q = rank + 1, n = 0; n < R; ++n, ++q) store_async(src + at, v, q < R ? q : q - R, &b_input_ready);
    }
  });
  // B's input complete here: every value has landed (the mbarrier counts the bytes), without a cluster
  // barrier's release round trip.
  if (R > 1) {
    mbarrier_wait_parity0(&b_input_ready);
  } else {
    block_barrier();
  }
  CHAIN_STAMP(5);

  // 2. B's filters of this rank: partial sums per channel group, SEG outputs of one row per thread.
  for_items(L.fb * L.groups * B.OH * L.segs, [&](int item) {
    const int t = L.by_segs.div(item), s = item - t * L.segs;
    const int t2 = L.by_ohb.div(t), oy = t - t2 * B.OH;
    const int f = L.by_groups.div(t2), g = t2 - f * L.groups;
    float acc[SEG] = {};
    const int c_end = min(B.C, (g + 1) * L.group_channels);
    for (int c = g * L.group_channels; c < c_end; ++c) {
      accumulate_row_segment<KB>(acc, src + (c * L.src_h + oy) * L.src_w + s * SEG, L.src_w, wb + (f * B.C + c) * KB * KB);
    }
    float* out = part + ((f * L.groups + g) * B.OH + oy) * B.OW;
#pragma unroll
    for (int k = 0; k < SEG; ++k) {
      if (s * SEG + k < B.OW) out[s * SEG + k] = acc[k];
    }
  });
  block_barrier();
  CHAIN_STAMP(6);
  // B's pooled outputs (this rank's features), G = 2^L.pool_lanes_log2 lanes each: a lane takes window positions
  // sub, sub + G, ..., sums the groups' partials there in group order, adds the bias and activates; the
  // pooling then combines the lanes by shuffles. Whole warps of items, so every lane joins the shuffles.
  const int G = 1 << L.pool_lanes_log2;
  const bool pool_b = B.pool.kind != FusedPool::None;
  const int plane = B.OH * B.OW;
  const int window = pool_b ? B.pool.kh * B.pool.kw : 1;
  for_items((slice * G + 31) / 32 * 32, [&](int item) {
    const int o = item >> L.pool_lanes_log2, sub = item & (G - 1);
    const int f = L.by_pb.div(o), r = o - f * P;
    const int py = L.by_pwb.div(r), px = r - py * B.PW();
    float best = -INFINITY, sum = 0.0f;
    int count = 0;
    if (o < slice) {
      const float* map = part + f * L.groups * plane;
      for (int w = sub; w < window; w += G) {
        int yy = py, xx = px;
        if (pool_b) {
          const int wy = L.by_pool_kw.div(w), wx = w - wy * B.pool.kw;
          yy = py * B.pool.sh - B.pool.pad_top + wy * B.pool.dil_h;
          xx = px * B.pool.sw - B.pool.pad_left + wx * B.pool.dil_w;
          if (yy < 0 || yy >= B.OH || xx < 0 || xx >= B.OW) continue;  // padding: the pooling skips it
        }
        float v = bb[f];
        for (int g = 0; g < L.groups; ++g) v += map[g * plane + yy * B.OW + xx];
        v = param_activate(v, B.act, B.alpha, B.beta);
        best = fmaxf(best, v);
        sum += v;
        ++count;
      }
    }
    for (int off = G / 2; off > 0; off /= 2) {
      best = fmaxf(best, __shfl_xor_sync(0xffffffffu, best, off));
      sum += __shfl_xor_sync(0xffffffffu, sum, off);
      count += __shfl_xor_sync(0xffffffffu, count, off);
    }
    if (o < slice && sub == 0) feat[o] = pool_b ? pool_finish(B.pool, py, px, B.OH, B.OW, best, sum, count) : sum;
  });
  block_barrier();
  CHAIN_STAMP(7);

  // 3. This rank's share of every dot product, one warp per output, into rank 0's shared memory.
  float* fc_part0 = in_rank(fc_part, 0, R);
  for (int n = warp; n < d.fc.N; n += kWarps) {
    float s = 0.0f;
    for (int j0 = 0; j0 < slice; j0 += 32) {
      if (j0 + lane < slice) s = fmaf(wfc[n * slice + j0 + lane], feat[j0 + lane], s);
    }
#pragma unroll
    for (int off = 16; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
    if (lane == 0) fc_part0[rank * d.fc.N + n] = s;
  }
  cluster_barrier(R);  // every partial in rank 0; after this no block touches another's shared memory
  CHAIN_STAMP(8);
  if (rank == 0) {
    // One warp per output: lane q holds rank q's partial (R <= 32), summed by a fixed shuffle tree.
    for (int n = warp; n < d.fc.N; n += kWarps) {
      float v = lane < R ? fc_part[lane * d.fc.N + n] : 0.0f;
#pragma unroll
      for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
      if (lane == 0) y[static_cast<int64_t>(image) * d.fc.N + n] = param_activate(v + bfc[n], d.fc.act, d.fc.alpha, d.fc.beta);
    }
    CHAIN_STAMP(9);
  }
}

int round4(int floats) { return (floats + 3) / 4 * 4; }

ChainLayout make_layout(const ConvChainDesc& d, int ranks) {
  const ChainConv& A = d.a;
  const ChainConv& B = d.b;
  ChainLayout L;
  L.ranks = ranks;
  L.fb = B.F / ranks;
  L.segs = (B.OW + kChainSeg - 1) / kChainSeg;
  L.segs_a = (A.OW + kChainSegA - 1) / kChainSegA;
  L.img_h = A.OH + A.K - 1;
  L.img_w = L.segs_a * kChainSegA + A.K - 1;  // whole segments: the columns past the image read zeros
  L.src_h = B.OH + B.K - 1;
  L.src_w = L.segs * kChainSeg + B.K - 1;
  L.src_w += L.src_w % 2 == 0 ? 1 : 0;  // an odd row pitch spreads a warp's rows over the banks
  const int window = B.pool.kind == FusedPool::None ? 1 : B.pool.kh * B.pool.kw;
  while ((1 << L.pool_lanes_log2) < std::min(window, 32)) ++L.pool_lanes_log2;
  // As many channel groups as keep one item per thread; at least one.
  const int per_group = L.fb * B.OH * L.segs;
  const int groups = std::clamp(kChainThreads / std::max(per_group, 1), 1, B.C);
  L.group_channels = (B.C + groups - 1) / groups;
  L.groups = (B.C + L.group_channels - 1) / L.group_channels;
  int at = 0;
  auto take = [&at](int floats) {
    const int offset = at;
    at += round4(floats);
    return offset;
  };
  L.img = take(L.img_h * L.img_w);
  L.wa = take(A.F * A.K * A.K);
  L.ba = take(A.F);
  const bool pool_a = A.pool.kind != FusedPool::None;
  L.rows_a = (A.F * A.PH() + ranks - 1) / ranks;
  L.span_a = pool_a ? (A.pool.kh - 1) * A.pool.dil_h + 1 : 1;
  L.map_a = take(L.rows_a * L.span_a * L.segs_a * kChainSegA);
  L.src_floats = round4(B.C * L.src_h * L.src_w);
  L.src = take(L.src_floats);
  L.wb = take(L.fb * B.C * B.K * B.K);
  L.bb = take(L.fb);
  L.part = take(L.fb * L.groups * B.OH * B.OW);
  L.feat = take(L.fb * B.PH() * B.PW());
  L.wfc = take(d.fc.N * L.fb * B.PH() * B.PW());
  L.bfc = take(d.fc.N);
  L.fc_part = take(ranks * d.fc.N);
  L.floats = at;
  L.by_segs_a = FastDiv(L.segs_a);
  L.by_win_rows = FastDiv(pool_a ? A.pool.kh : 1);
  L.by_pha = FastDiv(A.PH());
  L.by_pwa = FastDiv(A.PW());
  L.by_segs = FastDiv(L.segs);
  L.by_ohb = FastDiv(B.OH);
  L.by_groups = FastDiv(L.groups);
  L.by_pb = FastDiv(B.PH() * B.PW());
  L.by_pwb = FastDiv(B.PW());
  L.by_pool_kw = FastDiv(B.pool.kind == FusedPool::None ? 1 : B.pool.kw);
  L.by_slice = FastDiv(L.fb * B.PH() * B.PW());
  return L;
}

using ChainKernel = void (*)(const float*, float*, ConvChainDesc, ChainLayout);

ChainKernel chain_kernel(int ka, int kb) {
  if (ka == 3 && kb == 3) return conv_chain_kernel<3, 3>;
  if (ka == 5 && kb == 5) return conv_chain_kernel<5, 5>;
  return nullptr;
}

bool fits(const ChainLayout& L, int smem_optin_bytes) {
  return int64_t(L.floats) * 4 <= std::min(smem_optin_bytes, kMaxChainSmemBytes);
}

// Stride 1: OH = pad_top + H + pad_bottom - K + 1, so the end pads are OH + K - 1 - H - pad_top (>= 0).
bool conv_ok(const ChainConv& c) {
  return c.K >= 1 && c.OH >= 1 && c.OW >= 1 && c.pad_top >= 0 && c.pad_left >= 0 && c.OH + c.K - 1 >= c.H + c.pad_top &&
         c.OW + c.K - 1 >= c.W + c.pad_left && c.PH() >= 1 && c.PW() >= 1;
}

}  // namespace

bool conv_chain_supports(const ConvChainDesc& d, int smem_optin_bytes, std::string* why) {
  auto no = [why](std::string reason) {
    if (why) *why = std::move(reason);
    return false;
  };
  const ChainConv& A = d.a;
  const ChainConv& B = d.b;
  if (!chain_kernel(A.K, B.K)) return no(fmt::format("kernel sizes {} and {} (built: 3 and 3, 5 and 5)", A.K, B.K));
  if (A.C != 1) return no(fmt::format("the first convolution has {} input channels (1 supported)", A.C));
  if (B.C != A.F || B.H != A.PH() || B.W != A.PW()) return no("the second convolution does not read the first's output");
  if (!conv_ok(A) || !conv_ok(B)) return no("a convolution's geometry is not stride 1 with non-negative padding");
  if (d.fc.N < 1 || d.batch < 1 || A.F < 1 || B.F < 1) return no("empty tensor");
  for (int ranks : kChainRanks) {
    if (d.b.F % ranks == 0 && fits(make_layout(d, ranks), smem_optin_bytes)) return true;
  }
  return no("the staged tensors do not fit in shared memory at any cluster size");
}

std::vector<ConvChainVariant> conv_chain_variants(const ConvChainDesc& d, int smem_optin_bytes) {
  std::vector<ConvChainVariant> out;
  if (!conv_chain_supports(d, smem_optin_bytes)) return out;
  for (int ranks : kChainRanks) {
    if (d.b.F % ranks != 0) continue;
    const ChainLayout L = make_layout(d, ranks);
    if (!fits(L, smem_optin_bytes)) continue;
    out.push_back({fmt::format("chain_k{}k{}_r{}", d.a.K, d.b.K, ranks), L});
  }
  return out;
}

void launch_conv_chain(const ConvChainVariant& v, const float* x, float* y, const ConvChainDesc& d,
                       cudaStream_t stream) {
  const ChainKernel kernel = chain_kernel(d.a.K, d.b.K);
  if (d.a.K == 3) {
    allow_dynamic_smem<conv_chain_kernel<3, 3>>(kMaxChainSmemBytes);
    allow_large_clusters<conv_chain_kernel<3, 3>>();
  } else {
    allow_dynamic_smem<conv_chain_kernel<5, 5>>(kMaxChainSmemBytes);
    allow_large_clusters<conv_chain_kernel<5, 5>>();
  }
  const ChainLayout& L = v.layout;
  launch_overlapped(kernel, dim3(static_cast<unsigned>(d.batch), 1, static_cast<unsigned>(L.ranks)), dim3(kChainThreads),
                    static_cast<size_t>(L.floats) * sizeof(float), stream, static_cast<unsigned>(L.ranks), x, y, d, L);
}

}  // namespace cnnrt::kernels
