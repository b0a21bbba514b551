// Family "igemm": implicit GEMM on the CUDA cores (FP32 FMA), for any convolution geometry on any GPU.
//
// The convolution as a matrix product, per group: out[f][p] = sum_k W[f][k] * X[k][p], with f a filter of
// the group, p an output pixel of the batch (n, oy, ox) and k a tap (c, ky, kx) of the group's channels. A
// block computes BM filters x BN pixels: BK taps at a time, the filter tile [BK][BM] and the gathered input
// tile [BK][BN] (im2col on the fly: out-of-image taps read as 0) in shared memory, double-buffered through
// registers, each thread a TM x TN register tile (float4 reads of both operands). The epilogue adds the bias
// and the residual and applies the activation.
//
// It is the planner's fallback that needs nothing of the device: every stride, dilation, group count,
// filter size and 1-D convolution, on Turing as on Hopper. Where the tensor cores (tc) or a specialised
// direct family exist, they are faster and the tuner measures which wins.
#include "kernels/conv_common.cuh"
#include "kernels/conv_device.cuh"
#include "kernels/conv_registry.hpp"
#include "kernels/launch.cuh"

namespace cnnrt::kernels {

namespace igemm {

constexpr int kBK = 8;

template <int BM_, int BN_, int TM_, int TN_, Act ACT_>
struct Cfg {
  static constexpr int BM = BM_, BN = BN_, TM = TM_, TN = TN_, BK = kBK;
  static constexpr Act ACT = ACT_;
  static constexpr int THREADS = (BM / TM) * (BN / TN);
  static constexpr int APITCH = BM + 4;  // As[k][m]: conflict-free stores of a warp's 4 filters x 8 taps
  static constexpr int A_LOADS = BK * BM / THREADS;
  static constexpr int B_LOADS = BK * BN / THREADS;
  static constexpr int B_KSTEP = THREADS / BN;  // taps between a thread's successive input loads
  static constexpr int STAGE_FLOATS = BK * APITCH + BK * BN;
  static_assert(TM == 4 && TN == 4, "float4 operand reads");
  static_assert(THREADS % BN == 0 && (BK * BM) % THREADS == 0 && THREADS % BK == 0, "whole load rounds");
};

// The layer's extents as the kernel reads them.
struct Params {
  int taps, cg, fg, K, ohw, npix;
};

template <class C>
__global__ void __launch_bounds__(C::THREADS)
    conv2d_igemm_kernel(const float* __restrict__ x, float* __restrict__ y, const float* __restrict__ w,
                        const ConvGeometry g, const Epilogue e, const Params q) {
  wait_for_prior_grid();  // launched with PDL (launch.cuh): nothing global before this
  __shared__ __align__(16) float smem[2 * C::STAGE_FLOATS];
  const int tid = threadIdx.x;
  const int group = blockIdx.z;
  const int f_tile = blockIdx.y * C::BM;  // first filter of the tile within its group
  const int p_tile = blockIdx.x * C::BN;

  // This thread's input column: one output pixel, fixed for the whole reduction.
  const int bp = tid % C::BN, bk0 = tid / C::BN;
  const int pix = p_tile + bp;
  const bool pix_ok = pix < q.npix;
  int iy0 = 0, ix0 = 0;
  int64_t xbase = 0;
  if (pix_ok) {
    const int n = pix / q.ohw, rem = pix - n * q.ohw;
    const int oy = rem / g.OW, ox = rem - oy * g.OW;
    iy0 = oy * g.stride_h - g.pad_top;
    ix0 = ox * g.stride_w - g.pad_left;
    xbase = (static_cast<int64_t>(n) * g.C + static_cast<int64_t>(group) * q.cg) * g.H * g.W;
  }
  // This thread's filter loads: tap ak of filters am + i * (THREADS / BK).
  const int ak = tid % C::BK, am = tid / C::BK;
  const float* wg = w + static_cast<int64_t>(group) * q.fg * q.K;

  float a_reg[C::A_LOADS], b_reg[C::B_LOADS];
  auto load_tiles = [&](int k0) {
#pragma unroll
    for (int i = 0; i < C::A_LOADS; ++i) {
      const int f = f_tile + am + i * (C::THREADS / C::BK), k = k0 + ak;
      a_reg[i] = (f < q.fg && k < q.K) ? __ldg(wg + static_cast<int64_t>(f) * q.K + k) : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < C::B_LOADS; ++i) {
      const int k = k0 + bk0 + i * C::B_KSTEP;
      float v = 0.0f;
      if (pix_ok && k < q.K) {
        const int c = k / q.taps, r = k - c * q.taps;
        const int ky = r / g.KW, kx = r - ky * g.KW;
        const int iy = iy0 + ky * g.dil_h, ix = ix0 + kx * g.dil_w;
        if (iy >= 0 && iy < g.H && ix >= 0 && ix < g.W) {
          v = __ldg(x + xbase + (static_cast<int64_t>(c) * g.H + iy) * g.W + ix);
        }
      }
      b_reg[i] = v;
    }
  };
  auto store_tiles = [&](float* stage) {
    float* As = stage;
    float* Bs = stage + C::BK * C::APITCH;
#pragma unroll
    for (int i = 0; i < C::A_LOADS; ++i) As[ak * C::APITCH + am + i * (C::THREADS / C::BK)] = a_reg[i];
#pragma unroll
    for (int i = 0; i < C::B_LOADS; ++i) Bs[(bk0 + i * C::B_KSTEP) * C::BN + bp] = b_reg[i];
  };

  const int tx = tid % (C::BN / C::TN), ty = tid / (C::BN / C::TN);
  float acc[C::TM][C::TN] = {};
  const int ktiles = (q.K + C::BK - 1) / C::BK;
  load_tiles(0);
  store_tiles(smem);
  __syncthreads();
  for (int kt = 0; kt < ktiles; ++kt) {
    const float* stage = smem + (kt & 1) * C::STAGE_FLOATS;
    if (kt + 1 < ktiles) load_tiles((kt + 1) * C::BK);  // in flight while this tile is multiplied
    const float* As = stage;
    const float* Bs = stage + C::BK * C::APITCH;
#pragma unroll
    for (int k = 0; k < C::BK; ++k) {
      const float4 a = *reinterpret_cast<const float4*>(As + k * C::APITCH + ty * C::TM);
      const float4 b = *reinterpret_cast<const float4*>(Bs + k * C::BN + tx * C::TN);
      const float av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
      for (int i = 0; i < C::TM; ++i) {
#pragma unroll
        for (int j = 0; j < C::TN; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
      }
    }
    if (kt + 1 < ktiles) {
      store_tiles(smem + ((kt + 1) & 1) * C::STAGE_FLOATS);  // the other stage: last read before the barrier below
      __syncthreads();
    }
  }

  // Epilogue: bias, residual, activation; pixels of a thread are consecutive (one image row mostly).
#pragma unroll
  for (int i = 0; i < C::TM; ++i) {
    const int f = f_tile + ty * C::TM + i;
    if (f >= q.fg) continue;
    const int gf = group * q.fg + f;
    const float bias = e.bias ? __ldg(e.bias + gf) : 0.0f;
#pragma unroll
    for (int j = 0; j < C::TN; ++j) {
      const int p = p_tile + tx * C::TN + j;
      if (p >= q.npix) continue;
      const int n = p / q.ohw, rem = p - n * q.ohw;
      const int64_t at = static_cast<int64_t>(n) * e.out_image_stride(int64_t(g.F) * q.ohw) + int64_t(gf) * q.ohw + rem;
      float v = acc[i][j] + bias;
      if (e.residual) v += __ldg(e.residual + at);
      y[at] = activate<C::ACT>(v, e);
    }
  }
}

template <class C>
void launch(const float* x, float* y, const float* w, const ConvGeometry& g, const Epilogue& e, cudaStream_t stream) {
  Params q;
  q.taps = g.KH * g.KW;
  q.cg = g.C / g.groups;
  q.fg = g.F / g.groups;
  q.K = q.cg * q.taps;
  q.ohw = g.OH * g.OW;
  q.npix = g.N * q.ohw;
  const dim3 grid(static_cast<unsigned>((q.npix + C::BN - 1) / C::BN), static_cast<unsigned>((q.fg + C::BM - 1) / C::BM),
                  static_cast<unsigned>(g.groups));
  launch_overlapped(conv2d_igemm_kernel<C>, grid, dim3(C::THREADS), 0, stream, 1, x, y, w, g, e, q);
}

// The instantiated tiles: 64 filters x 64 pixels (256 threads) for most layers, 32 x 64 (128 threads) for
// groups of few filters; each with ReLU compiled in and with the activation chosen at run time.
struct Entry {
  int bm, bn;
  Act act;
  void (*launch)(const float*, float*, const float*, const ConvGeometry&, const Epilogue&, cudaStream_t);
};

#define IGEMM_ENTRY(BM, BN, ACT) \
  Entry { BM, BN, ACT, &launch<Cfg<BM, BN, 4, 4, ACT>> }

const Entry kEntries[] = {
    IGEMM_ENTRY(64, 64, Act::Relu),
    IGEMM_ENTRY(64, 64, Act::Param),
    IGEMM_ENTRY(32, 64, Act::Relu),
    IGEMM_ENTRY(32, 64, Act::Param),
};

#undef IGEMM_ENTRY

}  // namespace igemm

namespace {

std::string variant_name(const igemm::Entry& en) {
  return "igemm_f" + std::to_string(en.bm) + "_px" + std::to_string(en.bn) + "_" + (en.act == Act::Relu ? "relu" : "act");
}

class IgemmFamily final : public ConvFamily {
 public:
  IgemmFamily()
      : ConvFamily("igemm",
                   "implicit GEMM on the CUDA cores (FP32 FMA), any geometry: filters x pixels a block, filters and "
                   "gathered input double-buffered in shared memory, a 4x4 register tile a thread",
                   {}, pack_nothing) {}

  bool writes_image_stride() const override { return true; }
  std::string reject(const ConvLayer& layer, const DeviceCaps&) const override {
    const ConvGeometry& g = layer.g;
    if (layer.pooled()) return "fused pooling";
    const int64_t K = int64_t(g.C / g.groups) * g.KH * g.KW;
    if (K >= (int64_t(1) << 30)) return "C*KH*KW too large";
    const int64_t npix = int64_t(g.N) * g.OH * g.OW;
    if (npix >= (int64_t(1) << 31) - 64 || int64_t(g.F) * K >= (int64_t(1) << 31)) return "too large for 32-bit indices";
    if (g.groups > 65535 || (g.F / g.groups + 31) / 32 > 65535) return "too many groups or filters for the grid";
    return "";
  }

  std::vector<ConvVariant> variants(const ConvLayer& layer, const DeviceCaps& dev, const LayerWeights& w) const override {
    const ConvGeometry& g = layer.g;
    const bool relu = layer.e.param_act == ParamAct::Relu;
    const int fg = g.F / g.groups;
    std::vector<std::pair<ConvVariant, double>> scored;  // score: estimated relative time, lower is better
    for (const igemm::Entry& en : igemm::kEntries) {
      if (en.act == Act::Relu && !relu) continue;
      // Work computed, padding of the filter tile included; the small tile wastes less on few filters.
      const double computed = double((fg + en.bm - 1) / en.bm) * en.bm * (en.bm == 64 ? 1.0 : 1.15);
      const double score = computed * (en.act == Act::Param && relu ? 1.02 : 1.0);
      scored.push_back({{variant_name(en), "", bind_launch(en.launch, layer, w.filters)}, score});
    }
    (void)dev;
    return rank_by_score(std::move(scored));
  }

  std::vector<std::string> variant_names() const override {
    return entry_names(igemm::kEntries, [](const igemm::Entry& en) { return variant_name(en); });
  }
};

}  // namespace

const ConvFamily& conv2d_igemm_family() {
  static const IgemmFamily family;
  return family;
}

}  // namespace cnnrt::kernels
