// The 3xTF32 implicit-GEMM convolution on Hopper's wgmma with the input in registers, registry entry "wgr"
// (conv2d_wg.cuh): rows (M) are output pixels, columns (N) filters. The same kernel, instantiated with N2 > 0, also
// runs the 1x1 convolution after the layer in the same launch (conv_pw.cuh).
//
// Why: staging the input through registers into split (big, small) tiles in shared memory, one stage ahead
// (an earlier kernel, with filters as the rows), made every stage wait for one global round trip (at batch 1,
// where one block an SM has nothing to hide it behind, ~3.5 us a stage against ~0.4 us of tensor work). Here
// the input
// goes to shared memory unsplit, by 4-byte cp.async (zero-filled outside the image) issued two stages
// ahead with the filters, and each thread splits its own fragment values in registers just before the
// wgmma that reads them (the RS form: A from registers, B from shared memory). No split tile is written,
// and no thread waits on a global load between two stages.
//
// Shared memory per stage (4 stages), 1024-byte aligned:
//   [W big][W small]: BN filter rows x 32 k, 128 bytes a row, K-major, 128-byte swizzle (the B operand);
//   [X]: 32 k rows x XS floats, pixel-contiguous (the unsplit input of BM pixels, XS = BM + 8).
// A stage is two halves of 16 k each, (tap, 16 consecutive channels) apiece, so C need only be a multiple of 16
// (SqueezeNet's 16- and 48-channel 3x3 layers): where C % 32 == 16 a stage's halves lie in two taps, and where
// KH * KW * C % 32 == 16 the last stage's second half is past K (zero input, zero packed filters).
// XS = 8 (mod 32) makes the fragment reads free of bank conflicts: lane (gid, tig) reads channel 8s + tig
// (+4) of pixel gid (+8), bank 8*tig + gid (+const). The cp.async writes (32 pixels of one channel a warp)
// are consecutive words.
//
// Pipeline: the loop body runs two stages into an FP32 partial (24 mma steps; the tensor cores' truncating
// accumulation stays near 1e-6 relative, conv2d_tc.cu) and adds it to the sum after wgmma.wait 0, so no
// wgmma is in flight across the back edge. At the top of a body every warpgroup has waited for all its
// wgmma, so the buffers of the two stages before it are free: the body refills them with the stages two
// bodies ahead, then multiplies its own two.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

#include "kernels/code_arch.hpp"
#include "kernels/conv2d_wg.cuh"
#include "kernels/conv_pw.cuh"
#include "kernels/conv_wg_common.cuh"
#include "kernels/conv_device.cuh"
#include "kernels/cp_async.cuh"
#include "kernels/launch.cuh"
#include "kernels/tc_common.cuh"
#include "kernels/wgmma.cuh"

namespace cnnrt::kernels {

namespace wgr {

using wg_common::kBK;
using wg_common::kHalfBK;
using wg_common::kFAlign;
using wg_common::kRowBytes;
using wg_common::kStagesPerPartial;
using wg_common::make_params;
using wg_common::Params;

// WGS warpgroups, each 64 pixels x BN filters (wgmma m64nBNk8). N2 > 0: the 1x1 layer after it in the same
// launch (conv_pw.cuh), its filters rounded up to N2 columns of a second product.
template <int WGS_, int BN_, Act ACT_, int N2_ = 0>
struct Cfg {
  static constexpr int WGS = WGS_, BN = BN_, STAGES = 4, N2 = N2_;
  static constexpr Act ACT = ACT_;
  static constexpr int BM = 64 * WGS, THREADS = 128 * WGS;
  static constexpr int NT = BN / 8;    // n8 column tiles of the accumulator
  static constexpr bool SEPARATE = wg_common::separate_cross(BN);  // the correction terms in an accumulator of their own
  static constexpr int XS = BM + 8;    // floats per channel row of the input tile
  static constexpr int W_BYTES = BN * kRowBytes;  // one half (big or small)
  static constexpr int X_BYTES = kBK * XS * 4;
  static constexpr int STAGE_BYTES = 2 * W_BYTES + X_BYTES;
  static constexpr int RECV_BYTES = NT * THREADS * 16;  // the split's partial tiles, [sender][tile][thread]
  static constexpr int NT2 = N2 / 8;                    // n8 column tiles of the 1x1 product
  static constexpr int W2_BYTES = N2 * kRowBytes;       // one half of one 32-channel stage of the 1x1 weights
  static constexpr int PIPE_BYTES = std::max({STAGES * STAGE_BYTES, RECV_BYTES, NT2 * THREADS * 16});
  static constexpr int SMEM_BYTES = PIPE_BYTES + 4 * W2_BYTES + 1024;  // + alignment slack
  static constexpr int X_PER_THREAD = kBK * BM / THREADS;  // 4-byte copies of the input a thread issues
  static constexpr int X_CSTEP = THREADS / BM;              // channel step between them
  static constexpr int W_CHUNKS = 2 * BN * 8 / THREADS;     // 16-byte filter copies a thread issues
  static constexpr int W_RSTEP = THREADS / 8;               // filter rows between them
  static_assert(XS % 32 == 8, "conflict-free fragment reads");
  static_assert(STAGE_BYTES % 1024 == 0 && W_BYTES % 1024 == 0, "swizzle atoms stay 1024-byte aligned");
  static_assert(THREADS % BM == 0 && (2 * BN * 8) % THREADS == 0, "whole copies per thread");
  static_assert(W_RSTEP % 8 == 0 && BN % W_RSTEP == 0, "one swizzle for a thread's filter copies");
  static_assert(kFAlign % BN == 0, "packed filters cover every filter tile");
  static_assert(SMEM_BYTES <= 227 * 1024, "fits one SM");
  static_assert(N2 == 0 || (WGS == 1 && BN == 64 && (N2 == 32 || N2 == 64)), "the 1x1 product reads one 64-wide tile");
  static_assert(PIPE_BYTES % 1024 == 0, "the 1x1 weights' swizzle atoms stay 1024-byte aligned");
};

// The 1x1 layer of a fused launch (N2 > 0): its packed weights (pack_conv_pw_weights), epilogue and output.
struct PwArgs {
  const float* w2 = nullptr;
  float* y2 = nullptr;
  Epilogue e2;
  int S = 0;
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// Where this thread's two accumulator rows (pixels prow and prow + 8) start in an output of F channels written with
// epilogue `e` (its image stride); -1 past the last pixel.
__device__ __forceinline__ void pixel_row_offsets(int prow, int F, const Params& q, const Epilogue& e,
                                                  int64_t (&out)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int p = prow + 8 * r;
    const int n = p / q.ohw;
    out[r] = p < q.npix ? static_cast<int64_t>(n) * e.out_image_stride(int64_t(F) * q.ohw) + (p - n * q.ohw) : -1;
  }
}

// The 1x1 layer of a fused launch (conv_pw.cuh), after the block's 64 x 64 tile of the first layer is summed into
// `acc`: bias and activation in registers, the 3xTF32 product with the rank's 64 columns of the 1x1 weights (`w2s`,
// landed by the last cp.async wait), the ranks' partials added in rank order through distributed shared memory
// (`smem`, the pipeline buffers, is each rank's partial), and the 1x1 epilogue over this rank's share of its filters.
// `prow`: the pixel of this thread's first accumulator row. Under a K split a rank holds the whole sums of the
// column tiles [t_begin, t_end) alone (cluster_sum_tiles) and multiplies those: the other tiles' fragments are zeros,
// so that every rank issues the same wgmma sequence (wgmma under a run-time branch made ptxas serialize them).
template <class C>
__device__ __forceinline__ void fused_pointwise(const float (&acc)[C::NT][4], int t_begin, int t_end, uint8_t* smem,
                                                const uint8_t* w2s, int prow, int f0, const Epilogue& e,
                                                const Params& q, const PwArgs& pw) {
  namespace cg = cooperative_groups;
  const int tid = threadIdx.x, tig = tid & 3;
  // The A fragments: k step c reads columns 8c .. 8c + 7 of the tile, slot tig + 4h being column 8c + 2 tig + h
  // (the packed weights' order), rows as the accumulator's.
  uint32_t frag[C::NT][2][4];
#pragma unroll
  for (int c = 0; c < C::NT; ++c) {
    const bool own = c >= t_begin && c < t_end;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float b = e.bias ? __ldg(e.bias + f0 + 8 * c + 2 * tig + h) : 0.0f;
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        uint32_t big, small;
        tc::split_tf32(activate<C::ACT>(acc[c][2 * r + h] + b, e), big, small);
        frag[c][0][2 * h + r] = own ? big : 0u;
        frag[c][1][2 * h + r] = own ? small : 0u;
      }
    }
  }
  cp_async_wait<0>();  // this thread's copies of the 1x1 weights (and the empty groups past the pipeline's end)
  wgmma::fence_proxy_async();
  __syncthreads();  // every thread's copies; every warp past its last wgmma on the pipeline buffers
  float part[C::NT2][4], cross[C::NT2][4];
  const uint64_t d0 = wgmma::smem_desc(static_cast<uint32_t>(__cvta_generic_to_shared(w2s)));
  wgmma::fence();
#pragma unroll
  for (int c = 0; c < C::NT; ++c) {
    const uint64_t d_big = wgmma::desc_offset(d0, (c / 4) * 2 * C::W2_BYTES + (c % 4) * 32);
    wg_common::mma_3xtf32_step<true>(part, cross, frag[c][0], frag[c][1], d_big,
                                     wgmma::desc_offset(d_big, C::W2_BYTES), c > 0);
  }
  wgmma::commit();
  wgmma::wait<0>();
  wgmma::fence_operands(part);
  wgmma::fence_operands(cross);
  wgmma::fence_operands(frag);

  const int ranks = static_cast<int>(gridDim.z), rank = static_cast<int>(blockIdx.z);
  const int per = (C::NT2 + ranks - 1) / ranks;
  const int c_begin = min(C::NT2, rank * per), c_end = min(C::NT2, c_begin + per);
  float sum[C::NT2][4];
  if (ranks == 1) {
#pragma unroll
    for (int t = 0; t < C::NT2; ++t) {
#pragma unroll
      for (int j = 0; j < 4; ++j) sum[t][j] = part[t][j] + cross[t][j];
    }
  } else {
    cg::cluster_group cluster = cg::this_cluster();
    float4* mine = reinterpret_cast<float4*>(smem);  // [tile][thread]
#pragma unroll
    for (int t = 0; t < C::NT2; ++t) {
      mine[t * C::THREADS + tid] = make_float4(part[t][0] + cross[t][0], part[t][1] + cross[t][1],
                                               part[t][2] + cross[t][2], part[t][3] + cross[t][3]);
    }
    cluster.sync();  // every rank's partial is in place
#pragma unroll
    for (int t = 0; t < C::NT2; ++t) {
#pragma unroll
      for (int j = 0; j < 4; ++j) sum[t][j] = 0.0f;
      if (t < c_begin || t >= c_end) continue;
      for (int src = 0; src < ranks; ++src) {
        const float4 v = cluster.map_shared_rank(mine, src)[t * C::THREADS + tid];
        sum[t][0] += v.x;
        sum[t][1] += v.y;
        sum[t][2] += v.z;
        sum[t][3] += v.w;
      }
    }
    cluster.sync();  // no rank leaves while another still reads its partial
  }
  int64_t out[2];
  pixel_row_offsets(prow, pw.S, q, pw.e2, out);
  wg_common::store_pixel_rows<C::NT2, Act::Param>(sum, out, 0, pw.S, q.ohw, pw.e2, pw.y2, c_begin, c_end);
}
#endif

template <class C>
__global__ void __launch_bounds__(C::THREADS, 1)
    conv2d_wgr_kernel(const float* __restrict__ x, float* __restrict__ y, const float* __restrict__ wp,
                      const ConvGeometry g, const Epilogue e, const Params q, const PwArgs pw) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(16) uint8_t smem_raw[];
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  const uint32_t sbase = (raw + 1023u) & ~1023u;
  uint8_t* smem = smem_raw + (sbase - raw);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int wgi = warp >> 2, gid = lane >> 2, tig = lane & 3;
  // A fused 1x1 (conv_pw.cuh): z is filter tile * split + K-split rank, the whole z extent one cluster.
  constexpr bool PW = C::N2 > 0;
  const int ftile = PW ? static_cast<int>(blockIdx.z) / q.split
                       : static_cast<int>(blockIdx.x % static_cast<unsigned>(q.ftiles));
  const int p0 = static_cast<int>(PW ? blockIdx.x : blockIdx.x / static_cast<unsigned>(q.ftiles)) * C::BM;
  const int f0 = ftile * C::BN;

  // Loader role: pixel pl of the tile, k rows jq + i * X_CSTEP of every stage's 32 (X_CSTEP is 2: a thread's
  // first half of its copies lies in the stage's first 16 rows, the rest in the second 16).
  static_assert(C::X_CSTEP == 2 && C::X_PER_THREAD == 16, "a thread's copies split evenly between the halves");
  const int pl = tid % C::BM, jq = tid / C::BM;
  int iy0 = -(1 << 30), ix0 = -(1 << 30), xoff = 0;  // an invalid pixel: origin far outside the image
  {
    const int pix = p0 + pl;
    if (pix < q.npix) {
      const int n = pix / q.ohw, rem = pix - n * q.ohw;
      const int oy = rem / g.OW, ox = rem - oy * g.OW;
      iy0 = oy * g.stride_h - g.pad_top;
      ix0 = ox * g.stride_w - g.pad_left;
      xoff = n * q.chw + jq * q.hw + iy0 * g.W + ix0;
    }
  }
  auto stage_ptr = [&](int kt, int k_begin) { return smem + ((kt - k_begin) % C::STAGES) * C::STAGE_BYTES; };
  // The filters of stage kt: both halves, rows f0 .. f0 + BN of the packed buffer (zeros past F). Copy i of
  // this thread: half i / (W_CHUNKS / 2), row wr + i * W_RSTEP (mod BN), 16-byte chunk wch of the row; the
  // swizzle (wch ^ row % 8) is the same for all of them (W_RSTEP is a multiple of 8).
  const int wr = tid / 8, wch = tid % 8;
  const float* wsrc = wp + static_cast<int64_t>(f0 + wr) * q.K + wch * 4;
  const int wdst = wr * kRowBytes + ((wch ^ (wr & 7)) << 4);
  auto load_w = [&](uint8_t* stage, int kt) {
    constexpr int kPerHalf = C::W_CHUNKS / 2;
#pragma unroll
    for (int i = 0; i < C::W_CHUNKS; ++i) {
      const int half = i / kPerHalf, row = (i % kPerHalf) * C::W_RSTEP;
      cp_async_16(stage + half * C::W_BYTES + row * kRowBytes + wdst,
                  wsrc + (static_cast<int64_t>(half) * q.f_pad + row) * q.K + kt * kBK, true);
    }
  };
  // K split: rank z of the cluster (of its filter tile's split, fused) runs stages [k_begin, k_end) of the tile.
  const int rank = static_cast<int>(blockIdx.z) % q.split;
  const int k_begin = q.nk * rank / q.split, k_end = q.nk * (rank + 1) / q.split;
  // The next half-stage to load: filter tap (ky, kx) and first channel c16 (a multiple of 16); ky == KH past K.
  int ky, kx, c16;
  {
    const int tap = k_begin * kBK / g.C;
    c16 = k_begin * kBK - tap * g.C;
    ky = tap / g.KW;
    kx = tap - ky * g.KW;
  }
  // The input of half h of a stage at the cursor, unsplit, then the cursor on by 16 channels; zeros outside the
  // image and past K (the copies read nothing there).
  auto load_x_half = [&](float* xs, int h) {
    const bool ok = ky < g.KH && static_cast<unsigned>(iy0 + ky) < static_cast<unsigned>(g.H) &&
                    static_cast<unsigned>(ix0 + kx) < static_cast<unsigned>(g.W);
    const float* src = x + (ok ? xoff + c16 * q.hw + ky * g.W + kx : 0);
#pragma unroll
    for (int i = 0; i < C::X_PER_THREAD / 2; ++i) {
      cp_async_4(xs + (kHalfBK * h + jq + i * C::X_CSTEP) * C::XS + pl, ok ? src + i * C::X_CSTEP * q.hw : x, ok);
    }
    if ((c16 += kHalfBK) == g.C) {
      c16 = 0;
      if (++kx == g.KW) {
        kx = 0;
        ++ky;
      }
    }
  };

  int next = k_begin;  // the next stage to load
  // The input of stage `next` into its buffer (the filters too unless they were requested already); one commit
  // group a stage, empty past the end: the waits below count stages.
  auto load_next = [&](bool with_filters) {
    if (next < k_end) {
      uint8_t* stage = stage_ptr(next, k_begin);
      if (with_filters) load_w(stage, next);
      float* xs = reinterpret_cast<float*>(stage + 2 * C::W_BYTES);
      load_x_half(xs, 0);
      load_x_half(xs, 1);
    }
    ++next;
    cp_async_commit();
  };

  // Prologue: the first STAGES - 2 stages. Their filters go first, before the wait for the prior grid: the
  // packed filters are written once at plan time, never by a step, so reading them early is safe.
  constexpr int kAhead = C::STAGES - 2;
#pragma unroll
  for (int s = 0; s < kAhead; ++s) {
    if (k_begin + s < k_end) load_w(stage_ptr(k_begin + s, k_begin), k_begin + s);
  }
  if constexpr (PW) {
    // This rank's columns of the 1x1 weights, four [N2][32] tiles ([stage][big, small], 128-byte rows) after the
    // pipeline buffers: chunk ch of row r lands at the same swizzle as the filter stages'.
    uint8_t* const w2s = smem + C::PIPE_BYTES;
    constexpr int kChunks = 4 * C::N2 * 8;
    const float* src = pw.w2 + static_cast<int64_t>(ftile) * 4 * C::N2 * wg_common::kBK;
#pragma unroll
    for (int i = tid; i < kChunks; i += C::THREADS) {
      const int row = (i / 8) % C::N2, tile = i / (8 * C::N2), ch = i % 8;
      cp_async_16(w2s + tile * C::W2_BYTES + row * kRowBytes + ((ch ^ (row & 7)) << 4), src + i * 4, true);
    }
  }
  wait_for_prior_grid();  // launched with PDL (launch.cuh): no input read before this
#pragma unroll
  for (int s = 0; s < kAhead; ++s) load_next(false);

  float acc[C::NT][4], part[C::NT][4], cross[C::NT][4];
#pragma unroll
  for (int i = 0; i < C::NT; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
  }
  // A fragments of the body's two stages: [stage][big, small][k step][4].
  uint32_t frag0[2][4][4], frag1[2][4][4];
  const int row0 = wgi * 64 + (warp & 3) * 16 + gid;  // this thread's first pixel row of the tile
  auto split_fragments = [&](int kt, uint32_t (&f)[2][4][4]) {
    const float* xs = reinterpret_cast<const float*>(stage_ptr(kt, k_begin) + 2 * C::W_BYTES);
#pragma unroll
    for (int s = 0; s < kBK / 8; ++s) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const float v = xs[(8 * s + tig + 4 * h) * C::XS + row0 + 8 * r];
          tc::split_tf32(v, f[0][s][2 * h + r], f[1][s][2 * h + r]);
        }
      }
    }
  };
  const uint64_t desc0 = wgmma::smem_desc(sbase);  // stage 0's big filter half; the rest are offsets from it
  auto multiply = [&](int kt, const uint32_t (&f)[2][4][4], bool fresh) {
    const uint64_t d_big = wgmma::desc_offset(desc0, ((kt - k_begin) % C::STAGES) * C::STAGE_BYTES);
    const uint64_t d_small = wgmma::desc_offset(d_big, C::W_BYTES);
    wgmma::fence();
#pragma unroll
    for (int s = 0; s < kBK / 8; ++s) {
      const uint32_t ko = s * 32;  // 8 k = 32 bytes along the (swizzled) rows
      wg_common::mma_3xtf32_step<C::SEPARATE>(part, cross, f[0][s], f[1][s], wgmma::desc_offset(d_big, ko),
                                              wgmma::desc_offset(d_small, ko), s > 0 || !fresh);
    }
    wgmma::commit();
  };

  static_assert(kStagesPerPartial == 2, "the loop body below runs two stages");
#pragma unroll 1
  for (int a = k_begin; a < k_end; a += kStagesPerPartial) {
    // Stage a has landed (this thread's copies; STAGES - 3 later groups may be in flight), and after the
    // barrier for every thread; every warpgroup is also past the wait for all its wgmma of the last body.
    cp_async_wait<C::STAGES - 3>();
    wgmma::fence_proxy_async();
    __syncthreads();
    load_next(true);  // stage a + 2 into the buffer of stage a - 2
    load_next(true);  // stage a + 3 into the buffer of stage a - 1
    split_fragments(a, frag0);
    multiply(a, frag0, true);
    if (a + 1 < k_end) {
      cp_async_wait<C::STAGES - 2>();  // stage a + 1 has landed
      wgmma::fence_proxy_async();
      __syncthreads();
      split_fragments(a + 1, frag1);
      multiply(a + 1, frag1, false);
    }
    wgmma::wait<0>();
    wgmma::fence_operands(part);
    if constexpr (C::SEPARATE) wgmma::fence_operands(cross);
    wgmma::fence_operands(frag0);  // the wgmma read them until the wait
    wgmma::fence_operands(frag1);
    wg_common::add_partial<C::SEPARATE>(acc, part, cross);
  }

  // A K split: each rank sums and stores its share of the filter tiles (fused: multiplies it by the 1x1 weights).
  int c_begin = 0, c_end = C::NT;
  if (q.split > 1) {
    cp_async_wait<0>();  // (the last groups are empty: no copy still lands in the buffers the sum reuses)
    wg_common::cluster_sum_tiles<C::NT, C::THREADS>(acc, smem, rank, q.split, c_begin, c_end,
                                                    PW ? ftile * q.split : 0);
  }
  if constexpr (PW) {
    fused_pointwise<C>(acc, c_begin, c_end, smem, smem + C::PIPE_BYTES, p0 + row0, f0, e, q, pw);
  } else {
    int64_t out[2];
    pixel_row_offsets(p0 + row0, g.F, q, e, out);
    wg_common::store_pixel_rows<C::NT, C::ACT>(acc, out, f0, g.F, q.ohw, e, y, c_begin, c_end);
  }
#endif
}

template <class C, int SPLIT>
void launch(const float* x, float* y, const float* w, const ConvGeometry& g, const Epilogue& e, cudaStream_t stream) {
  allow_dynamic_smem<conv2d_wgr_kernel<C>>(C::SMEM_BYTES);
  const Params q = make_params(g, C::BN, SPLIT);
  const int64_t blocks = static_cast<int64_t>((q.npix + C::BM - 1) / C::BM) * q.ftiles;
  launch_overlapped(conv2d_wgr_kernel<C>, dim3(static_cast<unsigned>(blocks), 1, SPLIT), dim3(C::THREADS),
                    C::SMEM_BYTES, stream, SPLIT, x, y, w, g, e, q, PwArgs{});
}

// The instantiated configurations (BM pixels x BN filters), 4 stages each:
//    64 x  32: 1 warpgroup, 70 KB (3 blocks an SM): F <= 32 (1x1 squeezes and projections), splits 1, 2, 4
//    64 x  64: 1 warpgroup, 101 KB (2 blocks an SM): F <= 64 and the batch-1 grids
//    64 x 128: 1 warpgroup, 165 KB
//   128 x 128: 2 warpgroups share the filter tiles, 197 KB
struct Entry {
  int wgs, bn, blocks_per_sm, split;
  Act act;
  void (*launch)(const float*, float*, const float*, const ConvGeometry&, const Epilogue&, cudaStream_t);
};

#define WGR_ENTRY_SPLITS(WGS, BN, PER_SM, ACT)                                           \
  Entry{WGS, BN, PER_SM, 1, ACT, &launch<Cfg<WGS, BN, ACT>, 1>},                         \
      Entry{WGS, BN, PER_SM, 2, ACT, &launch<Cfg<WGS, BN, ACT>, 2>},                     \
      Entry{WGS, BN, PER_SM, 4, ACT, &launch<Cfg<WGS, BN, ACT>, 4>},                     \
      Entry { WGS, BN, PER_SM, 8, ACT, &launch<Cfg<WGS, BN, ACT>, 8> }

const Entry kEntries[] = {
    Entry{1, 32, 3, 1, Act::Relu, &launch<Cfg<1, 32, Act::Relu>, 1>},
    Entry{1, 32, 3, 2, Act::Relu, &launch<Cfg<1, 32, Act::Relu>, 2>},
    Entry{1, 32, 3, 4, Act::Relu, &launch<Cfg<1, 32, Act::Relu>, 4>},
    Entry{1, 32, 3, 1, Act::Param, &launch<Cfg<1, 32, Act::Param>, 1>},
    Entry{1, 32, 3, 2, Act::Param, &launch<Cfg<1, 32, Act::Param>, 2>},
    Entry{1, 32, 3, 4, Act::Param, &launch<Cfg<1, 32, Act::Param>, 4>},
    WGR_ENTRY_SPLITS(1, 64, 2, Act::Relu),  WGR_ENTRY_SPLITS(1, 64, 2, Act::Param),
    WGR_ENTRY_SPLITS(1, 128, 1, Act::Relu), WGR_ENTRY_SPLITS(1, 128, 1, Act::Param),
    WGR_ENTRY_SPLITS(2, 128, 1, Act::Relu), WGR_ENTRY_SPLITS(2, 128, 1, Act::Param),
};

#undef WGR_ENTRY_SPLITS

// A convolution and its 1x1 layer (conv_pw.cuh): a block per 64 pixels and rank (64 filters), the ranks a cluster
// along z.
template <int N2>
void launch_pw(const float* x, float* y, const ConvPwDesc& d, int split, cudaStream_t stream) {
  using C = Cfg<1, 64, Act::Relu, N2>;
  allow_dynamic_smem<conv2d_wgr_kernel<C>>(C::SMEM_BYTES);
  allow_large_clusters<conv2d_wgr_kernel<C>>();
  const Params q = make_params(d.conv, C::BN, split);
  const unsigned ptiles = static_cast<unsigned>((q.npix + C::BM - 1) / C::BM);
  const unsigned ranks = static_cast<unsigned>(d.conv.F / C::BN * split);
  const PwArgs pw{d.w_pw, y, d.pw_epilogue, d.pw_filters};
  float* const no_output = nullptr;  // the first layer's output stays on chip
  launch_overlapped(conv2d_wgr_kernel<C>, dim3(ptiles, 1, ranks), dim3(C::THREADS), C::SMEM_BYTES, stream, ranks, x,
                    no_output, d.w_conv, d.conv, d.conv_epilogue, q, pw);
}

constexpr int kPwTile = 64;        // first-layer filters a filter tile
constexpr int kPwMaxTiles = 8;     // filter tiles (a cluster of at most 16 blocks with a split of 2)
constexpr int kPwMaxFilters = 64;  // 1x1 filters: the wider second product

}  // namespace wgr

std::vector<float> pack_wg_filters(const float* weights, int F, int C, int KH, int KW) {
  const int K = wg_common::packed_k(C, KH, KW), f_pad = tc::round_up(F, wg_common::kFAlign);
  std::vector<float> packed(static_cast<size_t>(2) * f_pad * K, 0.0f);
  float* big = packed.data();
  float* small = big + static_cast<size_t>(f_pad) * K;
  for (int f = 0; f < F; ++f) {
    for (int c = 0; c < C; ++c) {
      for (int ky = 0; ky < KH; ++ky) {
        for (int kx = 0; kx < KW; ++kx) {
          const float v = weights[((static_cast<size_t>(f) * C + c) * KH + ky) * KW + kx];
          const size_t at = static_cast<size_t>(f) * K + static_cast<size_t>(ky * KW + kx) * C + c;
          big[at] = tc::round_tf32(v);
          small[at] = tc::round_tf32(v - big[at]);
        }
      }
    }
  }
  return packed;
}

PackedWeights pack_wg(const ConvLayer& layer, const float* filters, const float*) {
  return {"wg_split", pack_wg_filters(filters, layer.g.F, layer.g.C, layer.g.KH, layer.g.KW), nullptr};
}

std::string wg_reject(const ConvLayer& layer) {
  const ConvGeometry& g = layer.g;
  if (g.groups != 1) return "grouped convolution";
  if (g.dil_h != 1 || g.dil_w != 1) return "dilation";
  if (g.stride_h != g.stride_w || g.stride_h < 1 || g.stride_h > 2) return "stride other than 1 or 2";
  if (layer.pooled()) return "fused pooling";
  if (g.C % wg_common::kHalfBK != 0) return "input channels not a multiple of 16";
  // Input offsets, pixel indices and packed-filter rows are int32.
  if (int64_t(g.N) * g.C * g.H * g.W >= (int64_t(1) << 31)) return "input too large for 32-bit offsets";
  const int64_t npix = int64_t(g.N) * g.OH * g.OW;
  if (npix >= (int64_t(1) << 30) || g.F > (1 << 20)) return "output too large for 32-bit indices";
  if (int64_t(g.C) * g.KH * g.KW > (int64_t(1) << 20)) return "C*KH*KW too large";
  return "";
}

namespace {

std::string variant_name(const wgr::Entry& en) {
  return "wgr_px" + std::to_string(64 * en.wgs) + "_f" + std::to_string(en.bn) + "_" +
         (en.act == Act::Relu ? "relu" : "act") + (en.split > 1 ? "_split" + std::to_string(en.split) : "");
}

class WgrFamily final : public ConvFamily {
 public:
  WgrFamily()
      : ConvFamily("wgr",
                   "3xTF32 implicit GEMM on wgmma, output pixels as rows: the input copied unsplit two stages ahead and "
                   "split in registers; _split variants divide the reduction over a cluster",
                   {kCpAsync | kClusters | kWgmma}, pack_wg) {}
  bool writes_image_stride() const override { return true; }
  std::string reject(const ConvLayer& layer, const DeviceCaps&) const override { return wg_reject(layer); }

  std::vector<ConvVariant> variants(const ConvLayer& layer, const DeviceCaps& dev, const LayerWeights& w) const override {
    const ConvGeometry& g = layer.g;
    const bool relu = layer.e.param_act == ParamAct::Relu;
    const int sm_count = std::max(1, dev.sm_count);
    const int64_t npix = int64_t(g.N) * g.OH * g.OW;
    const int nk = wg_common::packed_k(g.C, g.KH, g.KW) / wgr::kBK;
    std::vector<std::pair<ConvVariant, double>> scored;  // score: estimated relative time, lower is better
    for (const wgr::Entry& en : wgr::kEntries) {
      if ((en.act == Act::Relu) != relu) continue;      // Param serves every other activation
      if (en.bn > 64 && g.F <= 64) continue;            // half the filter tile would be padding
      if (en.bn < 64 && g.F > 32) continue;             // more tiles, each reading every input again
      if (en.split > 1 && nk < 2 * en.split) continue;  // at least two stages a block
      const int bm = 64 * en.wgs;
      const double tiles = double((npix + bm - 1) / bm) * double((g.F + en.bn - 1) / en.bn);
      if (en.split > 1 && tiles * en.split > 2.0 * sm_count * en.blocks_per_sm) continue;  // full already
      const double waves = std::ceil(tiles * en.split / (double(sm_count) * en.blocks_per_sm));
      // A wave keeps every SM busy with blocks_per_sm blocks of bm x bn x (K / split); the reduction of a split
      // costs about one stage.
      const double stages = double(nk) / en.split + (en.split > 1 ? 1.0 : 0.0);
      const double score = 0.5 * waves * bm * en.bn * en.blocks_per_sm * stages;
      scored.push_back({{variant_name(en), "", bind_launch(en.launch, layer, w.packed)}, score});
    }
    return rank_by_score(std::move(scored));
  }

  std::vector<std::string> variant_names() const override { return entry_names(wgr::kEntries, variant_name); }
};

}  // namespace

bool conv_pw_supports(const ConvPwDesc& d, int arch, std::string* why) {
  auto no = [&](std::string reason) {
    if (why) *why = std::move(reason);
    return false;
  };
  if (arch != 90) return no("needs wgmma (compute capability 9.0)");
  ConvLayer first;
  first.g = d.conv;
  first.e = d.conv_epilogue;
  if (std::string r = wg_reject(first); !r.empty()) return no("first layer: " + r);
  if (d.conv.F % wgr::kPwTile != 0 || d.conv.F > wgr::kPwTile * wgr::kPwMaxTiles) {
    return no("first layer's filters not a multiple of 64 up to 512");
  }
  if (d.conv_epilogue.param_act != ParamAct::Relu) return no("first layer's activation not ReLU");
  if (d.conv_epilogue.residual || d.pw_epilogue.residual) return no("a residual");
  if (d.pw_epilogue.pool.kind != FusedPool::None) return no("1x1 layer with fused pooling");
  if (d.pw_filters < 1 || d.pw_filters > wgr::kPwMaxFilters) return no("1x1 layer of more than 64 filters");
  return true;
}

std::vector<ConvPwVariant> conv_pw_variants(const ConvPwDesc& d, int arch) {
  if (!conv_pw_supports(d, arch)) return {};
  const int tiles = d.conv.F / wgr::kPwTile;
  const int nk = wg_common::packed_k(d.conv.C, d.conv.KH, d.conv.KW) / wg_common::kBK;
  std::vector<ConvPwVariant> out;
  for (int split : {1, 2}) {
    if (split > 1 && nk < 2 * split) continue;  // at least two stages a block
    ConvPwVariant v;
    v.n2 = d.pw_filters <= 32 ? 32 : 64;
    v.split = split;
    v.name = "wgr_pw_n" + std::to_string(v.n2) + (split > 1 ? "_split" + std::to_string(split) : "");
    v.ranks = tiles * split;
    out.push_back(v);
  }
  return out;
}

std::vector<std::string> conv_pw_variant_names() {
  return {"wgr_pw_n32", "wgr_pw_n64", "wgr_pw_n32_split2", "wgr_pw_n64_split2"};
}

std::vector<float> pack_conv_pw_weights(const float* w, int S, int F, int n2) {
  const int ranks = F / wgr::kPwTile, bk = wg_common::kBK;  // (one copy a filter tile, read by its split's ranks)
  std::vector<float> packed(static_cast<size_t>(ranks) * 4 * n2 * bk, 0.0f);
  for (int r = 0; r < ranks; ++r) {
    for (int stage = 0; stage < 2; ++stage) {
      for (int s = 0; s < S; ++s) {
        for (int j = 0; j < bk; ++j) {
          // Local column l = 32 stage + j: k step l / 8, slot t = l % 8 is column 8 (l / 8) + 2 (t % 4) + t / 4.
          const int l = stage * bk + j, t = l % 8;
          const int f = r * wgr::kPwTile + 8 * (l / 8) + 2 * (t % 4) + t / 4;
          const float v = w[static_cast<size_t>(s) * F + f];
          const float big = tc::round_tf32(v);
          const size_t at = ((static_cast<size_t>(r) * 4 + stage * 2) * n2 + s) * bk + j;
          packed[at] = big;
          packed[at + static_cast<size_t>(n2) * bk] = tc::round_tf32(v - big);  // the small half's tile
        }
      }
    }
  }
  return packed;
}

void launch_conv_pw(const ConvPwVariant& v, const float* x, float* y, const ConvPwDesc& d, cudaStream_t stream) {
  if (v.n2 == 32) {
    wgr::launch_pw<32>(x, y, d, v.split, stream);
  } else {
    wgr::launch_pw<64>(x, y, d, v.split, stream);
  }
}

const ConvFamily& conv2d_wgr_family() {
  static const WgrFamily family;
  return family;
}

// The code of the sm_90a library: kernels/code_arch.hpp.
CNNRT_CODE_ARCH_PROBE(sm90a_code_arch)

}  // namespace cnnrt::kernels
