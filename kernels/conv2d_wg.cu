// The 3xTF32 implicit-GEMM convolution on Hopper's wgmma (see conv2d_wg.cuh): kernel, instantiations, choice.
//
// Shared memory per pipeline stage (2 or 3 stages), every tile 1024-byte aligned:
//   [A big][A small]: BM filter rows x 32 k, 128 bytes a row, K-major;
//   [B big][B small]: BN pixel rows x 32 k, 128 bytes a row, K-major.
// Rows use the 128-byte swizzle of the wgmma descriptors: the 16-byte chunk j of row r lives at chunk
// j ^ (r % 8), so the descriptor of k step s (8 k, 32 bytes) is the tile's address + 32*s.
// The gather writes each pixel row with 16-byte stores; eight consecutive rows hit eight distinct chunks, so
// a warp's stores are free of bank conflicts.
//
// Per stage, each warpgroup issues 4 k steps x 3 wgmma m64n128k8 (small*big, big*small, big*big) into an
// FP32 partial, then, while the tensor cores run, fills a later stage: the filters by cp.async from the
// packed halves, the input by 32-bit loads, split and stored. The
// partial is added to the running sum in FP32 every two stages (the tensor cores' accumulation truncates:
// see conv2d_tc.cu). A K split over a cluster sums the ranks' tiles through distributed shared memory.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

#include "kernels/conv2d_wg.cuh"
#include "kernels/conv_wg_common.cuh"
#include "kernels/conv_device.cuh"
#include "kernels/cp_async.cuh"
#include "kernels/launch.cuh"
#include "kernels/tc_common.cuh"
#include "kernels/wgmma.cuh"

namespace cnnrt::kernels {

namespace wg {

using wg_common::kBK;
using wg_common::kFAlign;
using wg_common::kRowBytes;
using wg_common::kStagesPerPartial;
using wg_common::make_params;
using wg_common::Params;

// WGM x WGN warpgroups, each 64 filters x 128 pixels.
template <int WGM_, int WGN_, int STAGES_, Act ACT_>
struct Cfg {
  static constexpr int WGM = WGM_, WGN = WGN_, STAGES = STAGES_;
  static constexpr Act ACT = ACT_;
  static constexpr int BM = 64 * WGM, BN = 128 * WGN, THREADS = 128 * WGM * WGN;
  static constexpr int A_BYTES = BM * kRowBytes;  // one half (big or small)
  static constexpr int B_BYTES = BN * kRowBytes;
  static constexpr int STAGE_BYTES = 2 * (A_BYTES + B_BYTES);
  static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + 1024;  // + slack to align the tiles to 1024 bytes
  static constexpr int B_KPT = BN * kBK / THREADS;           // consecutive k of one pixel a thread gathers
  static constexpr int A_CHUNKS = 2 * BM * 8 / THREADS;      // 16-byte filter copies a thread issues
  static_assert(B_KPT % 4 == 0 && kBK % B_KPT == 0, "B gather: whole 16-byte chunks per thread");
  static_assert((2 * BM * 8) % THREADS == 0, "A loader: whole chunks per thread");
  static_assert(kFAlign % BM == 0, "packed filters cover every filter tile");
  static_assert(STAGES == 2 || STAGES == 3, "the pipelines below");
};

template <class C>
__global__ void __launch_bounds__(C::THREADS, 1)
    conv2d_wg_kernel(const float* __restrict__ x, float* __restrict__ y, const float* __restrict__ wp,
                     const ConvGeometry g, const Epilogue e, const Params q) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(16) uint8_t smem_raw[];
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  const uint32_t sbase = (raw + 1023u) & ~1023u;
  uint8_t* smem = smem_raw + (sbase - raw);
  const int tid = threadIdx.x, warp = tid >> 5;
  const int wgi = warp >> 2, wgm = wgi % C::WGM, wgn = wgi / C::WGM;
  const int ftile = static_cast<int>(blockIdx.x % static_cast<unsigned>(q.ftiles));
  const int p0 = static_cast<int>(blockIdx.x / static_cast<unsigned>(q.ftiles)) * C::BN;
  const int f0 = ftile * C::BM;

  // Gather role: pixel row pl of the tile, k sub-range [kq*B_KPT, +B_KPT) of every stage's 32.
  const int pl = tid % C::BN, kq = tid / C::BN;
  int iy0 = -(1 << 30), ix0 = -(1 << 30), xoff = 0;  // an invalid pixel: origin far outside the image
  {
    const int pix = p0 + pl;
    if (pix < q.npix) {
      const int n = pix / q.ohw, rem = pix - n * q.ohw;
      const int oy = rem / g.OW, ox = rem - oy * g.OW;
      iy0 = oy * g.stride_h - g.pad_top;
      ix0 = ox * g.stride_w - g.pad_left;
      xoff = n * q.chw + kq * C::B_KPT * q.hw + iy0 * g.W + ix0;
    }
  }
  // The input values of stage (ky, kx, cg) for this thread: channels cg*32 + kq*B_KPT + j, j < B_KPT.
  auto gather = [&](int ky, int kx, int cg, float (&v)[C::B_KPT]) {
    const bool ok = static_cast<unsigned>(iy0 + ky) < static_cast<unsigned>(g.H) &&
                    static_cast<unsigned>(ix0 + kx) < static_cast<unsigned>(g.W);
    // Outside the image the loads read x[0 .. 31*hw], inside the tensor (C >= 32), and are discarded.
    const float* src = ok ? x + (xoff + cg * kBK * q.hw + ky * g.W + kx) : x;
#pragma unroll
    for (int j = 0; j < C::B_KPT; ++j) v[j] = ok ? __ldg(src + j * q.hw) : 0.0f;
  };
  auto store_b = [&](uint8_t* stage, const float (&v)[C::B_KPT]) {
    uint8_t* big = stage + 2 * C::A_BYTES;
    uint8_t* small = big + C::B_BYTES;
#pragma unroll
    for (int j = 0; j < C::B_KPT; j += 4) {
      uint4 hi, lo;
      tc::split_tf32(v[j], hi.x, lo.x);
      tc::split_tf32(v[j + 1], hi.y, lo.y);
      tc::split_tf32(v[j + 2], hi.z, lo.z);
      tc::split_tf32(v[j + 3], hi.w, lo.w);
      const int chunk = (kq * C::B_KPT + j) / 4;
      const int off = pl * kRowBytes + ((chunk ^ (pl & 7)) << 4);
      *reinterpret_cast<uint4*>(big + off) = hi;
      *reinterpret_cast<uint4*>(small + off) = lo;
    }
  };
  auto load_a = [&](uint8_t* stage, int kt) {
#pragma unroll
    for (int i = 0; i < C::A_CHUNKS; ++i) {
      const int idx = tid + i * C::THREADS;
      const int half = idx / (C::BM * 8), r = (idx / 8) % C::BM, ch = idx % 8;
      const float* src = wp + (static_cast<int64_t>(half) * q.f_pad + f0 + r) * q.K + kt * kBK + ch * 4;
      cp_async_16(stage + half * C::A_BYTES + r * kRowBytes + ((ch ^ (r & 7)) << 4), src, true);
    }
  };

  float acc[1][16][4], part[1][16][4];
#pragma unroll
  for (int i = 0; i < 16; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[0][i][j] = 0.0f;
  }

  // K split: rank z of the cluster runs stages [k_begin, k_end) of the tile.
  const int rank = static_cast<int>(blockIdx.z);
  const int k_begin = q.nk * rank / q.split, k_end = q.nk * (rank + 1) / q.split;

  wait_for_prior_grid();  // launched with PDL (launch.cuh): nothing global before this
  // The filter tap and channel group of the next stage to gather.
  int cg = k_begin % q.cgroups, kx = k_begin / q.cgroups, ky = kx / g.KW;
  kx -= ky * g.KW;
  auto advance = [&] {
    if (++cg == q.cgroups) {
      cg = 0;
      if (++kx == g.KW) {
        kx = 0;
        ++ky;
      }
    }
  };
  // Three stage buffers: iteration kt issues stage kt's wgmma, waits for stage kt - 1's (this warpgroup)
  // and for stage kt + 1's copies (this thread); one barrier (every warpgroup is past kt - 1, stage kt + 1
  // is in shared memory for all); then stage kt + 2 goes into kt - 1's buffer: its filters by cp.async, its
  // input from registers loaded one iteration earlier; and the input loads of stage kt + 3 are issued. No
  // load latency sits between two stages' wgmma issues.
  // Two stage buffers (half the shared memory: two blocks per SM): iteration kt issues stage kt's wgmma,
  // waits for stage kt - 1's, then gathers stage kt + 1 into its buffer, with a barrier on either side.
  auto stage_addr = [&](int kt) { return (kt - k_begin) % C::STAGES; };
  float v[C::B_KPT];  // three buffers: the input values of the stage after the next, in flight
  {
    load_a(smem, k_begin);
    float v0[C::B_KPT];
    gather(ky, kx, cg, v0);
    advance();
    if constexpr (C::STAGES == 3) {
      if (k_begin + 1 < k_end) {
        load_a(smem + C::STAGE_BYTES, k_begin + 1);
        gather(ky, kx, cg, v);
        advance();
        store_b(smem + C::STAGE_BYTES, v);
      }
    }
    cp_async_commit();
    store_b(smem, v0);
    if constexpr (C::STAGES == 3) {
      if (k_begin + 2 < k_end) {
        gather(ky, kx, cg, v);
        advance();
      }
    }
  }
  cp_async_wait<0>();
  wgmma::fence_proxy_async();
  __syncthreads();

  // The partial collects kStagesPerPartial stages before it is added to acc (the tensor pipe drains only
  // then). The loop body is one partial's stages, unrolled: no wgmma is in flight across the loop's back
  // edge, where the compiler could move the accumulator registers.
  auto run_stage = [&](int kt, bool fresh) {
    const uint32_t st = sbase + stage_addr(kt) * C::STAGE_BYTES;
    const uint32_t a_big = st + wgm * 64 * kRowBytes, a_small = a_big + C::A_BYTES;
    const uint32_t b_big = st + 2 * C::A_BYTES + wgn * 128 * kRowBytes, b_small = b_big + C::B_BYTES;
    wgmma::fence();
#pragma unroll
    for (int s = 0; s < kBK / 8; ++s) {
      const uint32_t ko = s * 32;  // 8 k = 32 bytes along the (swizzled) rows
      // Corrections first (smaller magnitudes); the partial restarts at the first k step of its stages.
      wgmma::wgmma_ss_m64n128k8(part[0], wgmma::smem_desc(a_small + ko), wgmma::smem_desc(b_big + ko), s > 0 || !fresh);
      wgmma::wgmma_ss_m64n128k8(part[0], wgmma::smem_desc(a_big + ko), wgmma::smem_desc(b_small + ko), 1);
      wgmma::wgmma_ss_m64n128k8(part[0], wgmma::smem_desc(a_big + ko), wgmma::smem_desc(b_big + ko), 1);
    }
    wgmma::commit();
    if (kt + 1 >= k_end) return;
    if constexpr (C::STAGES == 3) {
      wgmma::wait<1>();     // this warpgroup's stage kt - 1 is done
      cp_async_wait<0>();  // this thread's copies of stage kt + 1 have landed
      wgmma::fence_proxy_async();
      __syncthreads();
      if (kt + 2 < k_end) {
        uint8_t* buf = smem + stage_addr(kt + 2) * C::STAGE_BYTES;
        load_a(buf, kt + 2);
        cp_async_commit();
        store_b(buf, v);
        if (kt + 3 < k_end) {
          gather(ky, kx, cg, v);
          advance();
        }
      }
    } else {
      wgmma::wait<1>();  // this warpgroup's stage kt - 1 is done ...
      __syncthreads();  // ... and every warpgroup's: its buffer is free
      uint8_t* buf = smem + stage_addr(kt + 1) * C::STAGE_BYTES;
      load_a(buf, kt + 1);
      cp_async_commit();
      gather(ky, kx, cg, v);
      advance();
      store_b(buf, v);
      cp_async_wait<0>();
      wgmma::fence_proxy_async();
      __syncthreads();  // stage kt + 1 is in shared memory for every warpgroup
    }
  };
  static_assert(kStagesPerPartial == 2, "the loop body below runs two stages");
#pragma unroll 1
  for (int kt = k_begin; kt < k_end; kt += kStagesPerPartial) {
    run_stage(kt, true);
    if (kt + 1 < k_end) run_stage(kt + 1, false);
    wgmma::wait<0>();
    wgmma::fence_operands(part[0]);
#pragma unroll
    for (int i = 0; i < 16; ++i) {
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[0][i][j] += part[0][i][j];
    }
  }

  // A K split: each rank sums and stores its share of the pixel tiles.
  int nt_begin = 0, nt_end = 16;
  if (q.split > 1) wg_common::cluster_sum_tiles<16, C::THREADS>(acc[0], smem, rank, q.split, nt_begin, nt_end);
  tc::store_mma_tile<1, 16, C::ACT>(acc, f0 + wgm * 64 + (warp & 3) * 16, p0 + wgn * 128, g, e, q.npix, q.ohw, y,
                                    nt_begin, nt_end);
#endif
}

template <class C, int SPLIT>
void launch(const float* x, float* y, const float* w, const ConvGeometry& g, const Epilogue& e, cudaStream_t stream) {
  allow_dynamic_smem<conv2d_wg_kernel<C>>(C::SMEM_BYTES);
  const Params q = make_params(g, C::BM, SPLIT);
  const int64_t blocks = static_cast<int64_t>((q.npix + C::BN - 1) / C::BN) * q.ftiles;
  launch_overlapped(conv2d_wg_kernel<C>, dim3(static_cast<unsigned>(blocks), 1, SPLIT), dim3(C::THREADS),
                    C::SMEM_BYTES, stream, SPLIT, x, y, w, g, e, q);
}

// The instantiated configurations (BM filters x BN pixels):
//   128 x 128: 2 warpgroups share the input tile, 3 stages (193 KB of shared memory, 1 block per SM)
//    64 x 128: 1 warpgroup, 2 stages (97 KB, 2 blocks per SM): F <= 64 and small grids
struct Entry {
  int wgm, wgn, stages, blocks_per_sm, split;
  Act act;
  void (*launch)(const float*, float*, const float*, const ConvGeometry&, const Epilogue&, cudaStream_t);
};

// Each configuration whole (split 1) and with its K stages split over clusters of 2, 4 and 8 blocks (the
// same kernel; the split is a launch parameter).
#define WG_ENTRY_SPLITS(WGM, WGN, ST, PER_SM, ACT)                                                      \
  Entry{WGM, WGN, ST, PER_SM, 1, ACT, &launch<Cfg<WGM, WGN, ST, ACT>, 1>},                                  \
      Entry{WGM, WGN, ST, PER_SM, 2, ACT, &launch<Cfg<WGM, WGN, ST, ACT>, 2>},                              \
      Entry{WGM, WGN, ST, PER_SM, 4, ACT, &launch<Cfg<WGM, WGN, ST, ACT>, 4>},                              \
      Entry { WGM, WGN, ST, PER_SM, 8, ACT, &launch<Cfg<WGM, WGN, ST, ACT>, 8> }

const Entry kEntries[] = {
    WG_ENTRY_SPLITS(2, 1, 3, 1, Act::Relu),
    WG_ENTRY_SPLITS(2, 1, 3, 1, Act::Param),
    WG_ENTRY_SPLITS(1, 1, 2, 2, Act::Relu),
    WG_ENTRY_SPLITS(1, 1, 2, 2, Act::Param),
};

#undef WG_ENTRY_SPLITS

}  // namespace wg

std::vector<float> pack_wg_filters(const float* weights, int F, int C, int KH, int KW) {
  const int K = C * KH * KW, f_pad = tc::round_up(F, wg::kFAlign);
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

bool conv2d_wg_supports(const ConvGeometry& g, const Epilogue& e, int cc_major, int cc_minor, std::string* why) {
  auto no = [why](const char* reason) {
    if (why) *why = reason;
    return false;
  };
  if (cc_major != 9 || cc_minor != 0) return no("wgmma kernels are built for compute capability 9.0 only");
  if (g.groups != 1) return no("grouped convolution");
  if (g.dil_h != 1 || g.dil_w != 1) return no("dilation");
  if (g.stride_h != g.stride_w || g.stride_h < 1 || g.stride_h > 2) return no("stride other than 1 or 2");
  if (e.pool.kind != FusedPool::None) return no("fused pooling");
  if (g.N < 1 || g.C < 1 || g.H < 1 || g.W < 1 || g.F < 1 || g.KH < 1 || g.KW < 1 || g.OH < 1 || g.OW < 1) {
    return no("empty tensor");
  }
  if (g.C % wg::kBK != 0) return no("input channels not a multiple of 32");
  // Input offsets, pixel indices and packed-filter rows are int32.
  if (int64_t(g.N) * g.C * g.H * g.W >= (int64_t(1) << 31)) return no("input too large for 32-bit offsets");
  const int64_t npix = int64_t(g.N) * g.OH * g.OW;
  if (npix >= (int64_t(1) << 30) || g.F > (1 << 20)) return no("output too large for 32-bit indices");
  if (int64_t(g.C) * g.KH * g.KW > (int64_t(1) << 20)) return no("C*KH*KW too large");
  return true;
}

std::vector<TcVariant> conv2d_wg_variants(const ConvGeometry& g, const Epilogue& e, int sm_count, int cc_major,
                                          int cc_minor) {
  if (!conv2d_wg_supports(g, e, cc_major, cc_minor)) return {};
  const bool relu = e.param_act == ParamAct::Relu;
  const int64_t npix = int64_t(g.N) * g.OH * g.OW;
  std::vector<std::pair<TcVariant, double>> scored;  // score: estimated relative time, lower is better
  const int nk = g.KH * g.KW * (g.C / wg::kBK);
  for (const wg::Entry& en : wg::kEntries) {
    if (en.act == Act::Relu && !relu) continue;
    if (en.split > 1 && nk < 2 * en.split) continue;  // at least two stages a block
    const int bm = 64 * en.wgm, bn = 128 * en.wgn;
    const double tiles = double((npix + bn - 1) / bn) * double((g.F + bm - 1) / bm);
    if (en.split > 1 && tiles * en.split > 4.0 * std::max(1, sm_count) * en.blocks_per_sm) continue;  // full already
    const double slots = double(std::max(1, sm_count)) * en.blocks_per_sm;
    const double waves = std::ceil(tiles * en.split / slots);
    // A wave keeps every SM busy with blocks_per_sm blocks of bm x bn x (K / split); the reduction of a
    // split costs about one stage.
    const double stages = double(nk) / en.split + (en.split > 1 ? 1.0 : 0.0);
    const double score = waves * bm * bn * en.blocks_per_sm * stages * (en.act == Act::Param && relu ? 1.02 : 1.0);
    char name[64];
    std::snprintf(name, sizeof name, "wg3_f%dx%d_k%d_%s%s", bm, bn, wg::kBK, en.act == Act::Relu ? "relu" : "act",
                  en.split > 1 ? ("_split" + std::to_string(en.split)).c_str() : "");
    scored.push_back({{name, en.launch}, score});
  }
  for (auto& v : conv2d_wgr_scored(g, e, sm_count)) scored.push_back(std::move(v));
  for (auto& v : conv2d_wgh_scored(g, e, sm_count)) scored.push_back(std::move(v));
  return rank_by_score(std::move(scored));
}

}  // namespace cnnrt::kernels
