// Single-input-channel convolution; see conv2d_c1.cuh for the algorithm.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/conv2d_c1_impl.cuh"
#include "kernels/conv2d_c1_stream.cuh"

namespace cnnrt::kernels {

namespace {

using c1::C1Cfg;
using c1::launch_c1;

struct C1Entry {
  int k, s, tw, th, fmax;
  Act act;
  bool pool;
  const char* tile_name;
  void (*launch)(const float*, float*, const ConvGeometry&, const Epilogue&, const C1Filters&, const float*, cudaStream_t);
  bool smem_weights = false;
  bool filter_groups = false;  // blockIdx.z picks a group of fmax filters: eligible when F > fmax
};

const char* act_name(Act a) { return a == Act::None ? "none" : a == Act::Relu ? "relu" : "act"; }

// The instantiated configurations. Tiles: A = 128x32 (4 rows of 32 threads, 8 rows each: long image rows),
// B = 64x32, C = 32x32 (small images, and the pooling tiles below). Kept small: CI compiles these on 2 cores.
#define C1_ENTRY(K, S, TW, TH, ROWS, FMAX, ACT, POOL, TILE)                                                   \
  C1Entry {                                                                                                   \
    K, S, TW, TH, FMAX, ACT, POOL, TILE, &launch_c1<C1Cfg<K, S, TW, TH, ROWS, FMAX, ACT, POOL>>               \
  }
#define C1_ENTRY_SMEM(K, TW, TH, ROWS, FMAX, ACT, POOL, TILE)                                                  \
  C1Entry {                                                                                                   \
    K, 1, TW, TH, FMAX, ACT, POOL, TILE, &launch_c1<C1Cfg<K, 1, TW, TH, ROWS, FMAX, ACT, POOL, true>>, true    \
  }
// Shared-memory-filter twins of the stride-1 tiles (None and Relu) and of the pooling tiles (Relu).
#define C1_SMEM_TILES(K, FMAX, ACT)                                                                            \
  C1_ENTRY_SMEM(K, 128, 32, 8, FMAX, ACT, false, "128x32r8"), C1_ENTRY_SMEM(K, 64, 32, 4, FMAX, ACT, false, "64x32r4"), \
      C1_ENTRY_SMEM(K, 32, 32, 2, FMAX, ACT, false, "32x32r2")
#define C1_SMEM(K, FMAX)                                                                                       \
  C1_SMEM_TILES(K, FMAX, Act::None), C1_SMEM_TILES(K, FMAX, Act::Relu),                                        \
      C1_ENTRY_SMEM(K, 32, 32, 2, FMAX, Act::Relu, true, "32x32r2"), C1_ENTRY_SMEM(K, 32, 8, 1, FMAX, Act::Relu, true, "32x8r1")
// Filter groups (shared-memory filters): F = 16 or 32 split into groups of FMAX across blocks, so each thread
// keeps 4 x FMAX accumulators instead of 4 x 32 (the 32-filter k5 tiles ran at 41% of the FMA rate on the
// H100), and a small image puts F / FMAX times more blocks on the SMs.
// The pooled 32x8 tiles with groups of 2 or 4 filters are for LeNet-sized images at batch 1 (28x28 in 4
// tiles: 8 filters in groups of 2 make 16 blocks, each thread a quarter of the FFMA chain).
#define C1_ENTRY_FG(K, TW, TH, ROWS, FMAX, ACT, POOL, TILE)                                         \
  C1Entry {                                                                                       \
    K, 1, TW, TH, FMAX, ACT, POOL, TILE,                                                          \
        &launch_c1<C1Cfg<K, 1, TW, TH, ROWS, FMAX, ACT, POOL, true, true>>, true, true            \
  }
#define C1_FG(K)                                                                                  \
  C1_ENTRY_FG(K, 128, 32, 8, 8, Act::None, false, "128x32r8"),                                    \
      C1_ENTRY_FG(K, 32, 32, 2, 8, Act::None, false, "32x32r2"),                                  \
      C1_ENTRY_FG(K, 128, 32, 8, 8, Act::Relu, false, "128x32r8"),                                \
      C1_ENTRY_FG(K, 128, 32, 8, 16, Act::None, false, "128x32r8"),                               \
      C1_ENTRY_FG(K, 32, 8, 1, 2, Act::Relu, true, "32x8r1")
#define C1_TILES_S1(K, FMAX, ACT)                                                                             \
  C1_ENTRY(K, 1, 128, 32, 8, FMAX, ACT, false, "128x32r8"), C1_ENTRY(K, 1, 64, 32, 4, FMAX, ACT, false, "64x32r4"), \
      C1_ENTRY(K, 1, 32, 32, 2, FMAX, ACT, false, "32x32r2")
#define C1_ACTS_S1(K, FMAX) \
  C1_TILES_S1(K, FMAX, Act::None), C1_TILES_S1(K, FMAX, Act::Relu), C1_ENTRY(K, 1, 128, 32, 8, FMAX, Act::Param, false, "128x32r8")
// Pooling tiles: 32x32 (2 rows per thread), and 32x8 (1 row per thread, 64 threads) for small images
// such as 28x28 at batch 1, where one 32x32 tile would leave all but one SM idle.
#define C1_POOL(K, FMAX)                                                                                       \
  C1_ENTRY(K, 1, 32, 32, 2, FMAX, Act::Relu, true, "32x32r2"), C1_ENTRY(K, 1, 32, 32, 2, FMAX, Act::Param, true, "32x32r2"), \
      C1_ENTRY(K, 1, 32, 8, 1, FMAX, Act::Relu, true, "32x8r1")
#define C1_S2(K, FMAX)                                                                                          \
  C1_ENTRY(K, 2, 64, 32, 4, FMAX, Act::None, false, "64x32r4"), C1_ENTRY(K, 2, 64, 32, 4, FMAX, Act::Relu, false, "64x32r4"), \
      C1_ENTRY(K, 2, 64, 32, 4, FMAX, Act::Param, false, "64x32r4")
#define C1_FIXED_K(K) \
  C1_ACTS_S1(K, 8), C1_ACTS_S1(K, 32), C1_POOL(K, 8), C1_POOL(K, 32), C1_S2(K, 8), C1_S2(K, 32), C1_SMEM(K, 8), C1_SMEM(K, 32)

const C1Entry kC1Entries[] = {
    C1_FIXED_K(1), C1_FIXED_K(3), C1_FIXED_K(5), C1_FG(3), C1_FG(5), C1_ENTRY_FG(5, 32, 8, 1, 4, Act::Relu, true, "32x8r1"),
    // Any KH, KW <= 11 (K = 0): one configuration per stride and pooling mode.
    C1_ENTRY(0, 1, 64, 32, 4, 32, Act::Param, false, "64x32r4"), C1_ENTRY(0, 2, 64, 32, 4, 32, Act::Param, false, "64x32r4"),
    C1_ENTRY(0, 1, 32, 32, 2, 32, Act::Param, true, "32x32r2"),
};

// The single-filter streaming kernel (conv2d_c1_stream.cuh): one instantiation per K and activation; the
// rows each warp streams is a launch argument, offered at a few values (more rows: less vertical halo
// read twice; fewer: more warps for a small image).
struct C1StreamEntry {
  int k, rows;
  Act act;
  void (*launch)(const float*, float*, const ConvGeometry&, const Epilogue&, const C1Filters&, const float*, cudaStream_t);
};
#define C1_STREAM_ENTRY(K, ACT, ROWS) C1StreamEntry{K, ROWS, ACT, &c1::launch_c1_stream<K, ACT, ROWS>}
#define C1_STREAM_ROWS(K, ACT)                                                                                   \
  C1_STREAM_ENTRY(K, ACT, 2), C1_STREAM_ENTRY(K, ACT, 4), C1_STREAM_ENTRY(K, ACT, 8), C1_STREAM_ENTRY(K, ACT, 16), \
      C1_STREAM_ENTRY(K, ACT, 32), C1_STREAM_ENTRY(K, ACT, 64)
#define C1_STREAM(K) C1_STREAM_ROWS(K, Act::None), C1_STREAM_ROWS(K, Act::Relu)
const C1StreamEntry kC1StreamEntries[] = {C1_STREAM(1), C1_STREAM(3), C1_STREAM(5)};

// The streaming variants for this layer, the one that makes about 16 warps per SM of the H100 first; a row
// count is offered only where the next smaller one leaves more than one chunk of rows.
std::vector<C1Variant> c1_stream_variants(const ConvGeometry& g, const Epilogue& e) {
  std::vector<C1Variant> out;
  if (!c1::c1_stream_eligible(g, e)) return out;
  const Act act = e.param_act == ParamAct::Relu ? Act::Relu : Act::None;
  std::vector<const C1StreamEntry*> fitting;
  for (const C1StreamEntry& entry : kC1StreamEntries) {
    if (entry.k == g.KH && entry.act == act && (entry.rows == 2 || entry.rows / 2 < g.OH)) fitting.push_back(&entry);
  }
  const double strips = std::ceil(g.OW / double(c1::kStreamStrip));
  auto distance = [&](const C1StreamEntry* en) {
    const double warps = double(g.N) * strips * std::ceil(g.OH / double(en->rows));
    return std::fabs(std::log(warps / (132.0 * 16.0)));
  };
  std::stable_sort(fitting.begin(), fitting.end(),
                   [&](const C1StreamEntry* a, const C1StreamEntry* b) { return distance(a) < distance(b); });
  for (const C1StreamEntry* en : fitting) {
    out.push_back({"c1_k" + std::to_string(en->k) + "s1_f1_stream_r" + std::to_string(en->rows) +
                       "_" + act_name(en->act),
                   en->launch, true});
  }
  return out;
}

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

bool conv2d_c1_supports(const ConvGeometry& g, const Epilogue& e, std::string* why) {
  auto no = [why](const char* reason) {
    if (why) *why = reason;
    return false;
  };
  if (g.C != 1 || g.groups != 1) return no("needs one input channel");
  if (g.F > kC1MaxFilters) return no("more than 32 filters");
  if (g.KH > 11 || g.KW > 11) return no("kernel larger than 11x11");
  if (g.stride_h != g.stride_w || (g.stride_h != 1 && g.stride_h != 2)) return no("stride other than 1 or 2");
  if (g.dil_h != 1 || g.dil_w != 1) return no("dilation");
  if (e.pool.kind != FusedPool::None && e.residual) return no("pooling after a residual add");
  if (e.pool.kind != FusedPool::None && g.stride_h != 1) return no("pooling after a strided conv");
  return true;
}

std::vector<C1Variant> conv2d_c1_variants(const ConvGeometry& g, const Epilogue& e) {
  if (!conv2d_c1_supports(g, e)) return {};
  std::vector<C1Variant> out = c1_stream_variants(g, e);
  const bool pool = e.pool.kind != FusedPool::None;
  const bool square_fixed = g.KH == g.KW && (g.KH == 1 || g.KH == 3 || g.KH == 5);
  // Fixed-K instantiations when the shape has one; the epilogue's activation picks the Act variant
  // (Param covers everything, the dedicated ones are faster).
  std::vector<const C1Entry*> fitting;
  for (const C1Entry& entry : kC1Entries) {
    if (entry.s != g.stride_h || entry.pool != pool) continue;
    // A grouped entry only where it makes two groups or more (one group is its _smemw twin). (Whether the
    // step adds a residual is not known here: e.residual is bound at launch; every c1 tile handles one.)
    if (entry.filter_groups ? entry.fmax >= g.F : entry.fmax < g.F) continue;
    if (square_fixed ? entry.k != g.KH : entry.k != 0) continue;
    const bool act_ok = entry.act == Act::Param || (entry.act == Act::None && e.param_act == ParamAct::None) ||
                        (entry.act == Act::Relu && e.param_act == ParamAct::Relu);
    if (!act_ok) continue;
    if (pool && (pooled_tile(entry.th, e.pool.kh, e.pool.dil_h, e.pool.sh) < 1 ||
                 pooled_tile(entry.tw, e.pool.kw, e.pool.dil_w, e.pool.sw) < 1)) {
      continue;
    }
    fitting.push_back(&entry);
  }
  // Heuristic order: dedicated activation before Param, the smallest FMAX that holds F, then the tile
  // whose width wastes the fewest columns of this image.
  auto waste = [&](const C1Entry* en) {
    const int w = pool ? e.pool.PW : g.OW;
    return (en->tw - w % en->tw) % en->tw + (w < en->tw ? en->tw - w : 0);
  };
  std::stable_sort(fitting.begin(), fitting.end(), [&](const C1Entry* a, const C1Entry* b) {
    const bool pa = a->act == Act::Param, pb = b->act == Act::Param;
    if (pa != pb) return !pa;
    if (a->filter_groups != b->filter_groups) return !a->filter_groups;
    if (a->fmax != b->fmax) return a->fmax < b->fmax;
    return waste(a) < waste(b);
  });
  for (const C1Entry* en : fitting) {
    const std::string k = en->k > 0 ? std::to_string(en->k) : "any";
    out.push_back({"c1_k" + k + "s" + std::to_string(en->s) + (en->filter_groups ? "_fg" : "_f") + std::to_string(en->fmax) + "_" + en->tile_name +
                       "_" + act_name(en->act) + (en->pool ? "_pool" : "") + (en->smem_weights ? "_smemw" : ""),
                   en->launch, en->smem_weights});
  }
  return out;
}

}  // namespace cnnrt::kernels
