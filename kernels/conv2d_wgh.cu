// The 3xTF32 wgmma convolution with a halo tile, registry entry "wgh" (conv2d_wg.cuh): wgr's orientation
// (rows are output pixels, columns filters, A split in registers), but a block's 64 pixels are a TR x TC
// rectangle of one image, and the input goes to shared memory once a channel group, with its halo, instead
// of once a filter tap.
//
// Why: wgr copies its input a tap at a time, 16 4-byte cp.async a thread a stage with their address
// arithmetic, and reads its fragments 4 bytes at a time; ncu counted ~510 instructions a warp a stage
// against 12 wgmma, so it ran at 0.39 issued a cycle and about 37% of the 3xTF32 peak at batch 32
//. Here the (TR + KH - 1) x (TC + KW - 1) halo of 32 channels lands once and every
// tap of the group reads it at an offset: the copies a stage drop by about KH*KW / (halo / tile), and the
// taps' address arithmetic is one add.
//
// The halo tile: one 160-byte record a pixel, 32 channels and 8 floats of padding. Within each 8 channels
// the record holds c0 c4 c1 c5 c2 c6 c3 c7, so a thread's two A values of a k step (k = tig and tig + 4 of
// the m16n8k8 fragment) are one 8-byte load. Lanes (gid, tig) read pixel p + gid at float 40 * (p + gid) +
// 2 * tig: eight banks a pixel, four pixels a half warp, no conflicts. The copies: 4-byte cp.async, zero fill
// outside the image, a warp 8 channels of 4 neighbouring pixels (conflict-free writes, 8 cache lines).
//
// Stages are (channel group, tap), the taps of a group consecutive; the filters of a stage come by TMA
// (kernels/tma.cuh) two stages ahead, from the packed buffer wgr reads too. The halo of group c + 1 goes
// into the other of two buffers with tap 3 of group c (the last stage that read that buffer is then behind
// the barrier), so KH*KW >= 4. A K split gives each rank of the cluster whole channel groups.
//
// Where it stands: batch 32 56x56 c64 k3 in 96 us is 442 TF32 FMA a clock an SM
// counting the three passes, 43% of the tensor rate, where the same wgmma pattern alone reaches 92%
// (kernels/lab/wgmma_peak.cu); the rest goes to the stages' loads, split and barriers, with two blocks (eight
// warps) an SM to hide them.
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

namespace wgh {

using wg_common::kBK;
using wg_common::kFAlign;
using wg_common::kRowBytes;
using wg_common::Params;

constexpr int kPixBytes = 160;     // one halo record: 32 channels + 8 floats of padding (bank spread)
constexpr int kMinTaps = 4;        // the next group's halo is loaded with tap 3
constexpr int kMaxSmem = 227 * 1024;
constexpr int kBarBytes = 64;      // the filter stages' barriers (8 bytes each), after the halo buffers

// WGS warpgroups, each 64 pixels x BN filters (wgmma m64nBNk8); they share the halo and the filter stages.
// P: stages the tensor cores sum into one partial before it is added to the FP32 sum (P * 4 truncating sums of
// the large partial, P * 12 on the 128-filter tile: wg_common::mma_3xtf32_step). The tensor pipe drains once a
// partial.
template <int WGS_, int BN_, Act ACT_, int P_>
struct Cfg {
  static constexpr int WGS = WGS_, BN = BN_, STAGES = 4, P = P_;
  static_assert(P >= 2, "stage kt loads stage kt + 2 into the buffer of stage kt - 2: a partial spans two stages at least");
  static constexpr Act ACT = ACT_;
  static constexpr int BM = 64 * WGS, THREADS = 128 * WGS;
  static constexpr int NT = BN / 8;
  static constexpr bool SEPARATE = wg_common::separate_cross(BN);  // the correction terms in an accumulator of their own
  static constexpr int W_BYTES = BN * kRowBytes;  // one half (big or small)
  static constexpr int STAGE_BYTES = 2 * W_BYTES;
  static constexpr int RECV_BYTES = NT * THREADS * 16;  // the split's partial tiles
  static_assert(W_BYTES % 1024 == 0, "swizzle atoms stay 1024-byte aligned");
  static_assert(kFAlign % BN == 0, "packed filters cover every filter tile");
};

// The pixel tile: TR x TC outputs of one image, their halo HR x HC inputs (stride 1).
struct Tile {
  int tr = 0, tc = 0, hr = 0, hc = 0;
  int tiles_x = 0, tiles_per_img = 0;
  double use = 0.0;  // the share of wgmma rows that are real output pixels
  FastDiv ftiles_div, tiles_per_img_div, tiles_x_div, tc_div;  // (set by launch)
};

struct HParams {
  Params q;
  Tile t;
};

// The tile shape with the most real pixels in the wgmma rows, then the smallest halo, whose two halo buffers
// fit next to the filter stages in `max_halo_px` records (none: tr == 0).
inline Tile choose_tile(const ConvGeometry& g, int bm, int max_halo_px) {
  Tile best;
  for (int tc = 1; tc <= bm; ++tc) {
    const int tr = bm / tc;
    Tile t;
    t.tr = tr;
    t.tc = tc;
    t.hr = tr + g.KH - 1;
    t.hc = tc + g.KW - 1;
    if (t.hr * t.hc > max_halo_px) continue;
    t.tiles_x = (g.OW + tc - 1) / tc;
    t.tiles_per_img = t.tiles_x * ((g.OH + tr - 1) / tr);
    t.use = double(g.OH) * g.OW / (double(t.tiles_per_img) * bm);
    const bool better = best.tr == 0 || t.use > best.use + 1e-9 ||
                        (t.use > best.use - 1e-9 && t.hr * t.hc < best.hr * best.hc);
    if (better) best = t;
  }
  return best;
}

template <class C>
constexpr int max_halo_px() {
  return (kMaxSmem - 1024 - kBarBytes - C::STAGES * C::STAGE_BYTES) / (2 * kPixBytes);
}

template <class C>
int smem_bytes(const Tile& t) {
  return std::max(C::STAGES * C::STAGE_BYTES + 2 * t.hr * t.hc * kPixBytes + kBarBytes, C::RECV_BYTES) + 1024;
}

template <class C>
__global__ void __launch_bounds__(C::THREADS, 1)
    conv2d_wgh_kernel(const float* __restrict__ x, float* __restrict__ y, const float* __restrict__ /*read by wmap*/,
                      const ConvGeometry g, const Epilogue e, const HParams h,
                      const __grid_constant__ CUtensorMap wmap) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(16) uint8_t smem_raw[];
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  const uint32_t sbase = (raw + 1023u) & ~1023u;
  uint8_t* smem = smem_raw + (sbase - raw);
  const Params& q = h.q;
  const Tile& t = h.t;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, wgi = warp >> 2;
  const int gid = lane >> 2, tig = lane & 3;
  const int tile = t.ftiles_div.div(static_cast<int>(blockIdx.x));
  const int ftile = static_cast<int>(blockIdx.x) - tile * q.ftiles;
  const int n = t.tiles_per_img_div.div(tile), trem = tile - n * t.tiles_per_img;
  const int ty = t.tiles_x_div.div(trem);
  const int oy0 = ty * t.tr, ox0 = (trem - ty * t.tiles_x) * t.tc;
  const int f0 = ftile * C::BN;
  const int kk = g.KH * g.KW;

  // The filters of stage kt = (tap, cg), both halves (rows f0 and f_pad + f0 of the packed buffer, BN rows
  // of 32 k), by TMA into the stage's buffer, 128-byte swizzled; one thread asks, and the stage's barrier
  // (kt % STAGES) completes its (kt / STAGES)-th phase when the bytes have landed.
  const int halo_bytes = t.hr * t.hc * kPixBytes;
  const uint32_t bar0 = sbase + C::STAGES * C::STAGE_BYTES + 2 * halo_bytes;
  auto bar = [&](int kt) { return bar0 + 8u * static_cast<uint32_t>(kt % C::STAGES); };
  auto load_w = [&](int kt, int tap, int cg) {
    if (tid == 0) {
      const uint32_t dst = sbase + (kt % C::STAGES) * C::STAGE_BYTES;
      const int k0 = (tap * q.cgroups + cg) * kBK;
      tma::mbar_arrive_expect(bar(kt), 2 * C::W_BYTES);
      tma::load_2d(dst, wmap, k0, f0, bar(kt));
      tma::load_2d(dst + C::W_BYTES, wmap, k0, q.f_pad + f0, bar(kt));
    }
  };

  // The halo of channel group cg into buffer `buf`: this thread copies channel `ch` (its warp's octet of the
  // 32) of the halo columns 4 * wgi + lane / 8 + 4 * WGS * i of every row. A warp's copy is 8 channels of 4
  // neighbouring pixels: 8 cache lines for the L1 to look up (32 when a warp took the 32 channels of one
  // pixel: the copies then held the issue), and the writes land in 32 banks.
  uint8_t* halo = smem + C::STAGES * C::STAGE_BYTES;
  const int ch8 = lane & 7, ch = 8 * (warp & 3) + ch8;
  const int rec = 8 * (warp & 3) + (ch8 < 4 ? 2 * ch8 : 2 * ch8 - 7);  // the channel's place in a record
  const float* xch = x + static_cast<int64_t>(n) * q.chw + static_cast<int64_t>(ch) * q.hw;
  const int iyb = oy0 - g.pad_top, ixb = ox0 - g.pad_left;
  constexpr int kPxStep = 4 * C::WGS;  // halo columns between a thread's copies
  const int hc_first = 4 * wgi + (lane >> 3);
  // Row by row: the row's bounds test and pointer once, then a few instructions a copy (a running pixel
  // index with its wrap cost ~48 a copy).
  auto load_halo = [&](int cg, int buf) {
    uint8_t* dst = halo + buf * halo_bytes + rec * 4;
    const float* src = xch + static_cast<int64_t>(cg) * kBK * q.hw;
#pragma unroll 1
    for (int hr = 0; hr < t.hr; ++hr) {
      const int iy = iyb + hr;
      const bool row_ok = static_cast<unsigned>(iy) < static_cast<unsigned>(g.H);
      const float* srow = src + iy * g.W + ixb;
      uint8_t* drow = dst + hr * t.hc * kPixBytes;
      for (int hc = hc_first; hc < t.hc; hc += kPxStep) {
        const bool ok = row_ok && static_cast<unsigned>(ixb + hc) < static_cast<unsigned>(g.W);
        cp_async_4(drow + hc * kPixBytes, ok ? srow + hc : x, ok);
      }
    }
  };

  // K split: rank z of the cluster runs channel groups [c_begin, c_end), every tap of each.
  const int rank = static_cast<int>(blockIdx.z);
  const int c_begin = q.cgroups * rank / q.split, c_end = q.cgroups * (rank + 1) / q.split;
  const int nst = (c_end - c_begin) * kk;
  // The next stage to load: its index, tap and channel group. One commit group a stage, empty past the end.
  int next = 0, ltap = 0, lcg = c_begin;
  auto load_next = [&](bool with_filters) {
    if (next < nst) {
      if (with_filters) load_w(next, ltap, lcg);
      if (ltap == kMinTaps - 1 && lcg + 1 < c_end) load_halo(lcg + 1, (lcg + 1 - c_begin) & 1);
      if (++ltap == kk) {
        ltap = 0;
        ++lcg;
      }
    }
    ++next;
    cp_async_commit();
  };

  // Prologue: the filters of the first STAGES - 2 stages (taps 0 and 1 of the first group) before the wait for
  // the prior grid (the packed filters are written once at plan time); then the first halo, in stage 0's group.
  constexpr int kAhead = C::STAGES - 2;
  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < C::STAGES; ++s) tma::mbar_init(bar(s), 1);
    tma::fence_barrier_init();  // (the other threads wait on them after the loop's first __syncthreads)
  }
#pragma unroll
  for (int s = 0; s < kAhead; ++s) load_w(s, s, c_begin);
  wait_for_prior_grid();  // launched with PDL (launch.cuh): no input read before this
  load_halo(c_begin, 0);
#pragma unroll
  for (int s = 0; s < kAhead; ++s) load_next(false);

  float acc[C::NT][4], part[C::NT][4], cross[C::NT][4];
#pragma unroll
  for (int i = 0; i < C::NT; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
  }
  // This thread's two pixel rows of the tile (m = 16 * warp + gid + 8r, warp of the block): their record
  // offsets in the halo
  // (a row past the tile reads record 0; it is never stored), and their places in y.
  int hoff[2];
  int64_t out[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int m = 16 * warp + gid + 8 * r;  // (warpgroup wgi: rows 64 wgi .. 64 wgi + 63)
    const int my = t.tc_div.div(m), mx = m - my * t.tc;
    const int oy = oy0 + my, ox = ox0 + mx;
    const bool real = my < t.tr && oy < g.OH && ox < g.OW;
    hoff[r] = (my < t.tr ? my * t.hc + mx : 0) * kPixBytes + tig * 8;
    out[r] = real ? static_cast<int64_t>(n) * e.out_image_stride(int64_t(g.F) * q.ohw) + oy * g.OW + ox : -1;
  }
  // The tap and halo buffer of the next stage to multiply.
  int cbuf = 0, cky = 0, ckx = 0;
  auto split_fragments = [&](uint32_t (&f)[2][4][4]) {
    const uint8_t* hb = halo + cbuf * halo_bytes + (cky * t.hc + ckx) * kPixBytes;
#pragma unroll
    for (int s = 0; s < kBK / 8; ++s) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float2 v = *reinterpret_cast<const float2*>(hb + hoff[r] + 32 * s);
        tc::split_tf32(v.x, f[0][s][r], f[1][s][r]);          // k = tig
        tc::split_tf32(v.y, f[0][s][2 + r], f[1][s][2 + r]);  // k = tig + 4
      }
    }
    if (++ckx == g.KW) {
      ckx = 0;
      if (++cky == g.KH) {
        cky = 0;
        cbuf ^= 1;
      }
    }
  };
  const uint64_t desc0 = wgmma::smem_desc(sbase);  // stage 0's big filter half; the rest are offsets from it
  auto multiply = [&](int kt, const uint32_t (&f)[2][4][4], bool fresh) {
    tma::mbar_wait(bar(kt), (kt / C::STAGES) & 1);  // the stage's filters have landed
    const uint64_t d_big = wgmma::desc_offset(desc0, (kt % C::STAGES) * C::STAGE_BYTES);
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

  // One partial a trip: P stages, unrolled (no wgmma is in flight across the loop's back edge, where ptxas
  // would move the accumulator registers). Stage kt first waits for its halo copies (cp.async groups up to
  // kt) and, from the third stage of a partial on, for the wgmma of stage kt - 2 (wgmma.wait 1: kt - 1 may
  // still run), whose A fragments it overwrites and whose filter buffer it refills with stage kt + 2; the
  // barrier makes both true for every warpgroup. Only the partial's end drains the tensor pipe (wait 0),
  // where two stages a partial drained it every second stage.
  uint32_t frag[2][2][4][4];  // [stage parity][big, small][k step][4]
#pragma unroll 1
  for (int a = 0; a < nst; a += C::P) {
#pragma unroll
    for (int s = 0; s < C::P; ++s) {
      const int kt = a + s;
      if (kt >= nst) break;
      cp_async_wait<1>();
      if (s >= 2) {
        wgmma::wait<1>();
        wgmma::fence_operands(frag[s & 1]);
      }
      __syncthreads();
      load_next(true);
      split_fragments(frag[s & 1]);
      multiply(kt, frag[s & 1], s == 0);
    }
    wgmma::wait<0>();
    wgmma::fence_operands(part);
    if constexpr (C::SEPARATE) wgmma::fence_operands(cross);
    wgmma::fence_operands(frag[0]);
    wgmma::fence_operands(frag[1]);
    wg_common::add_partial<C::SEPARATE>(acc, part, cross);
  }

  int c_first = 0, c_last = C::NT;
  if (q.split > 1) {
    cp_async_wait<0>();
    wg_common::cluster_sum_tiles<C::NT, C::THREADS>(acc, smem, rank, q.split, c_first, c_last);
  }
  wg_common::store_pixel_rows<C::NT, C::ACT>(acc, out, f0, g.F, q.ohw, e, y, c_first, c_last);
#endif
}

template <class C, int SPLIT>
void launch(const float* x, float* y, const float* w, const ConvGeometry& g, const Epilogue& e, cudaStream_t stream) {
  allow_dynamic_smem<conv2d_wgh_kernel<C>>(kMaxSmem);
  HParams h;
  h.q = wg_common::make_params(g, C::BN, SPLIT);
  h.t = choose_tile(g, C::BM, max_halo_px<C>());
  h.t.ftiles_div = FastDiv(h.q.ftiles);
  h.t.tiles_per_img_div = FastDiv(h.t.tiles_per_img);
  h.t.tiles_x_div = FastDiv(h.t.tiles_x);
  h.t.tc_div = FastDiv(h.t.tc);
  const int64_t blocks = int64_t(g.N) * h.t.tiles_per_img * h.q.ftiles;
  CUtensorMap wmap;
  if (!tma::encode_2d_swizzled(&wmap, w, 2 * uint64_t(h.q.f_pad), uint64_t(h.q.K), C::BN, kBK)) {
    throw std::runtime_error("wgh: the driver refused the tensor map of the packed filters (cuTensorMapEncodeTiled)");
  }
  launch_overlapped(conv2d_wgh_kernel<C>, dim3(static_cast<unsigned>(blocks), 1, SPLIT), dim3(C::THREADS),
                    smem_bytes<C>(h.t), stream, SPLIT, x, y, w, g, e, h, wmap);
}

struct Entry {
  int wgs, bn, split, stages_per_partial;
  Act act;
  int max_halo_px;
  int (*smem)(const Tile&);
  void (*launch)(const float*, float*, const float*, const ConvGeometry&, const Epilogue&, cudaStream_t);
};

#define WGH_ENTRY(WGS, BN, ACT, P, SPLIT)                                                                \
  Entry {                                                                                                \
    WGS, BN, SPLIT, P, ACT, max_halo_px<Cfg<WGS, BN, ACT, P>>(), &smem_bytes<Cfg<WGS, BN, ACT, P>>,     \
        &launch<Cfg<WGS, BN, ACT, P>, SPLIT>                                                             \
  }

// 64 x 64, one warpgroup (two blocks an SM where the halo has at most 150 records), splits 1, 2, 4, partials
// of 4 stages; and 128 x 128, two warpgroups on one halo and one filter tile (one block an SM), splits 1, 2,
// partials of 2 stages. Both partials were built for both tiles once: 4 stages won
// every 64 x 64 layer (0.5-4.5%), and lost every 128 x 128 one (255 registers and a 192-byte stack there).
// 64 x 32, for layers of at most 32 filters (half of a 64-filter tile would be padding): the same pipeline at half
// the tensor work a stage, splits 1 and 2.
const Entry kEntries[] = {
    WGH_ENTRY(1, 32, Act::Relu, 4, 1),   WGH_ENTRY(1, 32, Act::Relu, 4, 2),
    WGH_ENTRY(1, 32, Act::Param, 4, 1),  WGH_ENTRY(1, 32, Act::Param, 4, 2),
    WGH_ENTRY(1, 64, Act::Relu, 4, 1),   WGH_ENTRY(1, 64, Act::Relu, 4, 2),   WGH_ENTRY(1, 64, Act::Relu, 4, 4),
    WGH_ENTRY(1, 64, Act::Param, 4, 1),  WGH_ENTRY(1, 64, Act::Param, 4, 2),  WGH_ENTRY(1, 64, Act::Param, 4, 4),
    WGH_ENTRY(2, 128, Act::Relu, 2, 1),  WGH_ENTRY(2, 128, Act::Relu, 2, 2),
    WGH_ENTRY(2, 128, Act::Param, 2, 1), WGH_ENTRY(2, 128, Act::Param, 2, 2),
};

#undef WGH_ENTRY

}  // namespace wgh

namespace {

std::string variant_name(const wgh::Entry& en, const std::string& tile) {
  return "wgh_t" + tile + "_px" + std::to_string(64 * en.wgs) + "_f" + std::to_string(en.bn) + "_st" +
         std::to_string(en.stages_per_partial) + "_" + (en.act == Act::Relu ? "relu" : "act") +
         (en.split > 1 ? "_split" + std::to_string(en.split) : "");
}

class WghFamily final : public ConvFamily {
 public:
  WghFamily()
      : ConvFamily("wgh",
                   "3xTF32 wgmma from a halo tile: a rectangle of output pixels whose input of 32 channels lands once and "
                   "serves every filter tap; filters by TMA; partials of st stages",
                   {kCpAsync | kClusters | kTma | kWgmma}, pack_wg) {}

  bool writes_image_stride() const override { return true; }
  std::string reject(const ConvLayer& layer, const DeviceCaps&) const override {
    std::string why = wg_reject(layer);
    if (!why.empty()) return why;
    const ConvGeometry& g = layer.g;
    if (g.C % wgh::kBK != 0) return "input channels not a multiple of 32";
    if (g.stride_h != 1 || g.stride_w != 1) return "stride other than 1";
    if (g.KH * g.KW < wgh::kMinTaps) return "fewer than 4 filter taps";
    if (!tma::available()) return "the driver offers no tensor-map encoder";
    return "";
  }


  std::vector<ConvVariant> variants(const ConvLayer& layer, const DeviceCaps& dev, const LayerWeights& w) const override {
    const ConvGeometry& g = layer.g;
    const bool relu = layer.e.param_act == ParamAct::Relu;
    const int sm_count = std::max(1, dev.sm_count);
    const int cgroups = g.C / wgh::kBK;
    std::vector<std::pair<ConvVariant, double>> scored;  // score: estimated relative time, lower is better
    for (const wgh::Entry& en : wgh::kEntries) {
      if ((en.act == Act::Relu) != relu) continue;
      if (en.bn > 64 && g.F <= 64) continue;
      if (en.bn < 64 && g.F > 32) continue;
      if (en.split > cgroups) continue;  // a rank runs whole channel groups
      const int bm = 64 * en.wgs;
      const wgh::Tile t = wgh::choose_tile(g, bm, en.max_halo_px);
      if (t.tr == 0) continue;  // no halo fits
      const double tiles = double(g.N) * t.tiles_per_img * double((g.F + en.bn - 1) / en.bn);
      const int per_sm = std::max(1, (228 * 1024) / (en.smem(t) + 1024));
      if (en.split > 1 && tiles * en.split > 2.0 * sm_count * per_sm) continue;  // full already
      const double waves = std::ceil(tiles * en.split / (double(sm_count) * per_sm));
      // wgr's score with fewer instructions a stage, for the real pixels among the rows.
      const double stages = double(g.KH * g.KW) * cgroups / en.split + (en.split > 1 ? 1.0 : 0.0);
      const double score = 0.4 * waves * bm * en.bn * per_sm * stages / t.use;
      const std::string tile = std::to_string(t.tc) + "x" + std::to_string(t.tr);
      scored.push_back({{variant_name(en, tile), "", bind_launch(en.launch, layer, w.packed)}, score});
    }
    return rank_by_score(std::move(scored));
  }

  std::vector<std::string> variant_names() const override {
    return entry_names(wgh::kEntries, [](const wgh::Entry& en) { return variant_name(en, "*"); });
  }
};

}  // namespace

const ConvFamily& conv2d_wgh_family() {
  static const WghFamily family;
  return family;
}

}  // namespace cnnrt::kernels
