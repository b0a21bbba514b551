#include "kernels/conv2d_depthwise.cuh"
#include "kernels/conv_registry.hpp"

#include <algorithm>
#include <type_traits>

#include "kernels/conv_tile.cuh"
#include "kernels/fast_div.cuh"
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

// Large batches of small maps: a block stages the whole input planes (with their padding) of `planes`
// consecutive (image, channel) pairs, of one image or several, and its threads take the items (plane, R output
// rows, one column) of those planes in order: lanes on consecutive columns, so the loads of a warp and its stores
// are runs of consecutive floats, with no thread idle but in the last pass. The planes' filters are staged
// before the PDL wait; each item reads its window of R output rows into registers once.
template <int K_, int S_, int R_, Act ACT_>
struct DwManyCfg {
  static constexpr int K = K_, S = S_, R = R_, BLOCK = 256;
  static constexpr Act ACT = ACT_;
  static constexpr int WIN_ROWS = (R - 1) * S + K;  // input rows under R output rows
};

struct DwManyShape {
  FastDiv channels;        // C
  FastDiv plane_hw;        // an input plane: H * W
  FastDiv in_w;            // W
  FastDiv items_a_plane;   // row groups * OW
  FastDiv out_w;           // OW
  FastDiv filter_floats;   // multiplier * K * K: one channel's filters
  int plane_floats = 0;    // a staged plane (with its padding): rows * pitch
  int pitch = 0;           // a staged row
  int rows = 0;            // staged rows
  int planes = 1;          // planes a block
  int total_planes = 0;    // N * C
};

template <class Cfg>
__global__ void __launch_bounds__(Cfg::BLOCK)
    conv2d_depthwise_many_kernel(const float* __restrict__ x, float* __restrict__ y, const float* __restrict__ w,
                                 const ConvGeometry g, const Epilogue e, const InputPrologue in, const DwManyShape q) {
  constexpr int K = Cfg::K, S = Cfg::S, R = Cfg::R, KK = K * K;
  extern __shared__ __align__(16) float smem[];
  const int p0 = blockIdx.x * q.planes;
  const int np = min(q.planes, q.total_planes - p0);
  const int plane_floats = q.plane_floats, pitch = q.pitch;
  float* wts = smem + q.planes * plane_floats;  // [plane][multiplier][K*K]
  const int fpc = static_cast<int>(q.filter_floats.d);
  // The planes' padding: the whole staged area zeroed (16-byte stores), before the wait.
  {
    float4* z = reinterpret_cast<float4*>(smem);
    const int n4 = np * plane_floats / 4;
    for (int i = threadIdx.x; i < n4; i += Cfg::BLOCK) z[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int i = 4 * n4 + threadIdx.x; i < np * plane_floats; i += Cfg::BLOCK) smem[i] = 0.0f;
  }
  // The filters of the block's channels (constants: before the wait).
  for_block_items(np * fpc, Cfg::BLOCK, [&](int i) {
    const int p = q.filter_floats.div(i), at = i - p * fpc;
    cp_async_4(wts + i, w + static_cast<int64_t>(q.channels.mod(p0 + p)) * fpc + at, true);
  });
  cp_async_commit();
  wait_for_prior_grid();  // launched with PDL (launch.cuh): no activation read before this
  __syncthreads();        // the zeros are down before any value lands on them
  // The planes' values, V at a time: element e (of the block's np * H * W, plane by plane) to its place inside the
  // padding. Loads first, then the stores, so that a thread has V_LOADS loads in flight.
  const int hw = g.H * g.W;
  auto stage = [&](auto vec) {
    constexpr int V = decltype(vec)::value, V_LOADS = 4;
    using Vec = typename std::conditional<V == 4, float4, float>::type;
    const int count = np * hw / V;
    for (int base = threadIdx.x; base < count; base += V_LOADS * Cfg::BLOCK) {
      Vec v[V_LOADS];
      int plane[V_LOADS], at[V_LOADS];  // the group's plane and its first element there (-1: none)
#pragma unroll
      for (int u = 0; u < V_LOADS; ++u) {
        const int e = (base + u * Cfg::BLOCK) * V;
        at[u] = -1;
        if (e >= np * hw) continue;
        plane[u] = q.plane_hw.div(e);
        at[u] = e - plane[u] * hw;
        const int n = q.channels.div(p0 + plane[u]), c = p0 + plane[u] - n * g.C;
        v[u] = __ldg(reinterpret_cast<const Vec*>(x + (static_cast<int64_t>(n) * g.C + in.channel(c, g.C)) * hw + at[u]));
      }
#pragma unroll
      for (int u = 0; u < V_LOADS; ++u) {
        if (at[u] < 0) continue;
        const int p = plane[u];
        int r = q.in_w.div(at[u]), col = at[u] - r * g.W;
        const float* vals = reinterpret_cast<const float*>(&v[u]);
#pragma unroll
        for (int j = 0; j < V; ++j) {
          // (rows and columns past the last window's are not staged: a stride may leave the last ones unread)
          if (r + g.pad_top < q.rows && col + g.pad_left < pitch) {
            smem[p * plane_floats + (r + g.pad_top) * pitch + col + g.pad_left] = vals[j];
          }
          if (++col == g.W) {  // (hw % V == 0: a group never leaves its plane)
            col = 0;
            ++r;
          }
        }
      }
    }
  };
  const bool vectors = hw % 4 == 0 && aligned_16(x);
  if (vectors) {
    stage(std::integral_constant<int, 4>{});
  } else {
    stage(std::integral_constant<int, 1>{});
  }
  cp_async_wait<0>();
  __syncthreads();

  const int multiplier = g.F / g.C;
  const int ohw = g.OH * g.OW;
  const int items_a_plane = static_cast<int>(q.items_a_plane.d);
  for_block_items(np * items_a_plane, Cfg::BLOCK, [&](int i) {
    const int p = q.items_a_plane.div(i), rem = i - p * items_a_plane;
    const int rg = q.out_w.div(rem), ox = rem - rg * g.OW;
    const int oy0 = rg * R;
    const int n = q.channels.div(p0 + p), c = p0 + p - n * g.C;
    float win[Cfg::WIN_ROWS][K];
    const float* src = smem + p * plane_floats + oy0 * S * pitch + ox * S;
#pragma unroll
    for (int r = 0; r < Cfg::WIN_ROWS; ++r) {
#pragma unroll
      for (int kx = 0; kx < K; ++kx) win[r][kx] = src[r * pitch + kx];
    }
    for (int m = 0; m < multiplier; ++m) {
      const int f = c * multiplier + m;
      const float* wf = wts + p * fpc + m * KK;
      float wreg[KK];
#pragma unroll
      for (int t = 0; t < KK; ++t) wreg[t] = wf[t];
      const float b = e.bias ? __ldg(e.bias + f) : 0.0f;
      float* out = y + static_cast<int64_t>(n) * e.out_image_stride(static_cast<int64_t>(g.F) * ohw) +
                   static_cast<int64_t>(f) * ohw + ox;
      const float* res = e.residual ? e.residual + (static_cast<int64_t>(n) * g.F + f) * ohw + ox : nullptr;
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const int oy = oy0 + r;
        if (oy >= g.OH) break;
        float acc = b;
#pragma unroll
        for (int ky = 0; ky < K; ++ky) {
#pragma unroll
          for (int kx = 0; kx < K; ++kx) acc = fmaf(wreg[ky * K + kx], win[r * S + ky][kx], acc);
        }
        if (res) acc += __ldg(res + oy * g.OW);
        out[oy * g.OW] = activate<Cfg::ACT>(acc, e);
      }
    }
  });
}

// The staged plane of the many-planes kernel: rows and columns the taps read, rows for whole row groups of R.
struct DwManyPlane {
  int rows = 0, pitch = 0, row_groups = 0;
};
inline DwManyPlane dw_many_plane(const ConvGeometry& g, int r) {
  DwManyPlane pl;
  pl.row_groups = (g.OH + r - 1) / r;
  pl.rows = (pl.row_groups * r - 1) * g.stride_h + g.KH;
  pl.pitch = (g.OW - 1) * g.stride_w + g.KW;
  return pl;
}
constexpr int kDwMany = -1;                    // DwEntry::cpb of the many-planes kernel
constexpr int kDwManyTargetItems = 512;        // items a block: two a thread
constexpr int64_t kDwManyMaxOutputs = 64 * 64;  // larger planes: the tiled kernel
constexpr int64_t kDwManyFirstPlanes = 2048;    // (image, channel) planes from which it is the first guess
constexpr int kDwManySmemBytes = 48 * 1024;    // no opt-in: several blocks an SM

// Planes a block for `g` with R output rows an item: enough for kDwManyTargetItems items, as the shared memory
// allows; 0 when one plane does not fit.
inline int dw_many_planes(const ConvGeometry& g, int r) {
  const DwManyPlane pl = dw_many_plane(g, r);
  const int64_t plane_bytes = 4 * (int64_t{pl.rows} * pl.pitch + int64_t{g.F / g.C} * g.KH * g.KW);
  const int64_t fit = kDwManySmemBytes / plane_bytes;
  if (fit < 1) return 0;
  const int64_t items = int64_t{pl.row_groups} * g.OW;
  const int64_t want = std::max<int64_t>(1, (kDwManyTargetItems + items - 1) / items);
  return static_cast<int>(std::min({fit, want, int64_t{g.N} * g.C}));
}

template <class Cfg>
void launch_depthwise_many(const float* x, float* y, const float* w, const ConvGeometry& g, const Epilogue& e,
                           InputPrologue in, cudaStream_t stream) {
  const DwManyPlane pl = dw_many_plane(g, Cfg::R);
  DwManyShape q;
  q.planes = dw_many_planes(g, Cfg::R);
  q.total_planes = g.N * g.C;
  q.channels = FastDiv(g.C);
  q.plane_hw = FastDiv(g.H * g.W);
  q.in_w = FastDiv(g.W);
  q.plane_floats = pl.rows * pl.pitch;
  q.pitch = pl.pitch;
  q.rows = pl.rows;
  q.items_a_plane = FastDiv(pl.row_groups * g.OW);
  q.out_w = FastDiv(g.OW);
  q.filter_floats = FastDiv(g.F / g.C * Cfg::K * Cfg::K);
  const size_t smem = 4 * static_cast<size_t>(q.planes) * (q.plane_floats + q.filter_floats.d);  // planes, filters
  const unsigned blocks = static_cast<unsigned>((q.total_planes + q.planes - 1) / q.planes);
  launch_overlapped(conv2d_depthwise_many_kernel<Cfg>, dim3(blocks), dim3(Cfg::BLOCK), smem, stream, 1, x, y, w, g, e,
                    in, q);
}

struct DwEntry {
  int k, s, tw, th, rows, cpb;  // cpb 0: the tiled kernel (any map); > 0: whole planes of at most tw x th, cpb
                                // channels of one image a block; kDwMany: whole planes of any images, as many as fit
  Act act;
  void (*launch)(const float*, float*, const float*, const ConvGeometry&, const Epilogue&, InputPrologue, cudaStream_t);
};

// Two tiles: 32 wide (maps up to 56: MobileNet-class) and 64 wide; both 32 rows, 128 threads. Whole planes
// (smallest first): 4x4 planes 32 channels a block (3x3 only: the last maps of a classifier), 8x8 planes 16
// channels, 16x16 planes 8 channels (128 threads each). Planes of any images (large batches): 4 output rows an
// item at stride 1 for 3x3 filters, 2 or 4 for 5x5; 1 or 2 at stride 2 (1 wins maps of 4 rows or fewer). Those
// that never won a zoo layer at batch 256 are not built (3x3 at stride 1 with 1 or 2 rows).
#define DW_ENTRY(K, S, TW, ROWS, ACT) \
  DwEntry{K, S, TW, 32, ROWS, 0, ACT, &launch_depthwise<DwCfg<K, S, TW, 32, ROWS, ACT>>}
#define DW_PLANES(K, S, T, ROWS, CPB, ACT) \
  DwEntry{K, S, T, T, ROWS, CPB, ACT, &launch_depthwise_planes<DwPlanesCfg<K, S, T, T, ROWS, CPB, ACT>>}
#define DW_ACTS(K, S, TW, ROWS) DW_ENTRY(K, S, TW, ROWS, Act::None), DW_ENTRY(K, S, TW, ROWS, Act::Relu), \
                                DW_ENTRY(K, S, TW, ROWS, Act::Param)
#define DW_PLANES_ACTS(K, S, T, ROWS, CPB) DW_PLANES(K, S, T, ROWS, CPB, Act::None), \
    DW_PLANES(K, S, T, ROWS, CPB, Act::Relu), DW_PLANES(K, S, T, ROWS, CPB, Act::Param)
#define DW_MANY(K, S, ROWS, ACT) DwEntry{K, S, 0, 0, ROWS, kDwMany, ACT, &launch_depthwise_many<DwManyCfg<K, S, ROWS, ACT>>}
#define DW_MANY_ACTS(K, S, ROWS) DW_MANY(K, S, ROWS, Act::None), DW_MANY(K, S, ROWS, Act::Relu), \
    DW_MANY(K, S, ROWS, Act::Param)
const DwEntry kDwEntries[] = {DW_ACTS(3, 1, 32, 2), DW_ACTS(3, 1, 64, 4), DW_ACTS(3, 2, 32, 2),
                              DW_ACTS(5, 1, 32, 2), DW_ACTS(5, 1, 64, 4), DW_ACTS(5, 2, 32, 2),
                              DW_PLANES_ACTS(3, 1, 4, 1, 32), DW_PLANES_ACTS(3, 2, 4, 1, 32),
                              DW_PLANES_ACTS(3, 1, 8, 2, 16), DW_PLANES_ACTS(3, 2, 8, 2, 16),
                              DW_PLANES_ACTS(3, 1, 16, 4, 8), DW_PLANES_ACTS(3, 2, 16, 4, 8),
                              DW_PLANES_ACTS(5, 1, 8, 2, 16), DW_PLANES_ACTS(5, 2, 8, 2, 16),
                              DW_PLANES_ACTS(5, 1, 16, 4, 8), DW_PLANES_ACTS(5, 2, 16, 4, 8),
                              DW_MANY_ACTS(3, 1, 4), DW_MANY_ACTS(3, 2, 1), DW_MANY_ACTS(3, 2, 2),
                              DW_MANY_ACTS(5, 1, 2), DW_MANY_ACTS(5, 1, 4), DW_MANY_ACTS(5, 2, 1),
                              DW_MANY_ACTS(5, 2, 2)};

}  // namespace

namespace {

std::string variant_name(const DwEntry& en) {
  const std::string tile = en.cpb == kDwMany ? "_cany"
                           : "_t" + std::to_string(en.tw) + "x" + std::to_string(en.th) +
                                 (en.cpb > 0 ? "_c" + std::to_string(en.cpb) : "");
  return "dw_k" + std::to_string(en.k) + "_s" + std::to_string(en.s) + tile + "_r" + std::to_string(en.rows) + "_" +
         (en.act == Act::None ? "none" : en.act == Act::Relu ? "relu" : "act");
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
    std::vector<ConvVariant> out, planes, many;
    for (const DwEntry& en : kDwEntries) {
      if (en.k != g.KH || en.s != g.stride_h || en.act != wanted) continue;
      if (en.cpb > 0 && (g.OW > en.tw || g.OH > en.th)) continue;
      const int planes_a_block = en.cpb == kDwMany ? dw_many_planes(g, en.rows) : 0;
      if (en.cpb == kDwMany && (int64_t{g.OH} * g.OW > kDwManyMaxOutputs || planes_a_block == 0)) continue;
      (en.cpb == kDwMany ? many : en.cpb > 0 ? planes : out)
          .push_back({variant_name(en), planes_a_block > 0 ? std::to_string(planes_a_block) + " planes a block" : "",
                      bind_launch(en.launch, layer, w.filters, layer.in)});
    }
    // Narrow maps first for narrow images; whole planes first where they fit (the smallest first); planes of
    // several images first where one image's channels would leave most SMs idle.
    if (g.OW <= 32 && out.size() > 1 && out[0].name.find("_t64") != std::string::npos) std::swap(out[0], out[1]);
    out.insert(out.begin(), planes.begin(), planes.end());
    const bool many_first = int64_t{g.N} * g.C >= kDwManyFirstPlanes;
    out.insert(many_first ? out.begin() : out.end(), many.begin(), many.end());
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
