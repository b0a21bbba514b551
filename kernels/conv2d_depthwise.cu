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

// grid: x = tiles_x * N * C (tile, channel, image), y = tiles_y. Each block computes every multiplier
// filter of its channel for one tile.
template <class Cfg>
__global__ void __launch_bounds__(Cfg::BLOCK)
    conv2d_depthwise_kernel(const float* __restrict__ x, float* __restrict__ y, const float* __restrict__ w,
                            const ConvGeometry g, const Epilogue e, int tiles_x) {
  wait_for_prior_grid();  // launched with PDL (launch.cuh): nothing global before this
  constexpr int K = Cfg::K, S = Cfg::S;
  __shared__ __align__(16) float tile[Cfg::IN_H * Cfg::PITCH];
  int t = blockIdx.x;
  const int tile_x = t % tiles_x;
  t /= tiles_x;
  const int c = t % g.C;
  const int n = t / g.C;
  const int r0 = blockIdx.y * Cfg::TH, c0 = tile_x * Cfg::TW;
  stage_plane_tile(tile, Cfg::PITCH, Cfg::IN_H, x + (static_cast<int64_t>(n) * g.C + c) * g.H * g.W, g.H, g.W,
                   r0 * S - g.pad_top, c0 * S - g.pad_left, Cfg::BLOCK);
  __syncthreads();

  const int col = 4 * (threadIdx.x % Cfg::COL_GROUPS);
  const int row_begin = (threadIdx.x / Cfg::COL_GROUPS) * Cfg::ROWS;
  const int multiplier = g.F / g.C;
  const int64_t plane = static_cast<int64_t>(g.OH) * g.OW;
  for (int m = 0; m < multiplier; ++m) {
    const int f = c * multiplier + m;
    float wreg[K * K];  // this filter's taps, identical for the whole block
#pragma unroll
    for (int i = 0; i < K * K; ++i) wreg[i] = __ldg(w + static_cast<int64_t>(f) * K * K + i);
    const float b = e.bias ? __ldg(e.bias + f) : 0.0f;
    float* out = y + (static_cast<int64_t>(n) * g.F + f) * plane;
    const float* res = e.residual ? e.residual + (static_cast<int64_t>(n) * g.F + f) * plane : nullptr;

    float win[K][Cfg::WIN];
    prime_window<K, S>(win, tile, Cfg::PITCH, row_begin, col * S);
    for (int rr = row_begin; rr < row_begin + Cfg::ROWS; ++rr) {
      slide_window<K, S>(win, tile, Cfg::PITCH, rr, col * S);
      float acc[4] = {b, b, b, b};
      accumulate_window<K, S>(acc, win, [&](int t) { return wreg[t]; });
      store_four<Cfg::ACT>(acc, out, res, r0 + rr, c0 + col, g.OH, g.OW, e);
    }
  }
}

template <class Cfg>
void launch_depthwise(const float* x, float* y, const float* w, const ConvGeometry& g, const Epilogue& e,
                      cudaStream_t stream) {
  const int tiles_x = (g.OW + Cfg::TW - 1) / Cfg::TW;
  const dim3 grid(static_cast<unsigned>(tiles_x * g.C * g.N), static_cast<unsigned>((g.OH + Cfg::TH - 1) / Cfg::TH));
  launch_overlapped(conv2d_depthwise_kernel<Cfg>, grid, dim3(Cfg::BLOCK), 0, stream, 1, x, y, w, g, e, tiles_x);
}

struct DwEntry {
  int k, s, tw, rows;
  Act act;
  void (*launch)(const float*, float*, const float*, const ConvGeometry&, const Epilogue&, cudaStream_t);
};

// Two tiles: 32 wide (maps up to 56: MobileNet-class) and 64 wide; both 32 rows, 128 threads.
#define DW_ENTRY(K, S, TW, ROWS, ACT) DwEntry{K, S, TW, ROWS, ACT, &launch_depthwise<DwCfg<K, S, TW, 32, ROWS, ACT>>}
#define DW_ACTS(K, S, TW, ROWS) DW_ENTRY(K, S, TW, ROWS, Act::None), DW_ENTRY(K, S, TW, ROWS, Act::Relu), \
                                DW_ENTRY(K, S, TW, ROWS, Act::Param)
const DwEntry kDwEntries[] = {DW_ACTS(3, 1, 32, 2), DW_ACTS(3, 1, 64, 4), DW_ACTS(3, 2, 32, 2),
                              DW_ACTS(5, 1, 32, 2), DW_ACTS(5, 1, 64, 4), DW_ACTS(5, 2, 32, 2)};

}  // namespace

namespace {

std::string variant_name(const DwEntry& en) {
  return "dw_k" + std::to_string(en.k) + "_s" + std::to_string(en.s) + "_t" + std::to_string(en.tw) + "x32_r" +
         std::to_string(en.rows) + "_" + (en.act == Act::None ? "none" : en.act == Act::Relu ? "relu" : "act");
}

class DepthwiseFamily final : public ConvFamily {
 public:
  DepthwiseFamily()
      : ConvFamily("dw",
                   "depthwise (groups = C): an input plane tile with its halo in shared memory, each thread slides a "
                   "register window down 4 columns x r rows of one output plane",
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
    for (const DwEntry& en : kDwEntries) {
      if (en.k != g.KH || en.s != g.stride_h || en.act != wanted) continue;
      out.push_back({variant_name(en), "", bind_launch(en.launch, layer, w.filters)});
    }
    // Narrow maps first for narrow images.
    if (g.OW <= 32 && out.size() > 1 && out[0].name.find("_t64") != std::string::npos) std::swap(out[0], out[1]);
    return out;
  }

  std::vector<std::string> variant_names() const override { return entry_names(kDwEntries, variant_name); }
};

}  // namespace

const ConvFamily& conv2d_dw_family() {
  static const DepthwiseFamily family;
  return family;
}

}  // namespace cnnrt::kernels
