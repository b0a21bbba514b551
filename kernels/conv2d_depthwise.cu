#include "kernels/conv2d_depthwise.cuh"
#include "kernels/conv_registry.hpp"

#include "kernels/conv_tile.cuh"
#include "kernels/launch.cuh"

namespace cnnrt::kernels {

namespace {

template <int K_, int S_, int TW_, int TH_, int ROWS_, Act ACT_>
struct DwCfg {
  static constexpr int K = K_, S = S_, TW = TW_, TH = TH_, ROWS = ROWS_;
  static constexpr Act ACT = ACT_;
  static constexpr int COL_GROUPS = TW / 4;
  static constexpr int BLOCK = COL_GROUPS * (TH / ROWS);
  static constexpr int PITCH = ((TW - 1) * S + K + 3) / 4 * 4 + 4;
  static constexpr int IN_H = (TH - 1) * S + K;
  static constexpr int WIN = (3 * S + K + 3) / 4 * 4;
  static_assert(BLOCK % 32 == 0, "whole warps only");
};

// Every multiplier filter of channel c of image n from its staged input tile (row pitch Cfg::PITCH): this
// thread's 4 output columns from `col` over Cfg::ROWS rows from `row_begin` of the tile, whose first output is
// (r0, c0) of the plane. The K*K taps of a filter are identical for the whole block: registers.
template <class Cfg>
__device__ __forceinline__ void depthwise_rows(const float* tile, const float* __restrict__ w, float* __restrict__ y,
                                               const ConvGeometry& g, const Epilogue& e, int n, int c, int col,
                                               int row_begin, int r0, int c0) {
  constexpr int K = Cfg::K, S = Cfg::S;
  const int multiplier = g.F / g.C;
  const int64_t plane = static_cast<int64_t>(g.OH) * g.OW;
  for (int m = 0; m < multiplier; ++m) {
    const int f = c * multiplier + m;
    float wreg[K * K];
#pragma unroll
    for (int i = 0; i < K * K; ++i) wreg[i] = __ldg(w + static_cast<int64_t>(f) * K * K + i);
    const float b = e.bias ? __ldg(e.bias + f) : 0.0f;
    float* out = y + static_cast<int64_t>(n) * e.out_image_stride(static_cast<int64_t>(g.F) * plane) + f * plane;
    const float* res = e.residual ? e.residual + (static_cast<int64_t>(n) * g.F + f) * plane : nullptr;

    float win[K][Cfg::WIN];
    prime_window<K, S>(win, tile, Cfg::PITCH, row_begin, col * S);
    for (int rr = row_begin; rr < row_begin + Cfg::ROWS; ++rr) {
      slide_window<K, S>(win, tile, Cfg::PITCH, rr, col * S);
      float acc[4] = {b, b, b, b};
      accumulate_window<K, S>(acc, win, [&](int tap) { return wreg[tap]; });
      store_four<Cfg::ACT>(acc, out, res, r0 + rr, c0 + col, g.OH, g.OW, e);
    }
  }
}

// grid: x = tiles_x * N * C (tile, channel, image), y = tiles_y. Each block computes every multiplier
// filter of its channel for one tile, reading the channel's plane through the prologue `in`.
template <class Cfg>
__global__ void __launch_bounds__(Cfg::BLOCK)
    conv2d_depthwise_kernel(const float* __restrict__ x, float* __restrict__ y, const float* __restrict__ w,
                            const ConvGeometry g, const Epilogue e, const InputPrologue in, int tiles_x) {
  wait_for_prior_grid();  // launched with PDL (launch.cuh): nothing global before this
  constexpr int S = Cfg::S;
  __shared__ __align__(16) float tile[Cfg::IN_H * Cfg::PITCH];
  int t = blockIdx.x;
  const int tile_x = t % tiles_x;
  t /= tiles_x;
  const int c = t % g.C;
  const int n = t / g.C;
  const int r0 = blockIdx.y * Cfg::TH, c0 = tile_x * Cfg::TW;
  stage_plane_tile(tile, Cfg::PITCH, Cfg::IN_H, x + (static_cast<int64_t>(n) * g.C + in.channel(c, g.C)) * g.H * g.W, g.H, g.W,
                   r0 * S - g.pad_top, c0 * S - g.pad_left, Cfg::BLOCK);
  __syncthreads();

  const int col = 4 * (threadIdx.x % Cfg::COL_GROUPS);
  const int row_begin = (threadIdx.x / Cfg::COL_GROUPS) * Cfg::ROWS;
  depthwise_rows<Cfg>(tile, w, y, g, e, n, c, col, row_begin, r0, c0);
}

template <class Cfg>
void launch_depthwise(const float* x, float* y, const float* w, const ConvGeometry& g, const Epilogue& e,
                      InputPrologue in, cudaStream_t stream) {
  const int tiles_x = (g.OW + Cfg::TW - 1) / Cfg::TW;
  const dim3 grid(static_cast<unsigned>(tiles_x * g.C * g.N), static_cast<unsigned>((g.OH + Cfg::TH - 1) / Cfg::TH));
  launch_overlapped(conv2d_depthwise_kernel<Cfg>, grid, dim3(Cfg::BLOCK), 0, stream, 1, x, y, w, g, e, in, tiles_x);
}

// Small maps: a block stages the whole input planes (with padding) of CPB channels of one image, and each
// channel's TW/4 x TH/ROWS threads cover its whole TW x TH output plane (at most), as the tiled kernel does.
// A 7x7 plane in a 32x32 tile would leave 95% of the block idle.
template <int K_, int S_, int TW_, int TH_, int ROWS_, int CPB_, Act ACT_>
struct DwPlanesCfg {
  static constexpr int K = K_, S = S_, TW = TW_, TH = TH_, ROWS = ROWS_, CPB = CPB_;
  static constexpr Act ACT = ACT_;
  static constexpr int COL_GROUPS = TW / 4;
  static constexpr int PER_CHANNEL = COL_GROUPS * (TH / ROWS);
  static constexpr int BLOCK = PER_CHANNEL * CPB;
  static constexpr int PITCH = ((TW - 1) * S + K + 3) / 4 * 4 + 4;
  static constexpr int IN_H = (TH - 1) * S + K;
  static constexpr int PLANE = IN_H * PITCH;
  static constexpr int WIN = (3 * S + K + 3) / 4 * 4;
  static_assert(BLOCK % 32 == 0, "whole warps only");
  static_assert(CPB * PLANE * 4 <= 48 * 1024, "static shared memory");
};

// grid: x = N * ceil(C / CPB). Requires OH <= TH and OW <= TW.
template <class Cfg>
__global__ void __launch_bounds__(Cfg::BLOCK)
    conv2d_depthwise_planes_kernel(const float* __restrict__ x, float* __restrict__ y, const float* __restrict__ w,
                                   const ConvGeometry g, const Epilogue e, const InputPrologue in) {
  wait_for_prior_grid();  // launched with PDL (launch.cuh): nothing global before this
  __shared__ __align__(16) float planes[Cfg::CPB * Cfg::PLANE];
  const int channel_blocks = (g.C + Cfg::CPB - 1) / Cfg::CPB;
  const int n = blockIdx.x / channel_blocks;
  const int c0 = (blockIdx.x - n * channel_blocks) * Cfg::CPB;
  for (int i = threadIdx.x; i < Cfg::CPB * Cfg::PLANE; i += Cfg::BLOCK) {
    const int slot = i / Cfg::PLANE, at = i - slot * Cfg::PLANE;
    const int r = at / Cfg::PITCH, col = at - r * Cfg::PITCH;
    const int iy = r - g.pad_top, ix = col - g.pad_left, c = c0 + slot;
    const bool inside = c < g.C && iy >= 0 && iy < g.H && ix >= 0 && ix < g.W;
    cp_async_4(planes + i, inside ? x + ((static_cast<int64_t>(n) * g.C + in.channel(c, g.C)) * g.H + iy) * g.W + ix : x,
               inside);
  }
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  const int slot = threadIdx.x / Cfg::PER_CHANNEL, t = threadIdx.x - slot * Cfg::PER_CHANNEL;
  const int c = c0 + slot;
  if (c >= g.C) return;  // no barrier after this
  const float* tile = planes + slot * Cfg::PLANE;
  const int col = 4 * (t % Cfg::COL_GROUPS);
  const int row_begin = (t / Cfg::COL_GROUPS) * Cfg::ROWS;
  if (row_begin >= g.OH || col >= g.OW) return;
  depthwise_rows<Cfg>(tile, w, y, g, e, n, c, col, row_begin, 0, 0);
}

template <class Cfg>
void launch_depthwise_planes(const float* x, float* y, const float* w, const ConvGeometry& g, const Epilogue& e,
                             InputPrologue in, cudaStream_t stream) {
  const int channel_blocks = (g.C + Cfg::CPB - 1) / Cfg::CPB;
  launch_overlapped(conv2d_depthwise_planes_kernel<Cfg>, dim3(static_cast<unsigned>(g.N * channel_blocks)),
                    dim3(Cfg::BLOCK), 0, stream, 1, x, y, w, g, e, in);
}

struct DwEntry {
  int k, s, tw, th, rows, cpb;  // cpb 0: the tiled kernel (any map); else whole planes of at most tw x th
  Act act;
  void (*launch)(const float*, float*, const float*, const ConvGeometry&, const Epilogue&, InputPrologue, cudaStream_t);
};

// Two tiles: 32 wide (maps up to 56: MobileNet-class) and 64 wide; both 32 rows, 128 threads. Whole planes
// (smallest first): 4x4 planes 32 channels a block (3x3 only: the last maps of a classifier), 8x8 planes 16
// channels, 16x16 planes 8 channels (128 threads each).
#define DW_ENTRY(K, S, TW, ROWS, ACT) \
  DwEntry{K, S, TW, 32, ROWS, 0, ACT, &launch_depthwise<DwCfg<K, S, TW, 32, ROWS, ACT>>}
#define DW_PLANES(K, S, T, ROWS, CPB, ACT) \
  DwEntry{K, S, T, T, ROWS, CPB, ACT, &launch_depthwise_planes<DwPlanesCfg<K, S, T, T, ROWS, CPB, ACT>>}
#define DW_ACTS(K, S, TW, ROWS) DW_ENTRY(K, S, TW, ROWS, Act::None), DW_ENTRY(K, S, TW, ROWS, Act::Relu), \
                                DW_ENTRY(K, S, TW, ROWS, Act::Param)
#define DW_PLANES_ACTS(K, S, T, ROWS, CPB) DW_PLANES(K, S, T, ROWS, CPB, Act::None), \
    DW_PLANES(K, S, T, ROWS, CPB, Act::Relu), DW_PLANES(K, S, T, ROWS, CPB, Act::Param)
const DwEntry kDwEntries[] = {DW_ACTS(3, 1, 32, 2), DW_ACTS(3, 1, 64, 4), DW_ACTS(3, 2, 32, 2),
                              DW_ACTS(5, 1, 32, 2), DW_ACTS(5, 1, 64, 4), DW_ACTS(5, 2, 32, 2),
                              DW_PLANES_ACTS(3, 1, 4, 1, 32), DW_PLANES_ACTS(3, 2, 4, 1, 32),
                              DW_PLANES_ACTS(3, 1, 8, 2, 16), DW_PLANES_ACTS(3, 2, 8, 2, 16),
                              DW_PLANES_ACTS(3, 1, 16, 4, 8), DW_PLANES_ACTS(3, 2, 16, 4, 8),
                              DW_PLANES_ACTS(5, 1, 8, 2, 16), DW_PLANES_ACTS(5, 2, 8, 2, 16),
                              DW_PLANES_ACTS(5, 1, 16, 4, 8), DW_PLANES_ACTS(5, 2, 16, 4, 8)};

}  // namespace

namespace {

std::string variant_name(const DwEntry& en) {
  return "dw_k" + std::to_string(en.k) + "_s" + std::to_string(en.s) + "_t" + std::to_string(en.tw) + "x" +
         std::to_string(en.th) + (en.cpb > 0 ? "_c" + std::to_string(en.cpb) : "") + "_r" + std::to_string(en.rows) +
         "_" + (en.act == Act::None ? "none" : en.act == Act::Relu ? "relu" : "act");
}

class DepthwiseFamily final : public ConvFamily {
 public:
  bool writes_image_stride() const override { return true; }
  DepthwiseFamily()
      : ConvFamily("dw",
                   "depthwise (groups = C): an input plane tile with its halo in shared memory (or, for small maps, "
                   "the whole planes of c channels; either through a channel shuffle), each thread slides a register "
                   "window down 4 columns x r rows of one output plane",
                   {}, pack_nothing) {}

  std::string reject(const ConvLayer& layer, const DeviceCaps&) const override {
    const ConvGeometry& g = layer.g;
    if (g.groups != g.C || g.C < 2 || g.F % g.C != 0) return "not depthwise";
    if (g.KH != g.KW || (g.KH != 3 && g.KH != 5)) return "kernel not 3x3 or 5x5";
    if (g.stride_h != g.stride_w || g.stride_h > 2) return "stride other than 1 or 2";
    if (g.dil_h != 1 || g.dil_w != 1) return "dilation";
    if (layer.pooled()) return "pooling";
    return "";
  }


  std::vector<ConvVariant> variants(const ConvLayer& layer, const DeviceCaps&, const LayerWeights& w) const override {
    const ConvGeometry& g = layer.g;
    const Act wanted = compiled_act(layer.e.param_act);
    std::vector<ConvVariant> out;
    std::vector<ConvVariant> planes;
    for (const DwEntry& en : kDwEntries) {
      if (en.k != g.KH || en.s != g.stride_h || en.act != wanted) continue;
      if (en.cpb > 0 && (g.OW > en.tw || g.OH > en.th)) continue;
      (en.cpb > 0 ? planes : out).push_back({variant_name(en), "", bind_launch(en.launch, layer, w.filters, layer.in)});
    }
    // Narrow maps first for narrow images; whole planes first where they fit (the smallest first).
    if (g.OW <= 32 && out.size() > 1 && out[0].name.find("_t64") != std::string::npos) std::swap(out[0], out[1]);
    out.insert(out.begin(), planes.begin(), planes.end());
    return out;
  }

  std::vector<std::string> variant_names() const override { return entry_names(kDwEntries, variant_name); }

  // A channel shuffle only changes which plane a block stages.
  bool reads_prologue(const InputPrologue& prologue) const override {
    return prologue.scale == nullptr && prologue.image_floats == 0;
  }
};

}  // namespace

const ConvFamily& conv2d_dw_family() {
  static const DepthwiseFamily family;
  return family;
}

}  // namespace cnnrt::kernels
