// Family "dot": each output a dot product split over the 32 lanes of a warp, for layers too small to fill the
// GPU with tiles (batch 1 and small maps).
//
// A tiled kernel gives a small layer a handful of blocks, each walking the whole reduction (C*KH*KW) in a
// serial pipeline: a 1x1 convolution of 144 channels on a 6x6 map is one 64x64 tile and takes several
// microseconds of dependent shared-memory stages. Here a warp computes FW filters x P output pixels, its lanes
// taking every 32nd tap k = (c, ky, kx): each lane multiplies FW filter values (consecutive k across the lanes:
// coalesced) by P gathered inputs, so a warp's loads are independent of one another and the reduction is a few
// loop trips deep; a butterfly of shuffles then sums the lanes' partials, and the lanes write the FW x P
// outputs with the epilogue (bias, residual, activation). The warps of a block share their output pixels and
// take different filters, so the gathered inputs come from L1 after the first warp.
//
// A fused pool: a warp's pixels are pooled outputs; it sums the conv output at each position of their windows in
// turn (the same reduction), applies bias and activation and folds it into the max or the sum.
//
// Any geometry: groups, strides, dilations, padding, 1-D. The weights are read as ONNX stores them. The input may
// be read through a per-channel affine and activation (InputPrologue: DenseNet's BatchNormalization + ReLU in front
// of a convolution), applied to each gathered value inside the map; the padding stays zero.
#include "kernels/conv_common.cuh"
#include "kernels/conv_device.cuh"
#include "kernels/conv_registry.hpp"
#include "kernels/fast_div.cuh"
#include "kernels/launch.cuh"

namespace cnnrt::kernels {

namespace dot {

constexpr int kWarps = 4;  // warps a block: same pixels, consecutive filter tiles

// The layer's extents as the kernel reads them.
struct Params {
  int K;            // C/groups * KH * KW
  int cg, fg;       // input channels and filters a group
  int ohw, npix;    // the output plane (PH * PW when pooled, else OH * OW) and N times it
  int out_w;        // the output plane's width
  int ftiles;       // filter tiles a group
  int group_tiles;  // filter tiles of all groups: warps a pixel tile
  int items;        // warps in all: group_tiles * pixel tiles
  int x_image;      // floats from one input image to the next (C * H * W, or InputPrologue::image_floats)
  FastDiv by_taps, by_kw, by_ohw, by_ow, by_group_tiles, by_ftiles;
};

// The warp's sums for FW filters (weights from wf) x P pixels (window origins iy0, ix0; input offsets xoff of
// image n, the group's first channel; origins far outside: no pixel): its lanes take every 32nd tap, a butterfly
// of shuffles leaves every lane the full sums.
template <int FW, int P, bool PRO, bool PRE_RELU>
__device__ __forceinline__ void warp_sums_as(float (&acc)[FW][P], const float* __restrict__ x, const float* const (&wf)[FW],
                                          const int (&iy0)[P], const int (&ix0)[P], const int (&xoff)[P],
                                          const ConvGeometry& g, const InputPrologue& in, const Params& q, int group,
                                          int lane) {
  const int hw = g.H * g.W;
#pragma unroll
  for (int i = 0; i < FW; ++i) {
#pragma unroll
    for (int p = 0; p < P; ++p) acc[i][p] = 0.0f;
  }
#pragma unroll 2
  for (int k = lane; k < q.K; k += 32) {
    const int c = q.by_taps.div(k);
    const int t = k - c * static_cast<int>(q.by_taps.d);
    const int ky = q.by_kw.div(t);
    const int kx = (t - ky * g.KW) * g.dil_w;
    const int dy = ky * g.dil_h;
    float wv[FW];
#pragma unroll
    for (int i = 0; i < FW; ++i) wv[i] = __ldg(wf[i] + k);
    float scale = 1.0f, shift = 0.0f;
    if constexpr (PRO) {
      scale = __ldg(in.scale + group * q.cg + c);
      shift = __ldg(in.shift + group * q.cg + c);
    }
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const int iy = iy0[p] + dy, ix = ix0[p] + kx;
      const bool inside = static_cast<unsigned>(iy) < static_cast<unsigned>(g.H) &&
                          static_cast<unsigned>(ix) < static_cast<unsigned>(g.W);
      float xv = inside ? __ldg(x + xoff[p] + c * hw + iy * g.W + ix) : 0.0f;
      if constexpr (PRO && PRE_RELU) {
        xv = inside ? fmaxf(fmaf(xv, scale, shift), 0.0f) : 0.0f;
      } else if constexpr (PRO) {
        xv = inside ? param_activate(fmaf(xv, scale, shift), in.act, in.alpha, in.beta) : 0.0f;
      }
#pragma unroll
      for (int i = 0; i < FW; ++i) acc[i][p] = fmaf(wv[i], xv, acc[i][p]);
    }
  }
#pragma unroll
  for (int i = 0; i < FW; ++i) {
#pragma unroll
    for (int p = 0; p < P; ++p) {
#pragma unroll
      for (int offset = 16; offset > 0; offset >>= 1) acc[i][p] += __shfl_xor_sync(0xffffffffu, acc[i][p], offset);
    }
  }
}

// warp_sums_as with the prologue's activation picked once, not on every gathered value: ReLU (DenseNet's) compiled in.
template <int FW, int P, bool PRO>
__device__ __forceinline__ void warp_sums(float (&acc)[FW][P], const float* __restrict__ x, const float* const (&wf)[FW],
                                          const int (&iy0)[P], const int (&ix0)[P], const int (&xoff)[P],
                                          const ConvGeometry& g, const InputPrologue& in, const Params& q, int group,
                                          int lane) {
  if (PRO && in.act == ParamAct::Relu) {
    warp_sums_as<FW, P, PRO, true>(acc, x, wf, iy0, ix0, xoff, g, in, q, group, lane);
  } else {
    warp_sums_as<FW, P, PRO, false>(acc, x, wf, iy0, ix0, xoff, g, in, q, group, lane);
  }
}

// The warp's filter tile: its group, first filter within the group, and each filter's weights.
struct WarpTile {
  int ptile, group, f0;
};
__device__ __forceinline__ WarpTile warp_tile(int item, const Params& q, int fw) {
  WarpTile t;
  t.ptile = q.by_group_tiles.div(item);
  const int tile = item - t.ptile * q.group_tiles;
  t.group = q.by_ftiles.div(tile);
  t.f0 = (tile - t.group * q.ftiles) * fw;
  return t;
}

template <int FW, int P, Act ACT, bool PRO>
__global__ void __launch_bounds__(kWarps * 32)
    conv2d_dot_kernel(const float* __restrict__ x, float* __restrict__ y, const float* __restrict__ w,
                      const ConvGeometry g, const Epilogue e, const InputPrologue in, const Params q) {
  wait_for_prior_grid_release_at_exit();  // launched with PDL (launch.cuh): nothing global before this
  const int lane = threadIdx.x & 31;
  const int item = static_cast<int>(blockIdx.x) * kWarps + static_cast<int>(threadIdx.x >> 5);
  if (item >= q.items) return;
  const WarpTile wt = warp_tile(item, q, FW);
  const int hw = g.H * g.W;

  // The warp's pixels (the same in every lane): window origins and the offset of input (n, group's first channel).
  int iy0[P], ix0[P], xoff[P];
#pragma unroll
  for (int p = 0; p < P; ++p) {
    const int pix = wt.ptile * P + p;
    if (pix < q.npix) {
      const int n = q.by_ohw.div(pix), rem = pix - n * q.ohw;
      const int oy = q.by_ow.div(rem), ox = rem - oy * g.OW;
      iy0[p] = oy * g.stride_h - g.pad_top;
      ix0[p] = ox * g.stride_w - g.pad_left;
      xoff[p] = n * q.x_image + wt.group * q.cg * hw;
    } else {
      iy0[p] = ix0[p] = -(1 << 30);  // every tap outside: contributes nothing
      xoff[p] = 0;
    }
  }
  const float* wf[FW];
#pragma unroll
  for (int i = 0; i < FW; ++i) wf[i] = w + static_cast<int64_t>(wt.group * q.fg + min(wt.f0 + i, q.fg - 1)) * q.K;
  float acc[FW][P];
  warp_sums<FW, P, PRO>(acc, x, wf, iy0, ix0, xoff, g, in, q, wt.group, lane);
  // Lane i*P + p writes output (filter f0 + i, pixel p).
#pragma unroll
  for (int i = 0; i < FW; ++i) {
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const int pix = wt.ptile * P + p;
      if (lane != i * P + p || wt.f0 + i >= q.fg || pix >= q.npix) continue;
      const int f = wt.group * q.fg + wt.f0 + i;
      const int n = q.by_ohw.div(pix), rem = pix - n * q.ohw;
      const int64_t at = static_cast<int64_t>(n) * e.out_image_stride(int64_t(g.F) * q.ohw) + int64_t(f) * q.ohw + rem;
      float v = acc[i][p] + (e.bias ? __ldg(e.bias + f) : 0.0f);
      if (e.residual) v += __ldg(e.residual + at);
      y[at] = activate<ACT>(v, e);
    }
  }
}

// Pooled: the warp's pixels are pooled outputs [N, F, PH, PW]; the conv outputs at each position of their windows
// in turn, each activated and folded into the max or the sum (no residual: never with a pool).
template <int FW, int P, Act ACT, bool PRO>
__global__ void __launch_bounds__(kWarps * 32)
    conv2d_dot_pool_kernel(const float* __restrict__ x, float* __restrict__ y, const float* __restrict__ w,
                           const ConvGeometry g, const Epilogue e, const InputPrologue in, const Params q) {
  wait_for_prior_grid_release_at_exit();  // launched with PDL (launch.cuh): nothing global before this
  const int lane = threadIdx.x & 31;
  const int item = static_cast<int>(blockIdx.x) * kWarps + static_cast<int>(threadIdx.x >> 5);
  if (item >= q.items) return;
  const WarpTile wt = warp_tile(item, q, FW);
  const PoolGeometry& pool = e.pool;
  const bool max_pool = pool.kind == FusedPool::Max;

  int img[P], py[P], px[P];  // img -1: past the outputs
#pragma unroll
  for (int p = 0; p < P; ++p) {
    const int pix = wt.ptile * P + p;
    img[p] = pix < q.npix ? q.by_ohw.div(pix) : -1;
    const int rem = pix - max(img[p], 0) * q.ohw;
    py[p] = q.by_ow.div(rem);
    px[p] = rem - py[p] * q.out_w;
  }
  const float* wf[FW];
  float bias[FW];
#pragma unroll
  for (int i = 0; i < FW; ++i) {
    const int f = wt.group * q.fg + min(wt.f0 + i, q.fg - 1);
    wf[i] = w + static_cast<int64_t>(f) * q.K;
    bias[i] = e.bias ? __ldg(e.bias + f) : 0.0f;
  }
  float out[FW][P];
  int inside_count[P], padded_count[P];  // window positions on the conv map, and within its padded extent
#pragma unroll
  for (int p = 0; p < P; ++p) {
    inside_count[p] = padded_count[p] = 0;
#pragma unroll
    for (int i = 0; i < FW; ++i) out[i][p] = max_pool ? -INFINITY : 0.0f;
  }
  for (int wpos = 0; wpos < pool.kh * pool.kw; ++wpos) {
    const int wy = wpos / pool.kw, wx = wpos - wy * pool.kw;
    int iy0[P], ix0[P], xoff[P];
    bool exists[P];
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const int cy = py[p] * pool.sh - pool.pad_top + wy * pool.dil_h;
      const int cx = px[p] * pool.sw - pool.pad_left + wx * pool.dil_w;
      padded_count[p] += cy < g.OH + pool.pad_bottom && cx < g.OW + pool.pad_right;
      exists[p] = img[p] >= 0 && static_cast<unsigned>(cy) < static_cast<unsigned>(g.OH) &&
                  static_cast<unsigned>(cx) < static_cast<unsigned>(g.OW);
      inside_count[p] += exists[p];
      iy0[p] = exists[p] ? cy * g.stride_h - g.pad_top : -(1 << 30);
      ix0[p] = exists[p] ? cx * g.stride_w - g.pad_left : -(1 << 30);
      xoff[p] = exists[p] ? img[p] * q.x_image + wt.group * q.cg * g.H * g.W : 0;
    }
    float acc[FW][P];
    warp_sums_as<FW, P, PRO, false>(acc, x, wf, iy0, ix0, xoff, g, in, q, wt.group, lane);
#pragma unroll
    for (int i = 0; i < FW; ++i) {
#pragma unroll
      for (int p = 0; p < P; ++p) {
        if (!exists[p]) continue;
        const float v = activate<ACT>(acc[i][p] + bias[i], e);
        out[i][p] = max_pool ? fmaxf(out[i][p], v) : out[i][p] + v;
      }
    }
  }
#pragma unroll
  for (int i = 0; i < FW; ++i) {
#pragma unroll
    for (int p = 0; p < P; ++p) {
      if (lane != i * P + p || wt.f0 + i >= q.fg || img[p] < 0) continue;
      const int f = wt.group * q.fg + wt.f0 + i;
      const int64_t at = static_cast<int64_t>(img[p]) * e.out_image_stride(int64_t(g.F) * q.ohw) + int64_t(f) * q.ohw +
                         py[p] * q.out_w + px[p];
      const int count = pool.count_include_pad ? padded_count[p] : inside_count[p];
      y[at] = max_pool ? out[i][p] : out[i][p] / static_cast<float>(max(count, 1));
    }
  }
}

template <int FW, int P, Act ACT, bool PRO, bool POOL>
void launch(const float* x, float* y, const float* w, const ConvGeometry& g, const Epilogue& e, InputPrologue in,
            cudaStream_t stream) {
  Params q;
  q.cg = g.C / g.groups;
  q.fg = g.F / g.groups;
  q.K = q.cg * g.KH * g.KW;
  q.out_w = POOL ? e.pool.PW : g.OW;
  q.ohw = POOL ? e.pool.PH * e.pool.PW : g.OH * g.OW;
  q.npix = g.N * q.ohw;
  q.ftiles = (q.fg + FW - 1) / FW;
  q.group_tiles = g.groups * q.ftiles;
  q.items = q.group_tiles * ((q.npix + P - 1) / P);
  q.x_image = static_cast<int>(in.image_stride(int64_t(g.C) * g.H * g.W));
  q.by_taps = FastDiv(g.KH * g.KW);
  q.by_kw = FastDiv(g.KW);
  q.by_ohw = FastDiv(q.ohw);
  q.by_ow = FastDiv(q.out_w);
  q.by_group_tiles = FastDiv(q.group_tiles);
  q.by_ftiles = FastDiv(q.ftiles);
  const unsigned blocks = static_cast<unsigned>((q.items + kWarps - 1) / kWarps);
  if constexpr (POOL) {
    launch_overlapped(conv2d_dot_pool_kernel<FW, P, ACT, PRO>, dim3(blocks), dim3(kWarps * 32), 0, stream, 1, x, y, w, g,
                      e, in, q);
  } else {
    launch_overlapped(conv2d_dot_kernel<FW, P, ACT, PRO>, dim3(blocks), dim3(kWarps * 32), 0, stream, 1, x, y, w, g, e,
                      in, q);
  }
}

// The instantiated tiles (filters x pixels a warp): 1 x 4, the most warps for the fewest outputs; 4 x 4,
// each gathered input used four times; 2 x 8, each filter value used eight times. Each with ReLU compiled
// in and with the activation chosen at run time; each also reading through an input affine (`pre`: its own
// instantiation, so that the others keep their registers). Pooled (`pool`: a warp's pixels are pooled outputs,
// their windows' conv outputs summed one window position after another): the 1 x 4 and 4 x 4 tiles.
struct Entry {
  int fw, p;
  Act act;
  bool pre, pool;
  void (*launch)(const float*, float*, const float*, const ConvGeometry&, const Epilogue&, InputPrologue, cudaStream_t);
};

#define DOT_ENTRY(FW, P, ACT, PRE, POOL) \
  Entry { FW, P, ACT, PRE, POOL, &launch<FW, P, ACT, PRE, POOL> }
#define DOT_ENTRIES(PRE)                                                                                            \
  DOT_ENTRY(1, 4, Act::Relu, PRE, false), DOT_ENTRY(1, 4, Act::Param, PRE, false),                                 \
      DOT_ENTRY(4, 4, Act::Relu, PRE, false), DOT_ENTRY(4, 4, Act::Param, PRE, false),                             \
      DOT_ENTRY(2, 8, Act::Relu, PRE, false), DOT_ENTRY(2, 8, Act::Param, PRE, false),                             \
      DOT_ENTRY(1, 4, Act::Relu, PRE, true), DOT_ENTRY(1, 4, Act::Param, PRE, true), DOT_ENTRY(4, 4, Act::Relu, PRE, true), \
      DOT_ENTRY(4, 4, Act::Param, PRE, true)

const Entry kEntries[] = {DOT_ENTRIES(false), DOT_ENTRIES(true)};

#undef DOT_ENTRIES

#undef DOT_ENTRY

// Outputs beyond which a layer has enough of them to fill the GPU with tiles: the tiled families win there,
// and timing this family on large layers would only lengthen tuning.
constexpr int64_t kMaxOutputs = int64_t(1) << 19;
// Taps below which most lanes would idle.
constexpr int kMinTaps = 16;

}  // namespace dot

namespace {

std::string variant_name(const dot::Entry& en) {
  return "dot_f" + std::to_string(en.fw) + "_p" + std::to_string(en.p) + "_" + (en.act == Act::Relu ? "relu" : "act") +
         (en.pre ? "_pre" : "") + (en.pool ? "_pool" : "");
}

class DotFamily final : public ConvFamily {
 public:
  DotFamily()
      : ConvFamily("dot",
                   "small layers: each output a dot product over C*KH*KW split across a warp's lanes (filters x "
                   "pixels a warp), summed by shuffles; the weights as stored, the input gathered through L1 (and, where "
                   "fused, a per-channel affine and activation)",
                   {}, pack_nothing) {}

  bool writes_image_stride() const override { return true; }
  std::string reject(const ConvLayer& layer, const DeviceCaps&) const override {
    const ConvGeometry& g = layer.g;
    const int64_t K = int64_t(g.C / g.groups) * g.KH * g.KW;
    if (K < dot::kMinTaps) return "fewer than 16 taps (C/groups*KH*KW) an output";
    if (layer.conv_floats() > dot::kMaxOutputs) return "more than 2^19 outputs (the tiled families' layers)";
    if (layer.in_extent_floats() >= (int64_t(1) << 31) || int64_t(g.F) * K >= (int64_t(1) << 31)) {
      return "too large for 32-bit offsets";
    }
    return "";
  }

  std::vector<ConvVariant> variants(const ConvLayer& layer, const DeviceCaps& dev, const LayerWeights& w) const override {
    const ConvGeometry& g = layer.g;
    const bool relu = layer.e.param_act == ParamAct::Relu;
    const int fg = g.F / g.groups;
    const int64_t npix = layer.out_floats() / g.F;  // output pixels (pooled, where the pool is fused)
    std::vector<std::pair<ConvVariant, double>> scored;  // score: estimated relative time, lower is better
    for (const dot::Entry& en : dot::kEntries) {
      if (en.act == Act::Relu && !relu) continue;
      if (en.pre != (layer.in.scale != nullptr) || en.pool != layer.pooled()) continue;
      // Warps in all against the warps the SMs hold at once (a wave), and each warp's loads a tap.
      const double warps = double((fg + en.fw - 1) / en.fw) * g.groups * double((npix + en.p - 1) / en.p);
      const double waves = std::ceil(warps / (double(std::max(1, dev.sm_count)) * 64));
      const double score = waves * (en.fw + en.p) * (en.act == Act::Param && relu ? 1.02 : 1.0);
      scored.push_back({{variant_name(en), "", bind_launch(en.launch, layer, w.filters, layer.in)}, score});
    }
    return rank_by_score(std::move(scored));
  }

  std::vector<std::string> variant_names() const override {
    return entry_names(dot::kEntries, [](const dot::Entry& en) { return variant_name(en); });
  }

  // A per-channel affine and activation: each gathered value's channel is known; an input image stride: each
  // pixel's image offset is one product.
  bool reads_prologue(const InputPrologue& prologue) const override { return prologue.shuffle == 1; }
};

}  // namespace

const ConvFamily& conv2d_dot_family() {
  static const DotFamily family;
  return family;
}

}  // namespace cnnrt::kernels
