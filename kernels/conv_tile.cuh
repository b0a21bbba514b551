// Device helpers shared by the single-plane convolution kernels (conv2d_c1, conv2d_depthwise): staging an
// input tile with its halo in shared memory, and loading register-window rows as float4s.
#pragma once

#include "kernels/conv_device.cuh"
#include "kernels/cp_async.cuh"

namespace cnnrt::kernels {

// f(i) for every i in [0, n), one per thread per pass over `block_threads` threads; every thread runs the same
// number of passes (the bound is checked inside), so warps leave the loop converged.
template <class F>
__device__ __forceinline__ void for_block_items(int n, int block_threads, F&& f) {
  for (int base = 0; base < n; base += block_threads) {
    const int i = base + static_cast<int>(threadIdx.x);
    if (i < n) f(i);
  }
}

// Copies rows [iy0, iy0 + rows) x columns [ix0, ix0 + pitch) of one H x W plane into `tile` (row pitch
// `pitch`), writing zeros outside the plane: the convolution's padding. Lanes along the row: coalesced
// reads. Every copy is a cp.async, so the whole tile is in flight at once (one memory latency per tile,
// not one per loop iteration); this waits for this thread's copies, and the caller's __syncthreads()
// publishes them.
__device__ __forceinline__ void stage_plane_tile(float* tile, int pitch, int rows, const float* plane, int H, int W,
                                                 int iy0, int ix0, int block_threads) {
  for_block_items(rows * pitch, block_threads, [&](int i) {
    const int r = i / pitch, c = i % pitch;
    const int iy = iy0 + r, ix = ix0 + c;
    const bool inside = iy >= 0 && iy < H && ix >= 0 && ix < W;
    cp_async_4(tile + i, inside ? plane + static_cast<int64_t>(iy) * W + ix : plane, inside);
  });
  cp_async_commit();
  cp_async_wait<0>();
}

// One window row of N floats (N a multiple of 4) from 16-byte aligned shared memory.
template <int N>
__device__ __forceinline__ void load_window_row(float (&dst)[N], const float* src) {
  const float4* src4 = reinterpret_cast<const float4*>(src);
#pragma unroll
  for (int q = 0; q < N / 4; ++q) {
    const float4 v = src4[q];
    dst[4 * q + 0] = v.x;
    dst[4 * q + 1] = v.y;
    dst[4 * q + 2] = v.z;
    dst[4 * q + 3] = v.w;
  }
}

// A thread's register window over a staged input tile: the K rows of WIN input columns under its 4 adjacent
// outputs (stride S), from column `col0` of the tile (row pitch `pitch`). prime_window loads the K - S rows the
// first output row `row` shares with the row above it; slide_window then moves the window to output row
// `row`: it keeps the K - S rows shared with the row before and loads the new ones (vertical reuse in
// registers).
template <int K, int S, int WIN>
__device__ __forceinline__ void prime_window(float (&win)[K][WIN], const float* tile, int pitch, int row, int col0) {
#pragma unroll
  for (int k = 0; k < K - S; ++k) load_window_row(win[k + S], tile + (row * S + k) * pitch + col0);
}

template <int K, int S, int WIN>
__device__ __forceinline__ void slide_window(float (&win)[K][WIN], const float* tile, int pitch, int row, int col0) {
#pragma unroll
  for (int k = 0; k < K - S; ++k) {
#pragma unroll
    for (int q = 0; q < WIN; ++q) win[k][q] = win[k + S][q];
  }
#pragma unroll
  for (int k = (K > S ? K - S : 0); k < K; ++k) load_window_row(win[k], tile + (row * S + k) * pitch + col0);
}

// acc[j] += w(t) * (the window's input under output j at tap t = ky * K + kx), over the K x K taps: the
// thread's 4 outputs. `w(t)` gives tap t's weight (a register, a shared-memory broadcast, a constant-bank
// operand); every index is a compile-time constant once unrolled.
template <int K, int S, int WIN, class Weight>
__device__ __forceinline__ void accumulate_window(float (&acc)[4], const float (&win)[K][WIN], Weight&& w) {
#pragma unroll
  for (int ky = 0; ky < K; ++ky) {
#pragma unroll
    for (int kx = 0; kx < K; ++kx) {
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[j] = fmaf(w(ky * K + kx), win[ky][j * S + kx], acc[j]);
    }
  }
}

// Residual, activation and store of 4 adjacent outputs of row `oy` starting at column `ox` of the plane
// `out` (row length OW): one float4 store when aligned and inside, else bounds-checked scalars.
template <Act ACT>
__device__ __forceinline__ void store_four(float (&acc)[4], float* out, const float* residual, int oy, int ox, int OH,
                                          int OW, const Epilogue& e) {
  if (oy < 0 || oy >= OH) return;
  const int64_t row = static_cast<int64_t>(oy) * OW;
  if (residual) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (ox + j >= 0 && ox + j < OW) acc[j] += __ldg(residual + row + ox + j);
    }
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) acc[j] = activate<ACT>(acc[j], e);
  // One float4 where the four are inside and 16-byte aligned (a caller's output buffer may start anywhere a
  // float can: an offset into its own allocation).
  if (OW % 4 == 0 && ox >= 0 && ox + 3 < OW && aligned_16(out + row + ox)) {
    *reinterpret_cast<float4*>(out + row + ox) = make_float4(acc[0], acc[1], acc[2], acc[3]);
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (ox + j >= 0 && ox + j < OW) out[row + ox + j] = acc[j];
    }
  }
}

}  // namespace cnnrt::kernels
