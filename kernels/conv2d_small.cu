// The small-map convolution kernel (see conv2d_small.cuh): staging, one output pixel a thread over a
// channel slice, the slices' sum in shared memory, the fused epilogue; the configurations worth timing.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "kernels/conv2d_general.cuh"  // pack_general
#include "kernels/conv2d_small.cuh"
#include "kernels/conv_registry.hpp"
#include "kernels/conv_device.cuh"
#include "kernels/cp_async.cuh"
#include "kernels/fast_div.cuh"
#include "kernels/launch.cuh"

namespace cnnrt::kernels {

namespace {

constexpr int kMaxThreads = 1024;
constexpr int kMaxSmemBytes = 96 * 1024;  // far above what small maps need; every sm_90 part has it
// Eligible maps: output at most 64 wide, input at most 32K floats an image (LeNet's conv2: 1568). Larger layers
// have the work to fill the machine with the general and tensor-core kernels.
constexpr int64_t kMaxImageFloats = 32 * 1024;

// Everything the launch derives from (layer, configuration): the tile, the staged region, the block.
struct SmallShape {
  int tiles_y = 1;            // row tiles per image
  int ptile_h = 0;            // pooled rows per tile (0 without a pool)
  int th = 1, tw = 1;         // conv outputs computed per tile
  int ih = 1, iw = 1, pitch = 1;
  int fb = 1, np = 1, row_runs = 1, runs = 1, items = 1, threads = 32;
  int flt_floats = 0, img_floats = 0, part_floats = 0;
  size_t smem_bytes = 0;
};

SmallShape small_shape(const ConvGeometry& g, const Epilogue& e, const SmallConfig& c) {
  SmallShape s;
  const int K = g.KH;
  if (e.pool.kind != FusedPool::None) {
    s.ptile_h = std::min(c.tile_rows, e.pool.PH);
    s.tiles_y = (e.pool.PH + s.ptile_h - 1) / s.ptile_h;
    s.th = (s.ptile_h - 1) * e.pool.sh + (e.pool.kh - 1) * e.pool.dil_h + 1;
    s.tw = (e.pool.PW - 1) * e.pool.sw + (e.pool.kw - 1) * e.pool.dil_w + 1;
  } else {
    s.th = std::min(c.tile_rows, g.OH);
    s.tiles_y = (g.OH + s.th - 1) / s.th;
    s.tw = g.OW;
  }
  s.ih = s.th + K - 1;
  s.iw = s.tw + K - 1;
  s.pitch = s.iw + c.wt - 1;  // a run past the tile's last column still reads its own row
  while (s.pitch % 32 != s.tw % 32) ++s.pitch;  // a warp's consecutive pixels on distinct banks
  s.fb = c.ft * c.fg;
  s.np = s.th * s.tw;
  s.row_runs = (s.tw + c.wt - 1) / c.wt;
  s.runs = s.th * s.row_runs;
  s.items = c.fg * c.cs * s.runs;
  s.threads = std::min(kMaxThreads, (s.items + 31) / 32 * 32);
  s.flt_floats = (g.C * K * K * s.fb + 3) / 4 * 4;
  s.img_floats = g.C * s.ih * s.pitch;
  s.part_floats = c.cs * s.fb * s.np;
  s.smem_bytes = sizeof(float) * (static_cast<size_t>(s.flt_floats) + s.img_floats + s.part_floats);
  return s;
}

// The kernel's view of the shape: extents and the divisors of its index arithmetic.
struct Params {
  FastDiv tiles_y, np, tw, cs, fg, ih, iw;
  FastDiv runs, row_runs;  // runs of WT pixels a tile holds, runs a row
  int ptile_h, th, pitch, fb, items, flt_floats, img_floats;
};

// cp.async of 4 bytes to a shared-memory address (zero-filled when !valid); a plain copy on sm_75 (cp_async.cuh).
__device__ __forceinline__ void copy_4(unsigned dst, const float* src, bool valid) {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 4 : 0));
#else
  const float v = valid ? __ldg(src) : 0.0f;
  asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(dst), "f"(v) : "memory");
#endif
}

template <int K, int FT, int WT, Act ACT, bool POOL>
__global__ void __launch_bounds__(kMaxThreads)
    conv2d_small_kernel(const float* __restrict__ x, float* __restrict__ y, const float* __restrict__ wt,
                        const ConvGeometry g, const Epilogue e, const Params p) {
  constexpr int KK = K * K;
  extern __shared__ float4 smem4[];
  float* flt = reinterpret_cast<float*>(smem4);  // [C][FG][K*K][FT]
  float* img = flt + p.flt_floats;               // [C][IH][pitch]
  float* part = img + p.img_floats;              // [CS][FB][TH*TW]; slice 0 becomes the activated conv tile
  const int tid = threadIdx.x, nthreads = blockDim.x;
  const int n = p.tiles_y.div(blockIdx.x);
  const int tile_y = blockIdx.x - n * static_cast<int>(p.tiles_y.d);
  const int f0 = blockIdx.y * p.fb;
  const int fg = static_cast<int>(p.fg.d), cs = static_cast<int>(p.cs.d), np = static_cast<int>(p.np.d);
  const int ih = static_cast<int>(p.ih.d), iw = static_cast<int>(p.iw.d), tw = static_cast<int>(p.tw.d);

  // The filters first: no kernel writes weights, so their copies overlap the previous kernel's tail.
  const int f_pad = (g.F + 3) & ~3;
  const unsigned flt_s = static_cast<unsigned>(__cvta_generic_to_shared(flt));
  for (int i = tid; i < g.C * fg * KK * FT; i += nthreads) {
    const int r = i / FT, tap = r % KK, cg = r / KK;
    const int c = p.fg.div(cg), f = f0 + (cg - c * fg) * FT + i % FT;
    const bool ok = f < g.F;
    copy_4(flt_s + 4 * i, ok ? wt + (c * KK + tap) * f_pad + f : wt, ok);
  }
  wait_for_prior_grid();

  // The input region of every channel, zero outside the image.
  int r0, c0;  // the tile's first conv output row and column
  if constexpr (POOL) {
    r0 = tile_y * p.ptile_h * e.pool.sh - e.pool.pad_top;
    c0 = -e.pool.pad_left;
  } else {
    r0 = tile_y * p.th;
    c0 = 0;
  }
  const int iy0 = r0 - g.pad_top, ix0 = c0 - g.pad_left;
  // One element a thread and pass (a few per thread): the index arithmetic by FastDiv, offsets in 32 bits
  // (an image holds at most kMaxImageFloats), shared addresses from one base.
  const float* xn = x + static_cast<int64_t>(n) * g.C * g.H * g.W;
  const unsigned img_s = static_cast<unsigned>(__cvta_generic_to_shared(img));
  for (int i = tid; i < g.C * ih * iw; i += nthreads) {
    const int row = p.iw.div(i), col = i - row * iw;
    const int c = p.ih.div(row), iy = iy0 + row - c * ih, ix = ix0 + col;
    const bool ok = iy >= 0 && iy < g.H && ix >= 0 && ix < g.W;
    copy_4(img_s + 4 * (row * p.pitch + col), ok ? xn + (c * g.H + iy) * g.W + ix : x, ok);
  }
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  float* yn = y + static_cast<int64_t>(n) * e.out_image_stride(static_cast<int64_t>(g.F) *
                      (POOL ? static_cast<int64_t>(e.pool.PH) * e.pool.PW : static_cast<int64_t>(g.OH) * g.OW));
  // Conv output `pix` of the tile for local filter `fl`, summed over every channel: bias, residual,
  // activation; into the conv tile (pooling) or to global memory.
  auto finish = [&](int fl, int pix, float v) {
    const int f = f0 + fl;
    if (f >= g.F) return;
    if (e.bias) v += __ldg(e.bias + f);
    if constexpr (POOL) {
      part[fl * np + pix] = activate<ACT>(v, e);
    } else {
      const int py = p.tw.div(pix), oy = r0 + py, ox = pix - py * tw;
      if (oy < g.OH && ox < g.OW) {
        const int64_t idx = (static_cast<int64_t>(f) * g.OH + oy) * g.OW + ox;
        if (e.residual) v += __ldg(e.residual + static_cast<int64_t>(n) * g.F * g.OH * g.OW + idx);
        yn[idx] = activate<ACT>(v, e);
      }
    }
  };

  // Item = (filter group, channel slice, run of WT pixels along a row), runs fastest: a warp shares its group
  // and slice, so its filter loads are broadcasts and its input loads consecutive pixels. A run's WT outputs
  // reuse each input row's WT + K - 1 values over the K taps and each filter vector over the WT outputs.
  const int runs = static_cast<int>(p.runs.d), row_runs = static_cast<int>(p.row_runs.d);
  for (int it = tid; it < p.items; it += nthreads) {
    const int q = p.runs.div(it), run = it - q * runs;
    const int grp = p.cs.div(q), s = q - grp * cs;
    const int py = p.row_runs.div(run), px = (run - py * row_runs) * WT;
    float acc[FT][WT];
#pragma unroll
    for (int f = 0; f < FT; ++f) {
#pragma unroll
      for (int j = 0; j < WT; ++j) acc[f][j] = 0.0f;
    }
    const float* ip = img + (s * ih + py) * p.pitch + px;
    const float* fp = flt + (s * fg + grp) * KK * FT;
    const int istep = cs * ih * p.pitch, fstep = cs * fg * KK * FT;
    for (int c = s; c < g.C; c += cs, ip += istep, fp += fstep) {
#pragma unroll
      for (int ky = 0; ky < K; ++ky) {
        float in[WT + K - 1];
#pragma unroll
        for (int i = 0; i < WT + K - 1; ++i) in[i] = ip[ky * p.pitch + i];
#pragma unroll
        for (int kx = 0; kx < K; ++kx) {
          float w[FT];
          if constexpr (FT == 4) {
            const float4 w4 = *reinterpret_cast<const float4*>(fp + (ky * K + kx) * FT);
            w[0] = w4.x;
            w[1] = w4.y;
            w[2] = w4.z;
            w[3] = w4.w;
          } else {
#pragma unroll
            for (int f = 0; f < FT; ++f) w[f] = fp[(ky * K + kx) * FT + f];
          }
#pragma unroll
          for (int f = 0; f < FT; ++f) {
#pragma unroll
            for (int j = 0; j < WT; ++j) acc[f][j] = fmaf(in[kx + j], w[f], acc[f][j]);
          }
        }
      }
    }
    // A run may end past the tile's last column (odd widths): those outputs are dropped.
#pragma unroll
    for (int j = 0; j < WT; ++j) {
      if (px + j >= tw) continue;
      const int pix = py * tw + px + j;
#pragma unroll
      for (int f = 0; f < FT; ++f) {
        if (cs == 1) {
          finish(grp * FT + f, pix, acc[f][j]);
        } else {
          part[(s * p.fb + grp * FT + f) * np + pix] = acc[f][j];
        }
      }
    }
  }

  if (cs > 1) {
    __syncthreads();
    // The slices' partial sums in slice order, into slice 0's place (each (filter, pixel) is one thread's).
    for (int it = tid; it < p.fb * np; it += nthreads) {
      const int fl = p.np.div(it), pix = it - fl * np;
      float sum = 0.0f;
      for (int s = 0; s < cs; ++s) sum += part[(s * p.fb + fl) * np + pix];
      finish(fl, pix, sum);
    }
  }
  if constexpr (POOL) {
    __syncthreads();
    const PoolGeometry& pl = e.pool;
    pool_tile(part, p.th, tw, min(p.fb, g.F - f0), r0, c0, tile_y * p.ptile_h, 0, p.ptile_h, pl.PW, pl, g.OH, g.OW,
              yn + static_cast<int64_t>(f0) * pl.PH * pl.PW, tid, nthreads);
  }
}

template <int K, int FT, int WT, Act ACT, bool POOL>
void launch_small(const float* x, float* y, const float* w, const ConvGeometry& g, const Epilogue& e,
                  const SmallConfig& c, cudaStream_t stream) {
  const SmallShape s = small_shape(g, e, c);
  Params p;
  p.tiles_y = FastDiv(s.tiles_y);
  p.np = FastDiv(s.np);
  p.tw = FastDiv(s.tw);
  p.cs = FastDiv(c.cs);
  p.fg = FastDiv(c.fg);
  p.ih = FastDiv(s.ih);
  p.runs = FastDiv(s.runs);
  p.row_runs = FastDiv(s.row_runs);
  p.ptile_h = s.ptile_h;
  p.th = s.th;
  p.iw = FastDiv(s.iw);
  p.pitch = s.pitch;
  p.fb = s.fb;
  p.items = s.items;
  p.flt_floats = s.flt_floats;
  p.img_floats = s.img_floats;
  allow_dynamic_smem<conv2d_small_kernel<K, FT, WT, ACT, POOL>>(kMaxSmemBytes);
  const dim3 grid(static_cast<unsigned>(g.N * s.tiles_y), static_cast<unsigned>((g.F + s.fb - 1) / s.fb));
  launch_overlapped(conv2d_small_kernel<K, FT, WT, ACT, POOL>, grid, dim3(s.threads), s.smem_bytes, stream, 1u, x, y, w,
                    g, e, p);
}

struct Entry {
  int k, ft, wt;
  Act act;
  bool pool;
  decltype(&launch_small<3, 1, 1, Act::Relu, false>) launch;
};

// Per kernel size: (FT, WT) = (1, 1), (4, 1), (4, 2); each with ReLU or the runtime activation, pooled or not.
#define SMALL_ENTRY(K, FT, WT, ACT, POOL) Entry{K, FT, WT, ACT, POOL, &launch_small<K, FT, WT, ACT, POOL>}
#define SMALL_ACTS(K, FT, WT)                                                                  \
  SMALL_ENTRY(K, FT, WT, Act::Relu, false), SMALL_ENTRY(K, FT, WT, Act::Param, false),         \
      SMALL_ENTRY(K, FT, WT, Act::Relu, true), SMALL_ENTRY(K, FT, WT, Act::Param, true)
#define SMALL_ENTRIES(K) SMALL_ACTS(K, 1, 1), SMALL_ACTS(K, 4, 1), SMALL_ACTS(K, 4, 2)
const Entry kEntries[] = {SMALL_ENTRIES(3), SMALL_ENTRIES(5)};
#undef SMALL_ACTS
#undef SMALL_ENTRIES
#undef SMALL_ENTRY

bool fits(const SmallShape& s) { return s.smem_bytes <= static_cast<size_t>(kMaxSmemBytes); }

}  // namespace

namespace {

const char* act_token(Act a) { return a == Act::Relu ? "relu" : "act"; }

std::string variant_name(const Entry& en, int fg, int cs, const std::string& rows) {
  return "small_k" + std::to_string(en.k) + "_f" + std::to_string(en.ft * fg) + "_rb" + std::to_string(en.ft) + "x" +
         std::to_string(en.wt) + "_cs" + std::to_string(cs) + "_h" + rows + "_" + act_token(en.act) +
         (en.pool ? "_pool" : "");
}

constexpr int kFilterGroups[] = {1, 2, 4};
constexpr int kChannelSlices[] = {1, 2, 4, 8, 16};

class SmallFamily final : public ConvFamily {
 public:
  bool writes_image_stride() const override { return true; }
  SmallFamily()
      : ConvFamily("small",
                   "small maps at small batches: every channel's input staged once, each thread one pixel (or two) for "
                   "up to 4 filters over a slice of the channels, the slices summed in shared memory",
                   {}, pack_general) {}

  std::string reject(const ConvLayer& layer, const DeviceCaps&) const override {
    const ConvGeometry& g = layer.g;
    const Epilogue& e = layer.e;
    if (g.groups != 1) return "grouped convolution";
    if (g.KH != g.KW || (g.KH != 3 && g.KH != 5)) return "kernel not 3x3 or 5x5";
    if (g.stride_h != 1 || g.stride_w != 1 || g.dil_h != 1 || g.dil_w != 1) return "stride or dilation";
    if (g.OW > 64 || static_cast<int64_t>(g.C) * g.H * g.W > kMaxImageFloats) return "not a small map";
    if (layer.pooled() && layer.residual) return "pooling with residual";
    if (layer.pooled() && (e.pool.PH < 1 || e.pool.PW < 1)) return "empty pooled output";
    if (!fits(small_shape(g, e, SmallConfig{}))) return "the staged input of every channel does not fit";
    return "";
  }


  std::vector<ConvVariant> variants(const ConvLayer& layer, const DeviceCaps& dev, const LayerWeights& w) const override {
    const ConvGeometry& g = layer.g;
    const Epilogue& e = layer.e;
    const int sm_count = std::max(1, dev.sm_count);
    const bool pool = layer.pooled();
    const bool relu = e.param_act == ParamAct::Relu;
    const int rows_total = pool ? e.pool.PH : g.OH;
    std::vector<int> row_options;
    for (int parts : {1, 2, 4, 8, 16}) {
      const int rows = (rows_total + parts - 1) / parts;
      if (std::find(row_options.begin(), row_options.end(), rows) == row_options.end()) row_options.push_back(rows);
    }
    std::vector<std::pair<ConvVariant, double>> scored;  // score: estimated cycles, lower is better
    for (const Entry& en : kEntries) {
      if (en.k != g.KH || en.pool != pool || (en.act == Act::Relu) != relu) continue;
      for (int rows : row_options) {
        for (int fg : kFilterGroups) {
          if ((fg - 1) * en.ft >= g.F) continue;  // a group of padding filters only
          for (int cs : kChannelSlices) {
            if (cs > g.C) continue;
            const SmallConfig c{en.ft, en.wt, fg, cs, rows};
            const SmallShape s = small_shape(g, e, c);
            // One item a thread, except where one filter group's pixels alone exceed a block.
            const bool one_pass = s.items <= kMaxThreads;
            if (!fits(s) || (!one_pass && (fg > 1 || cs > 1))) continue;
            // Estimate: fixed cost (launch, staging round trip, barriers) plus each thread's serial chain, issue
            // bound once a scheduler has more than ~4 warps; in waves of resident blocks.
            const double blocks = double(g.N) * s.tiles_y * ((g.F + s.fb - 1) / s.fb);
            const int resident = std::max(1, std::min(2048 / s.threads, static_cast<int>(228 * 1024 / s.smem_bytes)));
            const double waves = std::ceil(blocks / (double(sm_count) * resident));
            const double per_sm = std::min<double>(resident, std::ceil(blocks / sm_count));
            const double warps_per_scheduler = per_sm * s.threads / 128.0;
            // Instructions a tap and run: the filter load(s), the FMAs, and the input loads (a row's shared by K
            // taps).
            const double per_tap = (en.ft == 4 ? 1.0 : en.ft) + en.ft * en.wt + double(en.wt + g.KW - 1) / g.KW;
            const double chain =
                std::ceil(double(s.items) / s.threads) * std::ceil(double(g.C) / cs) * g.KH * g.KW * per_tap;
            const double score = waves * (3000.0 + chain * std::max(4.0, warps_per_scheduler)) + (cs > 1 ? 200.0 : 0.0);
            scored.push_back(
                {{variant_name(en, fg, cs, std::to_string(rows)), "", bind_launch(en.launch, layer, w.packed, c)}, score});
          }
        }
      }
    }
    return rank_by_score(std::move(scored));
  }

  std::vector<std::string> variant_names() const override {
    std::vector<std::string> names;
    for (const Entry& en : kEntries) {
      for (int fg : kFilterGroups) {
        for (int cs : kChannelSlices) names.push_back(variant_name(en, fg, cs, "*"));
      }
    }
    return names;
  }
};

}  // namespace

const ConvFamily& conv2d_small_family() {
  static const SmallFamily family;
  return family;
}

}  // namespace cnnrt::kernels
