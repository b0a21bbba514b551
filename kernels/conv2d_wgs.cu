// The 3xTF32 wgmma convolution with both operands in shared memory ("wgs"; see conv2d_wg.cuh for the family):
// filters on the rows (64 a block, by TMA, 128-byte swizzled, as wg3 reads them), output pixels on the columns
// (a TR x 8 rectangle of one image, wgmma n = 8 * TR), and the input split into its TF32 big and small parts
// once a channel group, in shared memory, where every filter tap reads it through a descriptor offset.
//
// Why: wgh (conv2d_wgh.cu) loads its A fragments from the halo and splits them in registers for every tap:
// 8 fragment loads and 32 split instructions a thread a stage, ~260 instructions a warp a stage in all, which
// held it near 55% of the TF32 tensor rate at batch 32 (docs/perf-notes.md v16). Here a stage is 12 wgmma, two
// descriptor adds and a barrier; the input's copy and split are once a channel group (~1/KH*KW of that).
//
// How a tap becomes an offset: wgmma's K-major operand without swizzle is made of core matrices of 8 rows x
// 16 bytes, each 128 contiguous bytes, `sbo` bytes apart along N and `lbo` bytes apart along K (wgmma.cuh,
// smem_desc_plain). The halo of a channel group is stored as 8 planes (one a 4-channel chunk, lbo apart) of
// its HR x HC pixels, 16 bytes a pixel, row-major. Core matrix j of the pixel operand is output row j of the
// tile: 8 neighbouring pixels, contiguous; the next output row is one halo row on (sbo = HC * 16). For tap
// (ky, kx) the whole operand starts (ky * HC + kx) * 16 bytes further. So the tile is 8 pixels wide (a core
// matrix) and TR rows high (14 or 16: no waste on maps 56, 112 and 32 wide; 1/8 of the columns on 28 and 14).
//
// Per channel group c: at tap 1 of group c - 1 ... of c the raw input of group c + 1 is copied (4-byte cp.async,
// zero fill outside the image) into the small half of the other buffer set, and at tap KH*KW - 2 it is split
// in place: each 16-byte unit becomes big (low 13 bits cleared) and small (the rest, which the tensor cores
// truncate to TF32). The multiplies of group c read set c & 1 meanwhile.
//
// Stages are (channel group, tap); the filters of a stage come by TMA two stages ahead into four buffers. The
// tensor cores sum P stages into a partial (P * 12 mma steps of truncating accumulation) before it is added to
// the FP32 sum; between the stages of a partial the warpgroup waits for the stage before last only.
//
// Shared memory: 4 filter stages of 16 KB and two buffer sets of 2 x HR * HC * 128 bytes: 5x5 filters with TR
// = 16 take 189 KB, one block (one warpgroup) an SM; the tensor pipe is kept busy by the wgmma queue (one stage
// of 12 in flight while the next is issued), not by other warps.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "kernels/conv2d_wg.cuh"
#include "kernels/conv_device.cuh"
#include "kernels/conv_wg_common.cuh"
#include "kernels/cp_async.cuh"
#include "kernels/fast_div.cuh"
#include "kernels/launch.cuh"
#include "kernels/tc_common.cuh"
#include "kernels/tma.cuh"
#include "kernels/wgmma.cuh"

namespace cnnrt::kernels {

namespace wgs {

using wg_common::kBK;
using wg_common::kFAlign;
using wg_common::kRowBytes;
using wg_common::Params;

constexpr int kChunks = kBK / 4;  // 16-byte K chunks (4 channels) of a channel group: the halo's planes
constexpr int kTC = 8;            // tile width: one core matrix of pixels
constexpr int kBM = 64;           // filters a block (wgmma m)
constexpr int kThreads = 128;     // one warpgroup
constexpr int kStages = 4;        // filter stage buffers; stage kt loads stage kt + 2
constexpr int kCopyTap = 1;       // the tap of group c at which the input of group c + 1 is copied
constexpr int kMinTaps = 4;       // the split (tap KH*KW - 2) comes after the copy
constexpr int kMaxSmem = 227 * 1024;
constexpr int kBarBytes = 64;
constexpr int kWBytes = kBM * kRowBytes;  // one filter half (big or small) of a stage: 8 KB
constexpr int kStageBytes = 2 * kWBytes;
static_assert(kWBytes % 1024 == 0, "swizzle atoms stay 1024-byte aligned");
static_assert(kFAlign % kBM == 0, "packed filters cover every filter tile");

// TR output rows of 8 pixels (wgmma n = 8 * TR), partials of P stages.
template <int TR_, Act ACT_, int P_>
struct Cfg {
  static constexpr int TR = TR_, N = kTC * TR_, NT = TR_, P = P_;
  static constexpr Act ACT = ACT_;
  static_assert(P >= 2, "stage kt refills the filter buffer of stage kt - 2: a partial spans two stages at least");
  static_assert(TR == 14 || TR == 16, "the wgmma shapes built: m64n112k8, m64n128k8");
};

// The halo of a TR x 8 tile (stride 1) and the tiles of one image.
struct Tile {
  int hr = 0, hc = 0;  // halo rows and columns
  int tiles_x = 0, tiles_per_img = 0;
  FastDiv ftiles_div, tiles_per_img_div, tiles_x_div;
};

struct SParams {
  Params q;
  Tile t;
};

inline int halo_pixels(const ConvGeometry& g, int tr) { return (tr + g.KH - 1) * (kTC + g.KW - 1); }

inline int smem_bytes(const ConvGeometry& g, int tr) {
  return kStages * kStageBytes + 4 * halo_pixels(g, tr) * kChunks * 16 + kBarBytes + 1024;
}

template <class C>
__device__ __forceinline__ void wgmma_ss(float (&d)[C::NT][4], uint64_t a, uint64_t b, int scale_d) {
  if constexpr (C::TR == 16) {
    wgmma::wgmma_ss_m64n128k8(d, a, b, scale_d);
  } else {
    wgmma::wgmma_ss_m64n112k8(d, a, b, scale_d);
  }
}

template <class C>
__global__ void __launch_bounds__(kThreads, 1)
    conv2d_wgs_kernel(const float* __restrict__ x, float* __restrict__ y, const float* __restrict__ /*read by wmap*/,
                      const ConvGeometry g, const Epilogue e, const SParams h,
                      const __grid_constant__ CUtensorMap wmap) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(16) uint8_t smem_raw[];
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  const uint32_t sbase = (raw + 1023u) & ~1023u;
  uint8_t* smem = smem_raw + (sbase - raw);
  const Params& q = h.q;
  const Tile& t = h.t;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int tile = t.ftiles_div.div(static_cast<int>(blockIdx.x));
  const int ftile = static_cast<int>(blockIdx.x) - tile * q.ftiles;
  const int n = t.tiles_per_img_div.div(tile), trem = tile - n * t.tiles_per_img;
  const int ty = t.tiles_x_div.div(trem);
  const int oy0 = ty * C::TR, ox0 = (trem - ty * t.tiles_x) * kTC;
  const int f0 = ftile * kBM;
  const int kk = g.KH * g.KW;

  // Shared memory: [filter stages][set 0: big, small][set 1: big, small][barriers]; a half is kChunks planes
  // of hp pixels x 16 bytes.
  const int hp = t.hr * t.hc;
  const uint32_t plane = static_cast<uint32_t>(hp) * 16u;
  const uint32_t half = kChunks * plane;
  const uint32_t halo0 = sbase + kStages * kStageBytes;
  auto big_half = [&](int set) { return halo0 + 2u * half * static_cast<uint32_t>(set); };
  const uint32_t bar0 = halo0 + 4u * half;
  auto bar = [&](int kt) { return bar0 + 8u * static_cast<uint32_t>(kt % kStages); };

  // The filters of stage kt = (tap, cg), both halves (rows f0 and f_pad + f0 of the packed buffer, 64 rows of
  // 32 k), by TMA, completing on the stage's barrier.
  auto load_w = [&](int kt, int tap, int cg) {
    const uint32_t dst = sbase + (kt % kStages) * kStageBytes;
    const int k0 = (tap * q.cgroups + cg) * kBK;
    tma::mbar_arrive_expect(bar(kt), 2 * kWBytes);
    tma::load_2d(dst, wmap, k0, f0, bar(kt));
    tma::load_2d(dst + kWBytes, wmap, k0, q.f_pad + f0, bar(kt));
  };

  // The raw input of channel group cg into the small half of set `set`: channel c of halo pixel p at chunk
  // plane c / 4, byte p * 16 + (c % 4) * 4. A warp copies chunks warp and warp + 4; lane = 4 * (pixel in a run
  // of 8) + channel in the chunk, so a warp writes 128 contiguous bytes (no bank conflicts) and reads 4 runs of
  // 8 neighbouring pixels. The lanes walk the halo pixels 8 at a time (hc >= 8: one wrap at most a step).
  const int c4 = lane & 3, px = lane >> 2;
  const int iyb = oy0 - g.pad_top, ixb = ox0 - g.pad_left;
  const float* ximg = x + static_cast<int64_t>(n) * q.chw;
  auto copy_halo = [&](int cg, int set) {
    const uint32_t dst_half = big_half(set) + half;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int chunk = warp + 4 * j;
      const float* src = ximg + static_cast<int64_t>(cg * kBK + 4 * chunk + c4) * q.hw;
      uint32_t dst = dst_half + static_cast<uint32_t>(chunk) * plane + static_cast<uint32_t>(px) * 16u + c4 * 4u;
      int hy = 0, hx = px;
#pragma unroll 1
      for (int p = px; p < hp; p += 8) {
        const int iy = iyb + hy, ix = ixb + hx;
        const bool ok = static_cast<unsigned>(iy) < static_cast<unsigned>(g.H) &&
                        static_cast<unsigned>(ix) < static_cast<unsigned>(g.W);
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst),
                     "l"(ok ? src + iy * g.W + ix : x), "r"(ok ? 4 : 0));
        dst += 128u;
        hx += 8;
        if (hx >= t.hc) {
          hx -= t.hc;
          ++hy;
        }
      }
    }
  };
  // Set `set`'s raw input (in its small half) split in place: 16 bytes a thread at a time, big = low 13 bits
  // cleared into the big half, small = the rest. Conflict-free: consecutive threads, consecutive 16 bytes.
  auto split_halo = [&](int set) {
    const uint32_t units = static_cast<uint32_t>(kChunks * hp);
    float4* big = reinterpret_cast<float4*>(smem + (big_half(set) - sbase));
    float4* small = reinterpret_cast<float4*>(smem + (big_half(set) + half - sbase));
#pragma unroll 4
    for (uint32_t u = tid; u < units; u += kThreads) {
      const float4 v = small[u];
      uint32_t b0, b1, b2, b3, s0, s1, s2, s3;
      tc::split_tf32(v.x, b0, s0);
      tc::split_tf32(v.y, b1, s1);
      tc::split_tf32(v.z, b2, s2);
      tc::split_tf32(v.w, b3, s3);
      big[u] = make_float4(__uint_as_float(b0), __uint_as_float(b1), __uint_as_float(b2), __uint_as_float(b3));
      small[u] = make_float4(__uint_as_float(s0), __uint_as_float(s1), __uint_as_float(s2), __uint_as_float(s3));
    }
  };

  const int nst = q.cgroups * kk;
  const int split_tap = kk - 2;
  // Prologue: the filters of stages 0 and 1 before the wait for the prior grid (the packed filters are written
  // once at plan time), then group 0's input, split before the loop.
  int lnext = 0, ltap = 0, lcg = 0;  // the next stage whose filters to load
  auto load_next = [&]() {
    if (tid == 0 && lnext < nst) load_w(lnext, ltap, lcg);
    ++lnext;
    if (++ltap == kk) {
      ltap = 0;
      ++lcg;
    }
  };
  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < kStages; ++s) tma::mbar_init(bar(s), 1);
    tma::fence_barrier_init();
  }
  __syncthreads();  // the barriers are initialised before anyone waits on them
  load_next();
  load_next();
  wait_for_prior_grid();  // launched with PDL (launch.cuh): no input read before this
  copy_halo(0, 0);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  split_halo(0);
  wgmma::fence_proxy_async();  // the split (generic stores) before wgmma (async proxy) reads it

  float acc[C::NT][4], part[C::NT][4];
#pragma unroll
  for (int i = 0; i < C::NT; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
  }

  // Descriptors: the filter stage's big half (128-byte swizzle, wgmma.cuh smem_desc), and set 0's big pixel
  // half at tap (0, 0) (no swizzle, lbo = a chunk plane, sbo = a halo row); the rest are byte offsets.
  const uint64_t a_desc0 = wgmma::smem_desc(sbase);
  const uint64_t b_desc0 = wgmma::smem_desc_plain(halo0, plane, static_cast<uint32_t>(t.hc) * 16u);
  int mtap = 0, mky = 0, mkx = 0, mcg = 0;  // the stage to multiply next
  auto multiply = [&](int kt, bool fresh) {
    tma::mbar_wait(bar(kt), (kt / kStages) & 1);  // the stage's filters have landed
    const uint64_t a_big = wgmma::desc_offset(a_desc0, (kt % kStages) * kStageBytes);
    const uint64_t a_small = wgmma::desc_offset(a_big, kWBytes);
    const uint64_t b_big = wgmma::desc_offset(
        b_desc0, 2u * half * static_cast<uint32_t>(mcg & 1) + static_cast<uint32_t>(mky * t.hc + mkx) * 16u);
    const uint64_t b_small = wgmma::desc_offset(b_big, half);
    wgmma::fence();
#pragma unroll
    for (int s = 0; s < kBK / 8; ++s) {
      const uint32_t ka = 32u * s;            // 8 k = 32 bytes along the (swizzled) filter rows
      const uint32_t kb = 2u * plane * s;     // 8 k = two chunk planes of the halo
      // Corrections first (smaller magnitudes); the partial restarts at its first k step.
      wgmma_ss<C>(part, wgmma::desc_offset(a_big, ka), wgmma::desc_offset(b_small, kb), s > 0 || !fresh);
      wgmma_ss<C>(part, wgmma::desc_offset(a_small, ka), wgmma::desc_offset(b_big, kb), 1);
      wgmma_ss<C>(part, wgmma::desc_offset(a_big, ka), wgmma::desc_offset(b_big, kb), 1);
    }
    wgmma::commit();
  };

  // One partial a trip: P stages, unrolled (no wgmma in flight across the back edge). At every stage all
  // stages up to kt - 2 are done (wait 1 from the third stage of a partial on; the previous partial drained),
  // so after the barrier the filter buffer of kt - 2 takes stage kt + 2, and at tap 1 of group c the buffer set
  // of group c - 1 takes group c + 1's input.
#pragma unroll 1
  for (int a = 0; a < nst; a += C::P) {
#pragma unroll
    for (int s = 0; s < C::P; ++s) {
      const int kt = a + s;
      if (kt >= nst) break;
      if (s >= 2) wgmma::wait<1>();
      const bool has_next = mcg + 1 < q.cgroups;
      const bool split_now = has_next && mtap == split_tap;
      if (split_now) cp_async_wait<0>();  // this thread's copies of group mcg + 1 have landed
      __syncthreads();
      load_next();
      if (has_next && mtap == kCopyTap) {
        copy_halo(mcg + 1, (mcg + 1) & 1);
        cp_async_commit();
      }
      multiply(kt, s == 0);
      if (split_now) {
        split_halo((mcg + 1) & 1);
        wgmma::fence_proxy_async();  // (the next stage's barrier publishes it to the warpgroup)
      }
      if (++mkx == g.KW) {
        mkx = 0;
        if (++mky == g.KH) mky = 0;
      }
      if (++mtap == kk) {
        mtap = 0;
        ++mcg;
      }
    }
    wgmma::wait<0>();
    wgmma::fence_operands(part);
#pragma unroll
    for (int i = 0; i < C::NT; ++i) {
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[i][j] += part[i][j];
    }
  }

  // Epilogue: acc[c][2r + v] is filter f0 + 16 * warp + gid + 8r at tile pixel (row c, column 2 * tig + v).
  const int gid = lane >> 2, tig = lane & 3;
  const int ox = ox0 + 2 * tig;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int f = f0 + 16 * warp + gid + 8 * r;
    if (f >= g.F) continue;
    const float bias = e.bias ? __ldg(e.bias + f) : 0.0f;
    const int64_t plane_out = (static_cast<int64_t>(n) * g.F + f) * q.ohw;
#pragma unroll
    for (int c = 0; c < C::NT; ++c) {
      const int oy = oy0 + c;
      if (oy >= g.OH) continue;
#pragma unroll
      for (int v = 0; v < 2; ++v) {
        if (ox + v >= g.OW) continue;
        const int64_t idx = plane_out + oy * g.OW + ox + v;
        float val = acc[c][2 * r + v] + bias;
        if (e.residual) val += __ldg(e.residual + idx);
        y[idx] = activate<C::ACT>(val, e);
      }
    }
  }
#endif
}

template <class C>
void launch(const float* x, float* y, const float* w, const ConvGeometry& g, const Epilogue& e, cudaStream_t stream) {
  allow_dynamic_smem<conv2d_wgs_kernel<C>>(kMaxSmem);
  SParams h;
  h.q = wg_common::make_params(g, kBM, 1);
  Tile& t = h.t;
  t.hr = C::TR + g.KH - 1;
  t.hc = kTC + g.KW - 1;
  t.tiles_x = (g.OW + kTC - 1) / kTC;
  t.tiles_per_img = t.tiles_x * ((g.OH + C::TR - 1) / C::TR);
  t.ftiles_div = FastDiv(h.q.ftiles);
  t.tiles_per_img_div = FastDiv(t.tiles_per_img);
  t.tiles_x_div = FastDiv(t.tiles_x);
  const int64_t blocks = int64_t(g.N) * t.tiles_per_img * h.q.ftiles;
  CUtensorMap wmap;
  if (!tma::encode_2d_swizzled(&wmap, w, 2 * uint64_t(h.q.f_pad), uint64_t(h.q.K), kBM, kBK)) {
    throw std::runtime_error("wgs: the driver refused the tensor map of the packed filters (cuTensorMapEncodeTiled)");
  }
  launch_overlapped(conv2d_wgs_kernel<C>, dim3(static_cast<unsigned>(blocks)), dim3(kThreads),
                    smem_bytes(g, C::TR), stream, 1, x, y, w, g, e, h, wmap);
}

struct Entry {
  int tr, stages_per_partial;
  Act act;
  void (*launch)(const float*, float*, const float*, const ConvGeometry&, const Epilogue&, cudaStream_t);
};

#define WGS_ENTRY(TR, ACT, P) \
  Entry { TR, P, ACT, &launch<Cfg<TR, ACT, P>> }

const Entry kEntries[] = {
    WGS_ENTRY(16, Act::Relu, 4), WGS_ENTRY(16, Act::Param, 4), WGS_ENTRY(14, Act::Relu, 4),
    WGS_ENTRY(14, Act::Param, 4),
};

#undef WGS_ENTRY

}  // namespace wgs

std::vector<std::pair<TcVariant, double>> conv2d_wgs_scored(const ConvGeometry& g, const Epilogue& e, int sm_count) {
  std::vector<std::pair<TcVariant, double>> scored;
  if (g.stride_h != 1 || g.stride_w != 1 || g.KH * g.KW < wgs::kMinTaps || !tma::available()) return scored;
  const bool relu = e.param_act == ParamAct::Relu;
  const int cgroups = g.C / wgs::kBK;
  for (const wgs::Entry& en : wgs::kEntries) {
    if ((en.act == Act::Relu) != relu) continue;
    if (wgs::smem_bytes(g, en.tr) > wgs::kMaxSmem) continue;
    const int tiles_y = (g.OH + en.tr - 1) / en.tr, tiles_x = (g.OW + wgs::kTC - 1) / wgs::kTC;
    const double blocks = double(g.N) * tiles_y * tiles_x * double((g.F + wgs::kBM - 1) / wgs::kBM);
    const double waves = std::ceil(blocks / std::max(1, sm_count));
    // Tensor work a wave (one block an SM) over the stages, against wgh's score units (conv2d_wgh.cu: 0.4 a
    // 64 x 64 stage at two blocks an SM): the same tensor work in fewer instructions.
    const double stages = double(g.KH * g.KW) * cgroups;
    const double score = 0.3 * waves * wgs::kBM * (8.0 * en.tr) * stages;
    char name[64];
    std::snprintf(name, sizeof name, "wgs_t%dx8_p%d_%s", en.tr, en.stages_per_partial, relu ? "relu" : "act");
    scored.push_back({{name, en.launch}, score});
  }
  return scored;
}

}  // namespace cnnrt::kernels
