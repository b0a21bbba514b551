// Family "gap": a 1x1 convolution with its activation and a global pooling after it, in one launch: a classifier
// head written as a convolution (SqueezeNet's last layer over 13x13 maps, MobileNet's last 1x1 before the pool).
//
// Why: the pooling needs every activated output of a filter, the activation needs the whole sum over the channels;
// the tiled families write the full-resolution map and a second launch pools it (the layer's step is two kernels),
// and at batch 1 the layer is a few filters x a few hundred pixels x hundreds of channels: too few outputs to fill
// the GPU without splitting the channels.
//
// A block computes FB filters of one image over a share of the channels (a thread-block cluster of KS blocks along
// z: rank r sums channels [r * Cr, (r + 1) * Cr), compute capability 9.0; KS = 1 elsewhere):
//   0. before waiting for the prior grid (they are constants), its filters' weights for its channels, transposed
//      to [channel][filter] in shared memory;
//   1. its channels of the image, every pixel, into shared memory (cp.async);
//   2. the partial sums: a thread 4 filters x 2 pixels over one of S shares of the block's channels (lanes on
//      consecutive pixels; the filters' float4 shared by the warp); the shares added in order into [filter][pixel];
//   3. a cluster barrier; each rank takes its filters (filter f to rank f % KS) one after another over all its
//      threads: a thread adds the ranks' partial sums of its pixels in rank order (distributed shared memory, the
//      loads issued together), the bias, the activation, and pools its pixels; the threads' results combine by
//      shuffles and then warp by warp, in a fixed order; a second barrier keeps every rank's shared memory alive
//      until the others have read it.
// The order of every sum is fixed: the output is the same bit for bit from run to run.
#include <cooperative_groups.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cluster_ranks.cuh"
#include "kernels/conv_common.cuh"
#include "kernels/conv_device.cuh"
#include "kernels/conv_registry.hpp"
#include "kernels/cp_async.cuh"
#include "kernels/launch.cuh"
#include "kernels/smem_optin.cuh"

namespace cnnrt::kernels {

namespace gap {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

// The split of one layer for a variant: channels a rank (Cr), shares of them in the partial sums (S), and the
// shared-memory layout (floats, each a multiple of 4).
struct Plan {
  int Cr = 1, S = 1;
  int xs = 0, ws = 0, part = 0, wp = 0, red = 0, floats = 0;
};

inline int round4(int v) { return (v + 3) / 4 * 4; }

inline Plan plan_for(const ConvGeometry& g, int fb, int ks) {
  Plan p;
  const int hw = g.H * g.W;
  p.Cr = (g.C + ks - 1) / ks;
  const int items = fb / 4 * ((hw + 1) / 2);  // 4 filters x 2 pixels each
  p.S = std::max(1, std::min(kThreads / std::max(1, items), p.Cr / 8));
  p.xs = 0;  // (3 floats ahead: the copy starts where the image's alignment puts it)
  p.ws = p.xs + round4(3 + p.Cr * hw);
  p.part = p.ws + p.Cr * fb;
  p.wp = p.part + round4(fb * hw);  // the warps' pooled values
  p.red = p.wp + round4(kWarps);
  p.floats = p.red + (p.S > 1 ? p.S * items * 8 : 0);
  return p;
}

template <int FB, int KS>
__global__ void __launch_bounds__(kThreads)
    conv2d_gap_kernel(const float* __restrict__ x, float* __restrict__ y, const float* __restrict__ w,
                      const ConvGeometry g, const Epilogue e, const Plan p) {
  extern __shared__ float4 smem4[];
  float* s = reinterpret_cast<float*>(smem4);
  const int tid = static_cast<int>(threadIdx.x);
  const int f0 = static_cast<int>(blockIdx.x) * FB;
  const int n = static_cast<int>(blockIdx.y);
  const int rank = KS > 1 ? static_cast<int>(blockIdx.z) : 0;  // the cluster spans z
  const int hw = g.H * g.W;
  const int c0 = rank * p.Cr, cr = max(0, min(g.C, c0 + p.Cr) - c0);  // this rank's channels

  // 0. The weights of filters [f0, f0 + FB) for channels [c0, c0 + cr) as [channel][filter] (zeros past F).
  for (int i = tid; i < FB * p.Cr; i += kThreads) {
    const int fl = i / p.Cr, c = i - fl * p.Cr;
    const int f = f0 + fl;
    s[p.ws + c * FB + fl] = f < g.F && c < cr ? __ldg(w + static_cast<int64_t>(f) * g.C + c0 + c) : 0.0f;
  }
  wait_for_prior_grid();

  // 1. The rank's channels of image n: one contiguous run of cr planes, placed `lead` floats into the area so that
  // source and destination share their 16-byte alignment (16-byte copies for all but the ends).
  const float* xr = x + (static_cast<int64_t>(n) * g.C + c0) * hw;
  const int lead = static_cast<int>(reinterpret_cast<uintptr_t>(xr) / sizeof(float) % 4);
  const float* xs = s + p.xs + lead;
  {
    float* dst = s + p.xs + lead;
    const int head = min(cr * hw, (4 - lead) % 4);
    for (int i = tid; i < head; i += kThreads) cp_async_4(dst + i, xr + i, true);
    cp_async_floats<kThreads>(dst + head, xr + head, cr * hw - head);
  }
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  // 2. Partial sums: 4 filters x 2 pixels (px and px + half) an item, over one of S shares of the channels.
  constexpr int F4 = FB / 4;
  const int half = (hw + 1) / 2;
  const int items = F4 * half;
  const int share = (cr + p.S - 1) / p.S;
  auto put = [&](int f4, int px, float4 a, float4 b) {
    const float av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      s[p.part + (f4 * 4 + i) * hw + px] = av[i];
      if (px + half < hw) s[p.part + (f4 * 4 + i) * hw + px + half] = bv[i];
    }
  };
  for (int it = tid; it < items * p.S; it += kThreads) {
    const int sh = it / items, r = it - sh * items;
    const int f4 = r / half, px = r - f4 * half;
    const int px2 = min(px + half, hw - 1);  // (a duplicate read where hw is odd: not stored)
    float4 a = make_float4(0.0f, 0.0f, 0.0f, 0.0f), b = a;
    const int ca = sh * share, cb = min(cr, ca + share);
#pragma unroll 4
    for (int c = ca; c < cb; ++c) {
      const float xa = xs[c * hw + px], xb = xs[c * hw + px2];
      const float4 wv = smem4[(p.ws + c * FB) / 4 + f4];
      a.x = fmaf(wv.x, xa, a.x);
      a.y = fmaf(wv.y, xa, a.y);
      a.z = fmaf(wv.z, xa, a.z);
      a.w = fmaf(wv.w, xa, a.w);
      b.x = fmaf(wv.x, xb, b.x);
      b.y = fmaf(wv.y, xb, b.y);
      b.z = fmaf(wv.z, xb, b.z);
      b.w = fmaf(wv.w, xb, b.w);
    }
    if (p.S == 1) {
      put(f4, px, a, b);
    } else {
      smem4[p.red / 4 + 2 * it] = a;
      smem4[p.red / 4 + 2 * it + 1] = b;
    }
  }
  if (p.S > 1) {
    __syncthreads();
    for (int r = tid; r < items; r += kThreads) {
      float4 a = smem4[p.red / 4 + 2 * r], b = smem4[p.red / 4 + 2 * r + 1];
      for (int sh = 1; sh < p.S; ++sh) {
        const float4 u = smem4[p.red / 4 + 2 * (sh * items + r)], v = smem4[p.red / 4 + 2 * (sh * items + r) + 1];
        a.x += u.x;
        a.y += u.y;
        a.z += u.z;
        a.w += u.w;
        b.x += v.x;
        b.y += v.y;
        b.z += v.z;
        b.w += v.w;
      }
      put(r / half, r % half, a, b);
    }
  }
  rank_barrier(KS);  // every rank's partial sums, in its shared memory

  // 3. This rank's filters (f0 + fl, fl % KS == rank), one after another over the whole block: a thread's pixels,
  // the ranks' sums of each in rank order (their loads issued together), bias, activation, pooled; then the
  // threads' results combined in a fixed order (shuffles within each warp, then the warps in order).
  float* warp_pool = s + p.wp;
  const int warp = tid / 32, lane = tid % 32;
  const bool max_pool = e.pool.kind == FusedPool::Max;
  for (int fl = rank; fl < FB && f0 + fl < g.F; fl += KS) {
    const int f = f0 + fl;
    const float b = e.bias ? __ldg(e.bias + f) : 0.0f;
    float pooled = max_pool ? -INFINITY : 0.0f;
    for (int px = tid; px < hw; px += kThreads) {
      float part[KS];
#if !CNNRT_ARCH_BELOW(900)
      if constexpr (KS > 1) {
        cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
#pragma unroll
        for (int q = 0; q < KS; ++q) part[q] = cluster.map_shared_rank(s + p.part, q)[fl * hw + px];
      } else {
        part[0] = s[p.part + fl * hw + px];
      }
#else
      part[0] = s[p.part + fl * hw + px];
#endif
      float v = part[0];
#pragma unroll
      for (int q = 1; q < KS; ++q) v += part[q];
      v = param_activate(v + b, e.param_act, e.alpha, e.beta);
      pooled = max_pool ? fmaxf(pooled, v) : pooled + v;
    }
#pragma unroll
    for (int off = 16; off > 0; off /= 2) {
      const float o = __shfl_xor_sync(0xffffffffu, pooled, off);
      pooled = max_pool ? fmaxf(pooled, o) : pooled + o;
    }
    if (lane == 0) warp_pool[warp] = pooled;
    __syncthreads();
    if (tid == 0) {
      float r = warp_pool[0];
      for (int i = 1; i < kWarps; ++i) r = max_pool ? fmaxf(r, warp_pool[i]) : r + warp_pool[i];
      y[static_cast<int64_t>(n) * g.F + f] = max_pool ? r : r / static_cast<float>(hw);
    }
    __syncthreads();  // warp_pool is reused by the next filter
  }
  rank_barrier(KS);  // no rank leaves while another still reads its shared memory
}

template <int FB, int KS>
void launch(const float* x, float* y, const float* w, const ConvGeometry& g, const Epilogue& e, cudaStream_t stream) {
  const Plan p = plan_for(g, FB, KS);
  allow_all_dynamic_smem<conv2d_gap_kernel<FB, KS>>();
  if (KS > 8) allow_large_clusters<conv2d_gap_kernel<FB, KS>>();
  launch_overlapped(conv2d_gap_kernel<FB, KS>,
                    dim3(static_cast<unsigned>((g.F + FB - 1) / FB), static_cast<unsigned>(g.N),
                         static_cast<unsigned>(KS)),
                    dim3(kThreads), size_t(p.floats) * sizeof(float), stream, static_cast<unsigned>(KS), x, y, w, g,
                    e, p);
}

// The instantiations: filters a block (FB) x blocks a cluster (KS). FB 4: the most blocks for few filters; 32: each
// staged input read for 32 filters where there are many (MobileNet's 1280).
struct Entry {
  int fb, ks;
  void (*launch)(const float*, float*, const float*, const ConvGeometry&, const Epilogue&, cudaStream_t);
};

#define GAP_ENTRY(FB, KS) \
  Entry { FB, KS, &launch<FB, KS> }
const Entry kEntries[] = {GAP_ENTRY(4, 1), GAP_ENTRY(8, 1),  GAP_ENTRY(32, 1), GAP_ENTRY(4, 8),
                          GAP_ENTRY(8, 4), GAP_ENTRY(8, 8), GAP_ENTRY(8, 16), GAP_ENTRY(32, 8)};
#undef GAP_ENTRY

}  // namespace gap

namespace {

std::string variant_name(const gap::Entry& en) {
  return "gap_f" + std::to_string(en.fb) + "_k" + std::to_string(en.ks);
}

class GapFamily final : public ConvFamily {
 public:
  GapFamily()
      : ConvFamily("gap",
                   "a 1x1 convolution, its activation and a global pooling in one launch: filters x an image a block "
                   "(the channels split over a thread-block cluster), the partial sums added across it in distributed "
                   "shared memory, the block's threads pooling each filter",
                   {}, pack_nothing) {}

  std::string reject(const ConvLayer& layer, const DeviceCaps& dev) const override {
    const ConvGeometry& g = layer.g;
    if (!layer.pooled()) return "no global pooling after it";
    if (!layer.pooled_globally()) return "a pooling that is not global";
    if (g.KH != 1 || g.KW != 1 || g.stride_h != 1 || g.stride_w != 1 || g.pad_top != 0 || g.pad_left != 0 ||
        g.pad_bottom != 0 || g.pad_right != 0 || g.groups != 1) {
      return "not a 1x1 convolution of stride 1, no padding, one group";
    }
    if (layer.residual) return "a residual";
    if (g.N > 65535) return "more than 65535 images";
    if (int64_t(g.N) * g.C * g.H * g.W >= (int64_t(1) << 40) || int64_t(g.F) * g.C >= (int64_t(1) << 40)) {
      return "too large for the kernel's offsets";
    }
    if (variants_fitting(layer, dev).empty()) return "a block's channels exceed shared memory";
    return "";
  }

  std::vector<ConvVariant> variants(const ConvLayer& layer, const DeviceCaps& dev, const LayerWeights& w) const override {
    const ConvGeometry& g = layer.g;
    std::vector<std::pair<ConvVariant, double>> scored;  // score: estimated relative time, lower is better
    for (const gap::Entry* en : variants_fitting(layer, dev)) {
      // A block's serial work (its channels x its filters x the pixels, over its threads) plus the blocks beyond
      // one wave.
      const double blocks = double((g.F + en->fb - 1) / en->fb) * g.N * en->ks;
      const double per_block = double((g.C + en->ks - 1) / en->ks) * en->fb * g.H * g.W / gap::kThreads;
      const double waves = std::ceil(blocks / std::max(1, dev.sm_count));
      scored.push_back({{variant_name(*en), "", bind_launch(en->launch, layer, w.filters)}, per_block * waves});
    }
    return rank_by_score(std::move(scored));
  }

  std::vector<std::string> variant_names() const override {
    return entry_names(gap::kEntries, [](const gap::Entry& en) { return variant_name(en); });
  }

 private:
  // The instantiations this device and shared memory run the layer with: clusters only where the device has them
  // (16 blocks where it allows non-portable sizes: compute capability 9.0), and no more ranks than channels / 4.
  static std::vector<const gap::Entry*> variants_fitting(const ConvLayer& layer, const DeviceCaps& dev) {
    std::vector<const gap::Entry*> out;
    const bool clusters = device_lacks(dev, {kClusters}).empty();
    for (const gap::Entry& en : gap::kEntries) {
      if (en.ks > 1 && (!clusters || layer.g.C < 4 * en.ks)) continue;
      if (size_t(gap::plan_for(layer.g, en.fb, en.ks).floats) * sizeof(float) > size_t(dev.smem_optin)) continue;
      out.push_back(&en);
    }
    return out;
  }
};

}  // namespace

const ConvFamily& conv2d_gap_family() {
  static const GapFamily family;
  return family;
}

}  // namespace cnnrt::kernels
