// Single-input-channel convolution; see conv2d_c1.cuh for the algorithm.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/code_arch.hpp"
#include "kernels/conv2d_c1_impl.cuh"
#include "kernels/conv2d_c1_stream.cuh"

namespace cnnrt::kernels {

namespace {

using c1::C1Cfg;
using c1::launch_c1;

struct C1Entry {
  int k, s, tw, th, rows, fmax;  // k 0: any KH, KW <= 11 (run-time extents)
  Act act;
  bool pool;
  C1LaunchFn launch;
  bool smem_weights = false;
  bool filter_groups = false;  // blockIdx.z picks a group of fmax filters: eligible when F > fmax
};

// The instantiated configurations. Tiles: A = 128x32 (4 rows of 32 threads, 8 rows each: long image rows),
// B = 64x32, C = 32x32 (small images, and the pooling tiles below). Kept small: CI compiles these on 2 cores.
#define C1_ENTRY(K, S, TW, TH, ROWS, FMAX, ACT, POOL)                                                   \
  C1Entry {                                                                                                   \
    K, S, TW, TH, ROWS, FMAX, ACT, POOL, &launch_c1<C1Cfg<K, S, TW, TH, ROWS, FMAX, ACT, POOL>>               \
  }
#define C1_ENTRY_SMEM(K, TW, TH, ROWS, FMAX, ACT, POOL)                                                  \
  C1Entry {                                                                                                   \
    K, 1, TW, TH, ROWS, FMAX, ACT, POOL, &launch_c1<C1Cfg<K, 1, TW, TH, ROWS, FMAX, ACT, POOL, true>>, true    \
  }
// Shared-memory-filter twins of the stride-1 tiles (None and Relu) and of the pooling tiles (Relu).
#define C1_SMEM_TILES(K, FMAX, ACT)                                                                            \
  C1_ENTRY_SMEM(K, 128, 32, 8, FMAX, ACT, false), C1_ENTRY_SMEM(K, 64, 32, 4, FMAX, ACT, false), \
      C1_ENTRY_SMEM(K, 32, 32, 2, FMAX, ACT, false)
#define C1_SMEM(K, FMAX)                                                                                       \
  C1_SMEM_TILES(K, FMAX, Act::None), C1_SMEM_TILES(K, FMAX, Act::Relu),                                        \
      C1_ENTRY_SMEM(K, 32, 32, 2, FMAX, Act::Relu, true), C1_ENTRY_SMEM(K, 32, 8, 1, FMAX, Act::Relu, true)
// Filter groups (shared-memory filters): F = 16 or 32 split into groups of FMAX across blocks, so each thread
// keeps 4 x FMAX accumulators instead of 4 x 32 (the 32-filter k5 tiles ran at 41% of the FMA rate on the
// H100), and a small image puts F / FMAX times more blocks on the SMs.
// The pooled 32x8 tiles with groups of 2 or 4 filters are for LeNet-sized images at batch 1 (28x28 in 4
// tiles: 8 filters in groups of 2 make 16 blocks, each thread a quarter of the FFMA chain).
#define C1_ENTRY_FG(K, TW, TH, ROWS, FMAX, ACT, POOL)                                         \
  C1Entry {                                                                                       \
    K, 1, TW, TH, ROWS, FMAX, ACT, POOL,                                                          \
        &launch_c1<C1Cfg<K, 1, TW, TH, ROWS, FMAX, ACT, POOL, true, true>>, true, true            \
  }
#define C1_FG(K)                                                                                  \
  C1_ENTRY_FG(K, 128, 32, 8, 8, Act::None, false),                                    \
      C1_ENTRY_FG(K, 32, 32, 2, 8, Act::None, false),                                  \
      C1_ENTRY_FG(K, 128, 32, 8, 8, Act::Relu, false),                                \
      C1_ENTRY_FG(K, 128, 32, 8, 16, Act::None, false),                               \
      C1_ENTRY_FG(K, 32, 8, 1, 2, Act::Relu, true)
#define C1_TILES_S1(K, FMAX, ACT)                                                                             \
  C1_ENTRY(K, 1, 128, 32, 8, FMAX, ACT, false), C1_ENTRY(K, 1, 64, 32, 4, FMAX, ACT, false), \
      C1_ENTRY(K, 1, 32, 32, 2, FMAX, ACT, false)
#define C1_ACTS_S1(K, FMAX) \
  C1_TILES_S1(K, FMAX, Act::None), C1_TILES_S1(K, FMAX, Act::Relu), C1_ENTRY(K, 1, 128, 32, 8, FMAX, Act::Param, false)
// Pooling tiles: 32x32 (2 rows per thread), and 32x8 (1 row per thread, 64 threads) for small images
// such as 28x28 at batch 1, where one 32x32 tile would leave all but one SM idle.
#define C1_POOL(K, FMAX)                                                                                       \
  C1_ENTRY(K, 1, 32, 32, 2, FMAX, Act::Relu, true), C1_ENTRY(K, 1, 32, 32, 2, FMAX, Act::Param, true), \
      C1_ENTRY(K, 1, 32, 8, 1, FMAX, Act::Relu, true)
#define C1_S2(K, FMAX)                                                                                          \
  C1_ENTRY(K, 2, 64, 32, 4, FMAX, Act::None, false), C1_ENTRY(K, 2, 64, 32, 4, FMAX, Act::Relu, false), \
      C1_ENTRY(K, 2, 64, 32, 4, FMAX, Act::Param, false)
#define C1_FIXED_K(K) \
  C1_ACTS_S1(K, 8), C1_ACTS_S1(K, 32), C1_POOL(K, 8), C1_POOL(K, 32), C1_S2(K, 8), C1_S2(K, 32), C1_SMEM(K, 8), C1_SMEM(K, 32)

const C1Entry kC1Entries[] = {
    C1_FIXED_K(1), C1_FIXED_K(3), C1_FIXED_K(5), C1_FG(3), C1_FG(5), C1_ENTRY_FG(5, 32, 8, 1, 4, Act::Relu, true),
    // Any KH, KW <= 11 (K = 0): one configuration per stride and pooling mode.
    C1_ENTRY(0, 1, 64, 32, 4, 32, Act::Param, false), C1_ENTRY(0, 2, 64, 32, 4, 32, Act::Param, false),
    C1_ENTRY(0, 1, 32, 32, 2, 32, Act::Param, true),
};

}  // namespace

std::vector<float> pack_c1_smem_filters(const float* weights, const float* bias, int F, int K) {
  if (F < 1 || F > kC1MaxFilters || K < 1 || K > 11) {
    throw std::length_error("pack_c1_smem_filters: " + std::to_string(F) + " filters of " + std::to_string(K) + "x" +
                            std::to_string(K) + " do not fit the single-channel kernel");
  }
  const size_t fp = c1_packed_filter_floats(K);
  std::vector<float> out(F * fp, 0.0f);
  for (int f = 0; f < F; ++f) {
    std::copy(weights + f * K * K, weights + (f + 1) * K * K, out.begin() + f * fp);
    out[f * fp + K * K] = bias ? bias[f] : 0.0f;
  }
  return out;
}

void pack_c1_filters(const float* weights, const float* bias, int F, int KH, int KW, C1Filters* out) {
  // The block has room for kC1MaxFilters x kC1MaxTaps: a larger layer would write past it.
  if (F < 1 || F > kC1MaxFilters || KH < 1 || KW < 1 || KH * KW > kC1MaxTaps) {
    throw std::length_error("pack_c1_filters: " + std::to_string(F) + " filters of " + std::to_string(KH) + "x" +
                            std::to_string(KW) + " do not fit the single-channel kernel's parameter block");
  }
  std::memset(out, 0, sizeof(*out));
  std::memcpy(out->w, weights, sizeof(float) * F * KH * KW);
  for (int f = 0; f < F; ++f) out->bias[f] = bias ? bias[f] : 0.0f;
}

std::string c1_reject(const ConvLayer& layer) {
  const ConvGeometry& g = layer.g;
  if (g.C != 1 || g.groups != 1) return "needs one input channel";
  if (g.F > kC1MaxFilters) return "more than 32 filters";
  if (g.KH > 11 || g.KW > 11) return "kernel larger than 11x11";
  if (g.stride_h != g.stride_w || (g.stride_h != 1 && g.stride_h != 2)) return "stride other than 1 or 2";
  if (g.dil_h != 1 || g.dil_w != 1) return "dilation";
  if (layer.pooled() && layer.residual) return "pooling after a residual add";
  if (layer.pooled() && g.stride_h != 1) return "pooling after a strided conv";
  return "";
}

PackedWeights pack_c1(const ConvLayer& layer, const float* filters, const float* bias) {
  const ConvGeometry& g = layer.g;
  PackedWeights p;
  p.layout = "c1";
  auto block = std::make_shared<C1Filters>();
  pack_c1_filters(filters, bias, g.F, g.KH, g.KW, block.get());
  p.host = block;
  if (g.KH == g.KW && (g.KH == 1 || g.KH == 3 || g.KH == 5)) p.device = pack_c1_smem_filters(filters, bias, g.F, g.KH);
  return p;
}

ConvLaunch c1_launch(C1LaunchFn fn, const ConvLayer& layer, const LayerWeights& w) {
  auto filters = std::static_pointer_cast<const C1Filters>(w.host);
  const float* smem_packed = w.packed;
  return [fn, layer, filters, smem_packed](const ConvArgs& a, cudaStream_t s) {
    Epilogue e = layer.e;
    e.residual = a.residual;
    fn(a.x, a.y, layer.g, e, *filters, smem_packed, s);
  };
}

namespace {

const char* act_token(Act a) { return a == Act::None ? "none" : a == Act::Relu ? "relu" : "act"; }

std::string entry_name(const C1Entry& en) {
  return std::string("c1_k") + (en.k > 0 ? std::to_string(en.k) : "any") + "_s" + std::to_string(en.s) + "_f" +
         std::to_string(en.fmax) + "_t" + std::to_string(en.tw) + "x" + std::to_string(en.th) + "_r" +
         std::to_string(en.rows) + "_" + act_token(en.act) + (en.pool ? "_pool" : "") +
         (en.smem_weights ? "_smemw" : "") + (en.filter_groups ? "_fz" : "");
}

class C1Family final : public ConvFamily {
 public:
  // The _smemw variants need cp.async: variants() checks.
  C1Family()
      : ConvFamily("c1",
                   "one input channel (DAC 2017 Algorithm 1): an input tile with its halo in shared memory, each thread "
                   "slides a register window down 4 columns x r rows for up to 32 filters",
                   {}, pack_c1) {}
  std::string reject(const ConvLayer& layer, const DeviceCaps&) const override { return c1_reject(layer); }

  std::vector<ConvVariant> variants(const ConvLayer& layer, const DeviceCaps& dev, const LayerWeights& w) const override {
    const ConvGeometry& g = layer.g;
    const Epilogue& e = layer.e;
    const bool pool = layer.pooled();
    const bool square_fixed = g.KH == g.KW && (g.KH == 1 || g.KH == 3 || g.KH == 5);
    const bool cp_async = dev.arch() >= 80;
    // Fixed-K instantiations when the shape has one; the epilogue's activation picks the Act variant (Param
    // covers everything, the dedicated ones are faster).
    std::vector<const C1Entry*> fitting;
    for (const C1Entry& entry : kC1Entries) {
      if (entry.s != g.stride_h || entry.pool != pool) continue;
      if (entry.smem_weights && (!cp_async || !w.packed)) continue;
      // A grouped entry only where it makes two groups or more (one group is its _smemw twin).
      if (entry.filter_groups ? entry.fmax >= g.F : entry.fmax < g.F) continue;
      if (square_fixed ? entry.k != g.KH : entry.k != 0) continue;
      if (entry.act != Act::Param && entry.act != compiled_act(e.param_act)) continue;
      if (pool && (pooled_tile(entry.th, e.pool.kh, e.pool.dil_h, e.pool.sh) < 1 ||
                   pooled_tile(entry.tw, e.pool.kw, e.pool.dil_w, e.pool.sw) < 1)) {
        continue;
      }
      fitting.push_back(&entry);
    }
    // Heuristic order: dedicated activation before Param, the smallest FMAX that holds F, then the tile
    // whose width wastes the fewest columns of this image.
    auto waste = [&](const C1Entry* en) {
      const int width = pool ? e.pool.PW : g.OW;
      return (en->tw - width % en->tw) % en->tw + (width < en->tw ? en->tw - width : 0);
    };
    std::stable_sort(fitting.begin(), fitting.end(), [&](const C1Entry* a, const C1Entry* b) {
      const bool pa = a->act == Act::Param, pb = b->act == Act::Param;
      if (pa != pb) return !pa;
      if (a->filter_groups != b->filter_groups) return !a->filter_groups;
      if (a->fmax != b->fmax) return a->fmax < b->fmax;
      return waste(a) < waste(b);
    });
    std::vector<ConvVariant> out;
    for (const C1Entry* en : fitting) out.push_back({entry_name(*en), "", c1_launch(en->launch, layer, w)});
    return out;
  }

  std::vector<std::string> variant_names() const override { return entry_names(kC1Entries, entry_name); }
};

}  // namespace

const ConvFamily& conv2d_c1_family() {
  static const C1Family family;
  return family;
}

// The code of this library (built for CNNRT_CUDA_ARCHITECTURES_HEAVY): kernels/code_arch.hpp.
CNNRT_CODE_ARCH_PROBE(heavy_code_arch)

}  // namespace cnnrt::kernels
