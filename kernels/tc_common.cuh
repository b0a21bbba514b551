// Shared by the two 3xTF32 convolutions (conv2d_tc.cu: mma.sync; conv2d_wg.cu: Hopper wgmma): the TF32
// split of an FP32 value and the epilogue that stores accumulator fragments in the m16n8 layout.
//
// The m16n8 accumulator layout (mma.sync m16n8k8, and each warp's 16-row slice of a wgmma m64nN tile):
// lane = 4*gid + tig holds, for every 16 x 8 tile (mt, nt), the values
//   [2h + v] = (row gid + 8h, column 2*tig + v)   h, v in {0, 1}
// with rows = filters and columns = output pixels here.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/conv_common.cuh"

namespace cnnrt::kernels::tc {

inline int round_up(int v, int m) { return (v + m - 1) / m * m; }

// The 3xTF32 split of v: big + small == v exactly, each a TF32 operand. big: v with its low 13 mantissa bits
// cleared (truncated to TF32; Inf and NaN stay Inf and NaN). small = v - big, exact in FP32, below one TF32
// ulp of v. The tensor cores read a TF32 operand's top 19 bits, truncating: small's bits are handed over with half
// a TF32 ulp added (0x1000; a carry into the exponent is the right rounding), so that read rounds small to
// nearest, off by at most 2^-11 of itself, 2^-21 of v, and unbiased. Truncated, each activation would lose up to
// 2^-20 of itself toward zero, a bias deep networks add up (efficientnet_b0_small at batch 256: 3.4e-4 from the
// float64 answer truncated, 2.2e-4 rounded), for one integer add a value (wgh layers 1-3% slower). Rounding big as
// well (cvt.rna.tf32.f32: no instruction on sm_90 but four) costs 6-15% on wgh for no further gain.
__device__ __forceinline__ void split_tf32(float v, uint32_t& big, uint32_t& small) {
  big = __float_as_uint(v) & 0xffffe000u;
  small = __float_as_uint(v - __uint_as_float(big)) + 0x1000u;
}

// Host copy of cvt.rna.tf32.f32: round the low 13 mantissa bits away, to nearest, ties away from zero.
inline float round_tf32(float v) {
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;  // Inf and NaN stay as they are
  float r;
  std::memcpy(&r, &u, sizeof r);
  return r;
}

// Epilogue for one warp's MT x NT tiles of 16 filters x 8 pixels: filter f_first + mt*16 + gid + 8h, pixel
// p_first + nt*8 + 2*tig + v, pixels flattened over (n, oy, ox) of the output. + bias, + residual,
// activation, then stored to NCHW. Only filters below f_end (a grouped convolution's tile stops at its
// group's last filter) and the pixel tiles nt in [nt_begin, nt_end) are stored.
template <int MT, int NT, Act ACT>
__device__ __forceinline__ void store_mma_tile(const float (&acc)[MT][NT][4], int f_first, int p_first,
                                               const ConvGeometry& g, const Epilogue& e, int npix, int ohw,
                                               float* __restrict__ y, int f_end, int nt_begin = 0,
                                               int nt_end = NT) {
  const int lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3;
  f_end = f_end < g.F ? f_end : g.F;
  float bias[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int f = f_first + mt * 16 + gid + 8 * h;
      bias[mt][h] = e.bias && f < f_end ? __ldg(e.bias + f) : 0.0f;
    }
  }
  const float* res = e.residual;
  const int64_t image = e.out_image_stride(static_cast<int64_t>(g.F) * ohw);  // floats from one output image to the next
  // Pixel pairs (2*tig, 2*tig + 1) as float2 when they are in one image and 8-byte aligned: true for
  // every pair when OH*OW (and the image stride) is even (pairs start at even pixels) and the tensors are 8-byte
  // aligned.
  const bool pairs = (ohw % 2 == 0) && (image % 2 == 0) &&
                     ((reinterpret_cast<uintptr_t>(y) | reinterpret_cast<uintptr_t>(res)) % 8 == 0);
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int p = p_first + nt * 8 + 2 * tig;
    if (p >= npix || nt < nt_begin || nt >= nt_end) continue;
    if (pairs && p + 1 < npix) {
      const int n = p / ohw, rem = p - n * ohw;
      const int64_t base = static_cast<int64_t>(n) * image + rem;
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int f = f_first + mt * 16 + gid + 8 * h;
          if (f >= f_end) continue;
          const int64_t idx = base + static_cast<int64_t>(f) * ohw;
          float v0 = acc[mt][nt][2 * h] + bias[mt][h];
          float v1 = acc[mt][nt][2 * h + 1] + bias[mt][h];
          if (res) {
            const float2 r = __ldg(reinterpret_cast<const float2*>(res + idx));
            v0 += r.x;
            v1 += r.y;
          }
          *reinterpret_cast<float2*>(y + idx) = make_float2(activate<ACT>(v0, e), activate<ACT>(v1, e));
        }
      }
    } else {
#pragma unroll
      for (int v = 0; v < 2; ++v) {
        const int pv = p + v;
        if (pv >= npix) continue;
        const int n = pv / ohw, rem = pv - n * ohw;
        const int64_t base = static_cast<int64_t>(n) * image + rem;
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int f = f_first + mt * 16 + gid + 8 * h;
            if (f >= f_end) continue;
            const int64_t idx = base + static_cast<int64_t>(f) * ohw;
            float val = acc[mt][nt][2 * h + v] + bias[mt][h];
            if (res) val += __ldg(res + idx);
            y[idx] = activate<ACT>(val, e);
          }
        }
      }
    }
  }
}

// A K split's raw sums of one warp's MT x NT tiles (the layout of store_mma_tile) to partials[f][p] of an
// F x npix block: filters below f_end, pixels below npix.
template <int MT, int NT>
__device__ __forceinline__ void store_partials(const float (&acc)[MT][NT][4], int f_first, int p_first, int f_end,
                                               int npix, float* __restrict__ partials) {
  const int lane = threadIdx.x & 31, gid = lane >> 2, tig = lane & 3;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int f = f_first + mt * 16 + gid + 8 * h;
      if (f >= f_end) continue;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
        for (int v = 0; v < 2; ++v) {
          const int p = p_first + nt * 8 + 2 * tig + v;
          if (p < npix) partials[static_cast<int64_t>(f) * npix + p] = acc[mt][nt][2 * h + v];
        }
      }
    }
  }
}

}  // namespace cnnrt::kernels::tc
