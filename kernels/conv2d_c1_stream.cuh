// The single-filter streaming kernel, registry entry "c1stream" (included by conv2d_c1_stream.cu only).
//
// Why a kernel of its own: with one filter the tiled c1 kernel does 9 or 25 FMAs per output against 8 bytes
// moved, so the layer should run at its memory floor, yet the k3 and k5 layers of 1024x1024 and larger ran
// at 45-69% of it. Each of its blocks stages its tile, waits, computes and stores:
// within a block nothing overlaps, and a 1024x1024 image is one wave of blocks doing that in step.
//
// Here a warp owns a strip of 128 output columns (4 per lane) and a run of `rows_per_warp` output rows, and
// streams the input rows through registers, no shared memory and no barrier:
//   - each lane loads its own float4 of every input row (a warp reads 512 contiguous bytes per row), D rows
//     ahead of the row it computes, so D rows per warp are always in flight;
//   - the K - 1 halo columns come from the neighbouring lanes by shuffles; the strip's outer halo (at most
//     2 floats a side) is one float2 load more per row, used by lane 0 and lane 31;
//   - the last K input rows stay in registers (a window of K slots, the oldest replaced by each new row);
//     once a row arrives, the output row whose window it completes is computed (K*K*4 FMAs, no test per
//     tap) and stored as one float4 with bias, residual and activation. (The first version added each input
//     row into a ring of K accumulator rows: a test per filter row and a run of K - 1 extra steps per chunk,
//     3.8 instructions per FFMA);
//   - the filter (K*K weights and the bias) is loaded into registers before waiting for the prior grid.
// The loop is unrolled by U (a multiple of K, and the load ring's slot count: D = U - 1 rows in flight) so that
// window and load slots are registers, not indexed memory.
// Limits (c1_stream_eligible): one input channel and one filter, square K of 1, 3 or 5, stride 1, dilation 1,
// left padding (K - 1) / 2 (other pads free), W a multiple of 4, no pooling; None or Relu. An input that is
// not 16-byte aligned goes to the tiled kernel instead.
#pragma once

#include "kernels/conv2d_c1_impl.cuh"
#include "kernels/fast_div.cuh"

namespace cnnrt::kernels::c1 {

constexpr int kStreamWarps = 4;          // warps per block (independent of each other)
constexpr int kStreamStrip = 4 * 32;     // output columns per warp

template <int K>
struct StreamShape {
  static constexpr int P = (K - 1) / 2;                  // halo columns on the left (the left padding)
  static constexpr int R = K - 1 - P;                    // halo columns on the right (P <= R <= 2)
  static constexpr int U = K == 1 ? 4 : K == 3 ? 6 : 5;  // unroll: a multiple of K; also the load ring's slots
  static constexpr int D = U - 1;                        // input rows in flight per warp
  static_assert(U % K == 0, "window slots must be compile-time registers");
  static_assert(R <= 2, "the strip's outer halo is one float2 a side");
};

// One input row as a lane holds it: its own 4 columns, and a float2 of the strip's outer halo (lane 0: the 2
// columns left of the strip, lane 31: the 2 right of it; the other lanes load one they do not use).
struct StreamRow {
  float4 v;
  float2 halo;
};

// Warp w of the grid: strip w % strips, chunk (w / strips) % chunks, image w / (strips * chunks).
struct StreamGrid {
  FastDiv strips, chunks;
};

template <int K, Act ACT>
__global__ void __launch_bounds__(kStreamWarps * 32, 4)
    conv2d_c1_stream_kernel(const float* __restrict__ x, float* __restrict__ y, const ConvGeometry g, const Epilogue e,
                            const float* __restrict__ w_packed, int rows_per_warp, StreamGrid grid) {
  using S = StreamShape<K>;
  constexpr int P = S::P, R = S::R, D = S::D, U = S::U;
  // The filter: constants (no kernel writes them), so read before the prior grid's wait.
  float w[K][K];
#pragma unroll
  for (int ky = 0; ky < K; ++ky) {
#pragma unroll
    for (int kx = 0; kx < K; ++kx) w[ky][kx] = __ldg(w_packed + ky * K + kx);  // pack_c1_smem_filters
  }
  const float bias = __ldg(w_packed + K * K);
  wait_for_prior_grid();

  const int lane = threadIdx.x & 31;
  const int warp_id = blockIdx.x * kStreamWarps + static_cast<int>(threadIdx.x >> 5);
  const int strip_row = grid.strips.div(warp_id);  // chunk + chunks * n
  const int n = grid.chunks.div(strip_row);
  if (n >= g.N) return;  // whole warps: no shuffle loses a partner
  const int c0 = (warp_id - strip_row * static_cast<int>(grid.strips.d)) * kStreamStrip;  // the strip's first column
  const int oy0 = (strip_row - n * static_cast<int>(grid.chunks.d)) * rows_per_warp;
  const int col = c0 + 4 * lane;        // this lane's first output column, and its input float4's column
  const int rows = min(rows_per_warp, g.OH - oy0);
  const int steps = rows + K - 1;       // padded input rows oy0 .. oy0 + steps - 1
  const int iy0 = oy0 - g.pad_top;      // the input row of step 0
  const float* xn = x + static_cast<int64_t>(n) * g.H * g.W;
  float* yn = y + static_cast<int64_t>(n) * g.OH * g.OW;
  const float* rn = e.residual ? e.residual + static_cast<int64_t>(n) * g.OH * g.OW : nullptr;
  const bool own_inside = col < g.W;  // W % 4 == 0: the float4 is wholly inside or wholly outside
  // The halo float2 (8-byte aligned: c0 and W are multiples of 4) exists only inside the image: at its left
  // and right borders the halo is padding.
  const bool halo_inside = lane == 0 ? c0 > 0 : c0 + kStreamStrip < g.W;
  // Each lane's two columns in row 0 of the plane, clamped into it; row iy is iy * W floats further (one
  // IMAD.WIDE per load).
  const char* x_own = reinterpret_cast<const char*>(xn + min(col, g.W - 4));
  const char* x_halo = reinterpret_cast<const char*>(
      xn + (lane == 0 ? max(c0 - 2, 0) : lane == 31 ? min(c0 + kStreamStrip, g.W - 2) : min(col, g.W - 4)));
  const int row_bytes = g.W * static_cast<int>(sizeof(float));

  // A ring of U input rows in registers, slot t % U holding row t, loaded D = U - 1 steps ahead into the slot
  // the previous step consumed. Loads are unconditional (clamped rows) and masked when used: a load whose
  // result is selected right away (a conditional load) makes the select wait for it, and each step then
  // waited for its own row (0.3-0.9 us per row, measured).
  StreamRow ring[U];
  auto load_row = [&](int t, StreamRow& r) {
    const int64_t iy = min(max(iy0 + min(t, steps - 1), 0), g.H - 1);  // past the last row: the last row again
    r.v = __ldg(reinterpret_cast<const float4*>(x_own + iy * row_bytes));
    if constexpr (K > 1) r.halo = __ldg(reinterpret_cast<const float2*>(x_halo + iy * row_bytes));
  };
#pragma unroll
  for (int d = 0; d < D; ++d) load_row(d, ring[d]);

  // The window: the last K input rows as this lane uses them (columns col - P .. col + 3 + R), slot t % K
  // holding input row t. U is a multiple of K, so every slot is a compile-time register.
  float win[K][4 + K - 1];
  // Whole float4 stores straight to the row, with no check per row: every row of this lane is inside the
  // image (rows <= OH - oy0), starts 16-byte aligned when OW is a multiple of 4, and has no residual to add.
  const bool fast_store = g.OW % 4 == 0 && col + 3 < g.OW && rn == nullptr && aligned_16(yn);
  float* y_row = yn + static_cast<int64_t>(oy0) * g.OW + col;  // output row oy0 + (t - (K - 1)) at step t

  for (int t0 = 0; t0 < steps; t0 += U) {
#pragma unroll
    for (int s = 0; s < U; ++s) {
      const int t = t0 + s;  // t % U == s: U is a multiple of K, so t % K == s % K too
      if (t >= steps) break;
      load_row(t + D, ring[(s + D) % U]);  // the slot of row t - 1, consumed at the previous step
      const StreamRow& cur = ring[s];
      const bool inside = iy0 + t >= 0 && iy0 + t < g.H;
      const bool own_ok = inside && own_inside;
      const float own[4] = {own_ok ? cur.v.x : 0.0f, own_ok ? cur.v.y : 0.0f, own_ok ? cur.v.z : 0.0f,
                            own_ok ? cur.v.w : 0.0f};
      float(&row)[4 + K - 1] = win[s % K];  // input columns col - P .. col + 3 + R of row t
      if constexpr (K > 1) {
        const bool halo_ok = inside && halo_inside;
        const float halo[2] = {halo_ok ? cur.halo.x : 0.0f, halo_ok ? cur.halo.y : 0.0f};
#pragma unroll
        for (int i = 0; i < P; ++i) {
          const float from_left = __shfl_up_sync(0xffffffffu, own[4 - P + i], 1);
          row[i] = lane == 0 ? halo[2 - P + i] : from_left;
        }
#pragma unroll
        for (int i = 0; i < R; ++i) {
          const float from_right = __shfl_down_sync(0xffffffffu, own[i], 1);
          row[P + 4 + i] = lane == 31 ? halo[i] : from_right;
        }
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) row[P + i] = own[i];
      // With rows t - (K - 1) .. t in the window, output row t - (K - 1) is complete: K*K*4 FMAs.
      if (t < K - 1) continue;
      float out[4] = {bias, bias, bias, bias};
#pragma unroll
      for (int ky = 0; ky < K; ++ky) {
        const float(&in)[4 + K - 1] = win[(s + 1 + ky) % K];  // slot of input row t - (K - 1) + ky
#pragma unroll
        for (int kx = 0; kx < K; ++kx) {
#pragma unroll
          for (int j = 0; j < 4; ++j) out[j] = fmaf(w[ky][kx], in[j + kx], out[j]);
        }
      }
      if (fast_store) {
        *reinterpret_cast<float4*>(y_row) = make_float4(activate<ACT>(out[0], e), activate<ACT>(out[1], e),
                                                        activate<ACT>(out[2], e), activate<ACT>(out[3], e));
      } else {
        store_four<ACT>(out, yn, rn, oy0 + t - (K - 1), col, g.OH, g.OW, e);
      }
      y_row += g.OW;
    }
  }
}

template <int K, Act ACT, int ROWS_PER_WARP>
void launch_c1_stream(const float* x, float* y, const ConvGeometry& g, const Epilogue& e, const C1Filters& filters,
                      const float* w_packed, cudaStream_t stream) {
  if (!aligned_16(x)) {
    // A caller's input at an offset that is not a multiple of 4 floats: no float4 loads. The tiled kernel with
    // the same packed filters stages its input 4 bytes at a time. (Outputs: store_four checks each float4.)
    launch_c1<C1Cfg<K, 1, 128, 32, 8, 8, ACT, false, true>>(x, y, g, e, filters, w_packed, stream);
    return;
  }
  const int strips = (g.OW + kStreamStrip - 1) / kStreamStrip;
  const int chunks = (g.OH + ROWS_PER_WARP - 1) / ROWS_PER_WARP;
  const int64_t warps = int64_t(g.N) * strips * chunks;
  const unsigned blocks = static_cast<unsigned>((warps + kStreamWarps - 1) / kStreamWarps);
  launch_overlapped(conv2d_c1_stream_kernel<K, ACT>, dim3(blocks), dim3(kStreamWarps * 32), 0, stream, 1, x, y, g, e,
                    w_packed, ROWS_PER_WARP, StreamGrid{FastDiv(strips), FastDiv(chunks)});
}

// Whether the streaming kernel runs a layer the c1 family runs (c1_reject: one input channel, one
// group, dilation 1, equal strides): the limits above that the family does not already impose, and 32-bit
// index arithmetic (warp numbers, a row's bytes).
inline bool c1_stream_eligible(const ConvGeometry& g, const Epilogue& e) {
  return g.F == 1 && g.KH == g.KW && (g.KH == 1 || g.KH == 3 || g.KH == 5) && g.stride_h == 1 &&
         g.pad_left == (g.KW - 1) / 2 && g.W % 4 == 0 && e.pool.kind == FusedPool::None &&
         (e.param_act == ParamAct::None || e.param_act == ParamAct::Relu) &&
         static_cast<int64_t>(g.N) * g.OH * g.W < (int64_t{1} << 31) && g.W < (1 << 29);
}

}  // namespace cnnrt::kernels::c1
