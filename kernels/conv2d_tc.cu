// The 3xTF32 implicit-GEMM convolution (see conv2d_tc.cuh): kernel template, instantiations, choice.
//
// Shared memory per pipeline stage (BK = 32 rows of the K dimension):
//   A: [BK][BM + 4] float2 (big, small) filter halves, filters contiguous. The +4 float2 pitch makes the
//      64-bit fragment loads conflict-free (pitch = 4 mod 16 in float2 units).
//   B: [BK][BN + 8] floats, pixels contiguous, gathered from the input 4 bytes at a time (zero-filled by
//      cp.async outside the image and past K). Pitch = 8 mod 32: fragment loads are conflict-free.
// Each warp owns WM filters x WN pixels of the block tile: (WM/16) x (WN/8) mma tiles of m16n8k8.
//
// A grouped convolution is one GEMM per group (K = C/groups * KH * KW): a block's filter tile lies in one
// group, whose filters start a column block of the packed weights (padded per group) and whose input
// channels start at group * C/groups. Strides and dilations of each axis only move the gathered positions.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "kernels/conv2d_tc.cuh"
#include "kernels/conv_registry.hpp"
#include "kernels/conv_device.cuh"
#include "kernels/cp_async.cuh"
#include "kernels/launch.cuh"
#include "kernels/tc_common.cuh"

namespace cnnrt::kernels {

namespace tc {

constexpr int kBK = 32;       // K slice per pipeline stage; Kpad of the packed filters is a multiple
constexpr int kFAlign = 128;  // Fpad of the packed filters: a multiple of every BM
constexpr int kStages = 3;    // cp.async pipeline depth

// Per-launch constants derived on the host.
struct Params {
  int K;          // C/groups * KH * KW
  int taps;       // KH * KW
  unsigned div_taps, div_kw;  // magic multipliers for k / taps and t / KW (0: divisor 1)
  int npix;       // N * OH * OW
  int ohw;        // OH * OW
  int f_pad;      // columns of the packed weights: groups * fg_pad
  int fg;         // filters per group
  int fg_pad;     // fg rounded up to kFAlign
  int cg;         // input channels per group
  int ftiles;     // filter tiles per group
  int group_tiles;  // filter tiles per pixel tile: groups * ftiles
  int split_slices; // K slices of each split (blockIdx.y) when K is split, else every slice
  float* partials;  // [splits][F][npix] raw sums when K is split, else null
};

// q = n / d for n < 2^32 / d: q = umulhi(n, floor(2^32 / d) + 1). The rounding error n * (m - 2^32/d) / 2^32
// stays below 1/d, less than the distance from n/d to the next integer.
inline unsigned magic_for(int d) {
  return d == 1 ? 0u : static_cast<unsigned>((uint64_t(1) << 32) / static_cast<unsigned>(d) + 1);
}
__device__ __forceinline__ int fast_div(int n, unsigned magic) {
  return magic ? static_cast<int>(__umulhi(static_cast<unsigned>(n), magic)) : n;
}

// D = A * B + D, A 16x8 (row), B 8x8 (col), TF32 in, FP32 accumulate. Fragments (lane = 4*gid + tig):
//   a0 (gid, tig), a1 (gid+8, tig), a2 (gid, tig+4), a3 (gid+8, tig+4)   [row, col of A = filter, k]
//   b0 (tig, gid), b1 (tig+4, gid)                                         [row, col of B = k, pixel]
//   d0 (gid, 2tig), d1 (gid, 2tig+1), d2 (gid+8, 2tig), d3 (gid+8, 2tig+1)  [filter, pixel]
__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

template <int BM_, int BN_, int WM_, int WN_, Act ACT_>
struct Cfg {
  static constexpr int BM = BM_, BN = BN_, WM = WM_, WN = WN_, BK = kBK;
  static constexpr Act ACT = ACT_;
  static constexpr int WARPS_M = BM / WM, WARPS_N = BN / WN;
  static constexpr int THREADS = WARPS_M * WARPS_N * 32;
  static constexpr int MT = WM / 16, NT = WN / 8;       // mma tiles per warp
  static constexpr int APITCH = BM + 4;                 // float2 per A row
  static constexpr int BPITCH = BN + 8;                 // floats per B row
  static constexpr int A_FLOATS = BK * APITCH * 2;
  static constexpr int B_FLOATS = BK * BPITCH;
  static constexpr int STAGE_FLOATS = A_FLOATS + B_FLOATS;
  static constexpr int SMEM_BYTES = kStages * STAGE_FLOATS * static_cast<int>(sizeof(float));
  static constexpr int A_CHUNKS_PER_ROW = BM / 2;       // 16-byte chunks (2 float2) per A row
  static constexpr int A_PER_THREAD = BK * A_CHUNKS_PER_ROW / THREADS;
  static constexpr int B_ROWS = BK / (THREADS / 32);     // B rows filled by each warp
  static constexpr int B_PIX = BN / 32;                  // B columns (pixels) filled by each lane
  static_assert(BM % WM == 0 && BN % WN == 0 && WM % 16 == 0 && WN % 8 == 0, "warp tiling");
  static_assert(BK % (THREADS / 32) == 0 && BN % 32 == 0, "B loader: whole rows per warp, whole columns per lane");
  static_assert((BK * A_CHUNKS_PER_ROW) % THREADS == 0, "A loader: whole chunks per thread");
  static_assert(kFAlign % BM == 0, "packed filters cover every filter tile");
  static_assert(APITCH % 16 == 4 && BPITCH % 32 == 8, "conflict-free fragment loads");
  static_assert(STAGE_FLOATS % 4 == 0, "stages stay 16-byte aligned");
};

template <class C>
__global__ void __launch_bounds__(C::THREADS)
    conv2d_tc_kernel(const float* __restrict__ x, float* __restrict__ y, const float* __restrict__ wp,
                     const ConvGeometry g, const Epilogue e, const Params q) {
#if CNNRT_ARCH_BELOW(800)
  __trap();  // mma.sync with TF32 operands: compute capability 8.0 (the family Needs kMmaTf32)
#else
  wait_for_prior_grid();  // launched with PDL (launch.cuh): nothing global before this
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int gid = lane >> 2, tig = lane & 3;
  const int tile = static_cast<int>(blockIdx.x % static_cast<unsigned>(q.group_tiles));
  const int p0 = static_cast<int>(blockIdx.x / static_cast<unsigned>(q.group_tiles)) * C::BN;
  const int group = tile / q.ftiles;
  const int f0 = (tile - group * q.ftiles) * C::BM;  // first filter of the tile within its group
  // This block's K slices: all of them, or split blockIdx.y's share.
  const int slices = (q.K + kBK - 1) / kBK;
  const int kt_begin = static_cast<int>(blockIdx.y) * q.split_slices;
  const int nk = min(slices - kt_begin, q.split_slices);

  // B loader: warp `warp` fills rows warp*B_ROWS .. +B_ROWS-1 of each stage, lane `lane` the pixel
  // columns lane + 32*i. The (c, ky, kx) decode of a row is shared by the warp's pixels; each pixel's
  // window origin is computed once for the block. An invalid pixel gets an origin far outside the image.
  int iy0[C::B_PIX], ix0[C::B_PIX], xoff[C::B_PIX];  // xoff: offset of input (n, 0, iy0, ix0)
#pragma unroll
  for (int i = 0; i < C::B_PIX; ++i) {
    const int pix = p0 + lane + 32 * i;
    if (pix < q.npix) {
      const int n = pix / q.ohw, rem = pix - n * q.ohw;
      const int oy = rem / g.OW, ox = rem - oy * g.OW;
      iy0[i] = oy * g.stride_h - g.pad_top;
      ix0[i] = ox * g.stride_w - g.pad_left;
      xoff[i] = (n * g.C + group * q.cg) * g.H * g.W + iy0[i] * g.W + ix0[i];
    } else {
      iy0[i] = ix0[i] = -(1 << 30);
      xoff[i] = 0;
    }
  }
  const int hw = g.H * g.W;

  auto load_stage = [&](int buf, int kt) {
    float* as = smem + buf * C::STAGE_FLOATS;
    float* bs = as + C::A_FLOATS;
    const float* src = wp + (static_cast<int64_t>(kt) * kBK * q.f_pad + group * q.fg_pad + f0) * 2;
#pragma unroll
    for (int i = 0; i < C::A_PER_THREAD; ++i) {
      const int chunk = tid + i * C::THREADS;
      const int row = chunk / C::A_CHUNKS_PER_ROW, col = chunk % C::A_CHUNKS_PER_ROW;
      cp_async_16(as + row * C::APITCH * 2 + col * 4, src + static_cast<int64_t>(row) * q.f_pad * 2 + col * 4, true);
    }
#pragma unroll
    for (int j = 0; j < C::B_ROWS; ++j) {
      const int r = warp * C::B_ROWS + j;
      const int k = kt * kBK + r;
      const int c = fast_div(k, q.div_taps);
      const int t = k - c * q.taps;
      const int ky0 = fast_div(t, q.div_kw);
      const int ky = ky0 * g.dil_h, kx = (t - ky0 * g.KW) * g.dil_w;
      const bool k_ok = k < q.K;
      const int koff = c * hw + ky * g.W + kx;
#pragma unroll
      for (int i = 0; i < C::B_PIX; ++i) {
        const bool ok = k_ok && static_cast<unsigned>(iy0[i] + ky) < static_cast<unsigned>(g.H) &&
                        static_cast<unsigned>(ix0[i] + kx) < static_cast<unsigned>(g.W);
        cp_async_4(bs + r * C::BPITCH + lane + 32 * i, ok ? x + (xoff[i] + koff) : x, ok);
      }
    }
  };

  // The tensor cores' FP32 accumulation rounds toward zero (and aligns the addends to the largest), so
  // its error grows with the number of mma steps into one accumulator, in a constant direction while the
  // running sum keeps its sign: over 3*K/8 steps that reaches 3e-5 at K = 4608. Each stage therefore
  // accumulates into `part`, starting from zero, and is added to `acc` with a rounded FP32 add: the
  // truncation stays relative to one stage's partial sum (12 steps).
  float acc[C::MT][C::NT][4], part[C::MT][C::NT][4];
#pragma unroll
  for (int i = 0; i < C::MT; ++i) {
#pragma unroll
    for (int j = 0; j < C::NT; ++j) {
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.0f;
    }
  }
  const int wm0 = (warp % C::WARPS_M) * C::WM;  // warp's first filter in the block tile
  const int wn0 = (warp / C::WARPS_M) * C::WN;  // warp's first pixel in the block tile

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < nk) load_stage(s, kt_begin + s);
    cp_async_commit();  // always: keeps the group count uniform for wait_group
  }
#pragma unroll 1
  for (int kt = 0; kt < nk; ++kt) {
    cp_async_wait<kStages - 2>();  // stage kt has landed (this thread's copies) ...
    __syncthreads();               // ... and everyone's; everyone is done with stage kt - 1's buffer
    const int next = kt + kStages - 1;
    if (next < nk) load_stage(next % kStages, kt_begin + next);
    cp_async_commit();

#pragma unroll
    for (int i = 0; i < C::MT; ++i) {
#pragma unroll
      for (int j = 0; j < C::NT; ++j) {
#pragma unroll
        for (int r = 0; r < 4; ++r) part[i][j][r] = 0.0f;
      }
    }
    const float* as = smem + (kt % kStages) * C::STAGE_FLOATS;
    const float2* as2 = reinterpret_cast<const float2*>(as);
    const float* bs = as + C::A_FLOATS;
#pragma unroll
    for (int kk = 0; kk < kBK / 8; ++kk) {
      // A fragments (big and small halves), see mma_tf32 for the layout: A row = filter, A col = k.
      uint32_t a_big[C::MT][4], a_small[C::MT][4];
#pragma unroll
      for (int mt = 0; mt < C::MT; ++mt) {
        const float2* a = as2 + (kk * 8 + tig) * C::APITCH + wm0 + mt * 16 + gid;
        const float2 v0 = a[0];                    // (filter gid,     k tig)
        const float2 v1 = a[8];                    // (filter gid + 8, k tig)
        const float2 v2 = a[4 * C::APITCH];        // (filter gid,     k tig + 4)
        const float2 v3 = a[4 * C::APITCH + 8];    // (filter gid + 8, k tig + 4)
        a_big[mt][0] = __float_as_uint(v0.x);
        a_big[mt][1] = __float_as_uint(v1.x);
        a_big[mt][2] = __float_as_uint(v2.x);
        a_big[mt][3] = __float_as_uint(v3.x);
        a_small[mt][0] = __float_as_uint(v0.y);
        a_small[mt][1] = __float_as_uint(v1.y);
        a_small[mt][2] = __float_as_uint(v2.y);
        a_small[mt][3] = __float_as_uint(v3.y);
      }
      // B fragments, split here: B row = k, B col = pixel.
      uint32_t b_big[C::NT][2], b_small[C::NT][2];
#pragma unroll
      for (int nt = 0; nt < C::NT; ++nt) {
        const float* b = bs + (kk * 8 + tig) * C::BPITCH + wn0 + nt * 8 + gid;
        split_tf32(b[0], b_big[nt][0], b_small[nt][0]);                // (k tig,     pixel gid)
        split_tf32(b[4 * C::BPITCH], b_big[nt][1], b_small[nt][1]);    // (k tig + 4, pixel gid)
      }
#pragma unroll
      for (int mt = 0; mt < C::MT; ++mt) {
#pragma unroll
        for (int nt = 0; nt < C::NT; ++nt) {
          mma_tf32(part[mt][nt], a_small[mt], b_big[nt]);  // the correction terms first: smaller magnitudes
          mma_tf32(part[mt][nt], a_big[mt], b_small[nt]);
          mma_tf32(part[mt][nt], a_big[mt], b_big[nt]);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < C::MT; ++i) {
#pragma unroll
      for (int j = 0; j < C::NT; ++j) {
#pragma unroll
        for (int r = 0; r < 4; ++r) acc[i][j][r] += part[i][j][r];
      }
    }
  }
  cp_async_wait<0>();

  // Epilogue. Accumulator acc[mt][nt][2*h + v]: filter f0 + wm0 + mt*16 + gid + 8h, pixel
  // p0 + wn0 + nt*8 + 2*tig + v (the d fragment layout of mma_tf32).
  const int group_f0 = group * q.fg;
  if (q.partials != nullptr) {
    store_partials<C::MT, C::NT>(acc, group_f0 + f0 + wm0, p0 + wn0, group_f0 + q.fg, q.npix,
                                 q.partials + static_cast<int64_t>(blockIdx.y) * g.F * q.npix);
    return;
  }
  store_mma_tile<C::MT, C::NT, C::ACT>(acc, group_f0 + f0 + wm0, p0 + wn0, g, e, q.npix, q.ohw, y, group_f0 + q.fg);
#endif
}

// The splits' partial sums [splits][F][npix] added in split order, then bias, residual and the activation,
// stored to NCHW: one thread an output element.
__global__ void conv2d_tc_sum_splits_kernel(float* __restrict__ y, const ConvGeometry g, const Epilogue e,
                                            const float* __restrict__ partials, int splits, int npix, int ohw) {
  wait_for_prior_grid();  // launched with PDL (launch.cuh): nothing global before this
  const int64_t count = static_cast<int64_t>(g.F) * npix;
  const int64_t image = e.out_image_stride(static_cast<int64_t>(g.F) * ohw);  // floats from one output image to the next
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
    const int f = static_cast<int>(i / npix), p = static_cast<int>(i - int64_t(f) * npix);
    float v = e.bias ? __ldg(e.bias + f) : 0.0f;
    for (int s = 0; s < splits; ++s) v += partials[s * count + i];
    const int n = p / ohw, rem = p - n * ohw;
    const int64_t at = static_cast<int64_t>(n) * image + static_cast<int64_t>(f) * ohw + rem;
    if (e.residual) v += __ldg(e.residual + at);  // (dense: never with an image stride)
    y[at] = param_activate(v, e.param_act, e.alpha, e.beta);
  }
}

// The layer's K (C/groups * KH * KW) in slices of kBK.
inline int k_slices(const ConvGeometry& g) { return (g.C / g.groups * g.KH * g.KW + kBK - 1) / kBK; }

inline Params make_params(const ConvGeometry& g, int bm) {
  Params q;
  q.taps = g.KH * g.KW;
  q.cg = g.C / g.groups;
  q.fg = g.F / g.groups;
  q.K = q.cg * q.taps;
  q.div_taps = magic_for(q.taps);
  q.div_kw = magic_for(g.KW);
  q.ohw = g.OH * g.OW;
  q.npix = g.N * q.ohw;
  q.fg_pad = round_up(q.fg, kFAlign);
  q.f_pad = g.groups * q.fg_pad;
  q.ftiles = (q.fg + bm - 1) / bm;
  q.group_tiles = g.groups * q.ftiles;
  q.split_slices = k_slices(g);
  q.partials = nullptr;
  return q;
}

// K slices a split takes when K is split `splits` ways; the splits that leaves none empty.
inline int split_slices(const ConvGeometry& g, int splits) { return (k_slices(g) + splits - 1) / splits; }
inline int nonempty_splits(const ConvGeometry& g, int splits) {
  const int each = split_slices(g, splits);
  return (k_slices(g) + each - 1) / each;
}

// splits > 1: K split over that many blocks a tile (grid y), the partial sums in `partials`
// ([splits][F][N*OH*OW] floats), then summed with the epilogue by a second launch.
template <class C>
void launch(const float* x, float* y, const float* w, const ConvGeometry& g, const Epilogue& e, int splits,
            float* partials, cudaStream_t stream) {
  allow_dynamic_smem<conv2d_tc_kernel<C>>(C::SMEM_BYTES);
  Params q = make_params(g, C::BM);
  const int64_t blocks = static_cast<int64_t>((q.npix + C::BN - 1) / C::BN) * q.group_tiles;
  if (splits > 1) {
    q.split_slices = split_slices(g, splits);
    q.partials = partials;
  }
  launch_overlapped(conv2d_tc_kernel<C>, dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(splits)),
                    dim3(C::THREADS), C::SMEM_BYTES, stream, 1, x, y, w, g, e, q);
  if (splits > 1) {
    launch_overlapped(conv2d_tc_sum_splits_kernel, dim3(blocks_for(int64_t(g.F) * q.npix, 256)), dim3(256), 0, stream, 1,
                      y, g, e, static_cast<const float*>(partials), splits, q.npix, q.ohw);
  }
}

// The instantiated configurations (BM filters x BN pixels, warp tile WM x WN):
//   L 128 x 128, 8 warps of 64 x 32: large layers (batch 32); 1 block per SM (150 KB of shared memory)
//   S  64 x  64, 4 warps of 32 x 32: few filters or few pixels; 2 blocks per SM (78 KB each)
//   G  32 x  64, 4 warps of 16 x 32: groups of few filters; 4 blocks per SM (55 KB each)
struct Entry {
  int bm, bn, blocks_per_sm;
  double efficiency;  // relative throughput of a full SM, for the heuristic order
  int smem_bytes;     // dynamic shared memory a block
  Act act;
  bool splits_k;      // also offered with K split over blocks (layers of few output tiles and a long K)
  void (*launch)(const float*, float*, const float*, const ConvGeometry&, const Epilogue&, int, float*, cudaStream_t);
};

#define TC_ENTRY(BM, BN, WM, WN, PER_SM, EFF, ACT) \
  Entry { BM, BN, PER_SM, EFF, Cfg<BM, BN, WM, WN, ACT>::SMEM_BYTES, ACT, BM == 32, &launch<Cfg<BM, BN, WM, WN, ACT>> }

const Entry kEntries[] = {
    TC_ENTRY(128, 128, 64, 32, 1, 1.0, Act::Relu), TC_ENTRY(128, 128, 64, 32, 1, 1.0, Act::Param),
    TC_ENTRY(64, 64, 32, 32, 2, 0.75, Act::Relu),  TC_ENTRY(64, 64, 32, 32, 2, 0.75, Act::Param),
    TC_ENTRY(32, 64, 16, 32, 4, 0.5, Act::Relu),   TC_ENTRY(32, 64, 16, 32, 4, 0.5, Act::Param),
};

#undef TC_ENTRY

}  // namespace tc

std::vector<float> pack_tc_filters(const float* weights, int F, int C, int KH, int KW, int groups) {
  const int K = C / groups * KH * KW, fg = F / groups;
  const int k_pad = tc::round_up(K, tc::kBK), fg_pad = tc::round_up(fg, tc::kFAlign), f_pad = groups * fg_pad;
  std::vector<float> packed(static_cast<size_t>(k_pad) * f_pad * 2, 0.0f);
  for (int f = 0; f < F; ++f) {
    const int column = f / fg * fg_pad + f % fg;
    for (int k = 0; k < K; ++k) {
      const float v = weights[static_cast<size_t>(f) * K + k];  // [F][C/groups][KH][KW]: k = (c*KH + ky)*KW + kx
      const float big = tc::round_tf32(v);
      const size_t at = (static_cast<size_t>(k) * f_pad + column) * 2;
      packed[at] = big;
      packed[at + 1] = tc::round_tf32(v - big);
    }
  }
  return packed;
}

namespace {

PackedWeights pack_tc(const ConvLayer& layer, const float* filters, const float*) {
  return {"tc_split", pack_tc_filters(filters, layer.g.F, layer.g.C, layer.g.KH, layer.g.KW, layer.g.groups), nullptr};
}

std::string variant_name(const tc::Entry& en, const std::string& splits = "") {
  return "tc_f" + std::to_string(en.bm) + "_px" + std::to_string(en.bn) + "_" + (en.act == Act::Relu ? "relu" : "act") +
         (splits.empty() ? "" : "_ks" + splits);
}

// The K split that gives a layer of few output tiles about two blocks an SM, each split at least 2 slices
// deep; 1 when the tiles alone fill the SMs.
int tc_splits(const ConvGeometry& g, const tc::Entry& en, int sm_count) {
  const int64_t npix = int64_t(g.N) * g.OH * g.OW;
  const int64_t tiles = (npix + en.bn - 1) / en.bn * ((g.F / g.groups + en.bm - 1) / en.bm) * g.groups;
  const int slices = tc::k_slices(g);
  const int64_t wanted = (2 * int64_t(std::max(1, sm_count)) + tiles - 1) / tiles;
  const int splits = static_cast<int>(std::min<int64_t>({wanted, slices / 2, 16}));
  return splits < 2 ? 1 : tc::nonempty_splits(g, splits);
}

class TcFamily final : public ConvFamily {
 public:
  TcFamily()
      : ConvFamily("tc",
                   "implicit GEMM on the tensor cores (mma.sync) at FP32 accuracy by the 3xTF32 split: filters x "
                   "pixels a block, the input gathered into shared memory by cp.async, three stages",
                   {kMmaTf32}, pack_tc) {}

  bool writes_image_stride() const override { return true; }
  std::string reject(const ConvLayer& layer, const DeviceCaps&) const override {
    const ConvGeometry& g = layer.g;
    if (layer.pooled()) return "fused pooling";
    const int64_t taps = int64_t(g.KH) * g.KW, K = int64_t(g.C / g.groups) * taps;
    // Index arithmetic: k / taps by multiply-high needs K * taps < 2^32; input offsets and pixel
    // indices are int32; the filter tiles times the pixel tiles form a 1-D grid.
    if (K * taps >= (int64_t(1) << 32) || K > (int64_t(1) << 24)) return "C*KH*KW too large";
    if (int64_t(g.N) * g.C * g.H * g.W >= (int64_t(1) << 31)) return "input too large for 32-bit offsets";
    if (int64_t(g.dil_h) * (g.KH - 1) * g.W + int64_t(g.dil_w) * (g.KW - 1) >= (int64_t(1) << 30)) {
      return "dilated window too large for 32-bit offsets";
    }
    const int64_t npix = int64_t(g.N) * g.OH * g.OW;
    if (npix >= (int64_t(1) << 30) || g.F > (1 << 24)) return "output too large for 32-bit indices";
    return "";
  }


  std::vector<ConvVariant> variants(const ConvLayer& layer, const DeviceCaps& dev, const LayerWeights& w) const override {
    const ConvGeometry& g = layer.g;
    const bool relu = layer.e.param_act == ParamAct::Relu;
    const int64_t npix = int64_t(g.N) * g.OH * g.OW;
    std::vector<std::pair<ConvVariant, double>> scored;  // score: estimated relative time, lower is better
    for (const tc::Entry& en : tc::kEntries) {
      if (en.act == Act::Relu && !relu) continue;
      if (en.smem_bytes > dev.smem_optin) continue;
      const int fg = g.F / g.groups;
      const double blocks = double((npix + en.bn - 1) / en.bn) * double((fg + en.bm - 1) / en.bm) * g.groups;
      const double slots = double(std::max(1, dev.sm_count)) * en.blocks_per_sm;
      const double waves = std::ceil(blocks / slots);
      // A wave keeps every SM busy with blocks_per_sm tiles of bm x bn.
      const double score = waves * en.bm * en.bn * en.blocks_per_sm / en.efficiency *
                           (en.act == Act::Param && relu ? 1.02 : 1.0);
      scored.push_back({{variant_name(en), "", split_launch(en, layer, w.packed, 1)}, score});
      const int splits = en.splits_k ? tc_splits(g, en, dev.sm_count) : 1;
      if (splits > 1) {
        ConvVariant split{variant_name(en, std::to_string(splits)), "", split_launch(en, layer, w.packed, splits),
                          int64_t(splits) * g.F * npix};
        scored.push_back({std::move(split), score * 1.1 / splits});
      }
    }
    return rank_by_score(std::move(scored));
  }

  std::vector<std::string> variant_names() const override {
    std::vector<std::string> out;
    for (const tc::Entry& en : tc::kEntries) {
      out.push_back(variant_name(en));
      if (en.splits_k) out.push_back(variant_name(en, "*"));
    }
    return out;
  }

 private:
  static ConvLaunch split_launch(const tc::Entry& en, const ConvLayer& layer, const float* packed, int splits) {
    return [fn = en.launch, layer, packed, splits](const ConvArgs& a, cudaStream_t stream) {
      Epilogue e = layer.e;
      e.residual = a.residual;
      fn(a.x, a.y, packed, layer.g, e, splits, a.workspace, stream);
    };
  }
};

}  // namespace

const ConvFamily& conv2d_tc_family() {
  static const TcFamily family;
  return family;
}

}  // namespace cnnrt::kernels
