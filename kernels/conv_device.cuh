// Device-side helpers of the fused convolution epilogue (see conv_common.cuh). Included by .cu files only.
#pragma once

#ifndef __CUDACC_RTC__
#include <mutex>
#include <utility>
#elif !defined(INFINITY)
#define INFINITY __int_as_float(0x7f800000)  // (NVRTC has no <cmath>)
#endif

#include "kernels/conv_common.cuh"

namespace cnnrt::kernels {

#ifndef __CUDACC_RTC__  // (NVRTC: conv_chain_device.cuh)

// Runs a setup once per CUDA device, on the calling thread's current one. A kernel's attributes belong to the
// kernel on one device: a process that runs on GPUs 0 and 1 must set them on each.
class OncePerDevice {
 public:
  template <class Setup>
  void call(Setup&& setup) {
    int device = 0;
    cudaGetDevice(&device);
    if (device < 0 || device >= kMaxDevices) {
      setup();  // (beyond the table: every time, which is correct, only slower)
      return;
    }
    std::call_once(done_[device], std::forward<Setup>(setup));
  }

 private:
  static constexpr int kMaxDevices = 64;
  std::once_flag done_[kMaxDevices];
};

// Lets `Kernel` use `bytes` of dynamic shared memory (above the 48 KB default); done once per kernel and device.
template <auto Kernel>
void allow_dynamic_smem(int bytes) {
  static OncePerDevice once;
  once.call([bytes] { cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes); });
}

// Lets `Kernel` run in clusters of more than 8 blocks (H100: up to 16); done once per kernel and device. A
// refused opt-in makes the launch fail, and the runtime's launch check names the step.
template <auto Kernel>
void allow_large_clusters() {
  static OncePerDevice once;
  once.call([] { cudaFuncSetAttribute(Kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1); });
}
#endif  // __CUDACC_RTC__

// The activation a runtime value selects (warp-uniform in every caller: each thread takes the same branch).
__device__ __forceinline__ float param_activate(float v, ParamAct act, float alpha, float beta) {
  switch (act) {
    case ParamAct::Relu: return fmaxf(v, 0.0f);
    case ParamAct::LeakyRelu: return v < 0.0f ? v * alpha : v;
    case ParamAct::Clip: return fminf(fmaxf(v, alpha), beta);
    case ParamAct::Sigmoid: return 1.0f / (1.0f + __expf(-v));
    case ParamAct::Tanh: return tanhf(v);
    case ParamAct::HardSigmoid: return fmaxf(0.0f, fminf(1.0f, alpha * v + beta));
    case ParamAct::HardSwish: return v * fmaxf(0.0f, fminf(1.0f, v * (1.0f / 6.0f) + 0.5f));
    case ParamAct::Swish: return v / (1.0f + __expf(-alpha * v));
    case ParamAct::Gelu: return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    default: return v;
  }
}

// One rank-1 update of a 4 x 4 register tile: acc[i][j] += w[i] * x[j].
__device__ __forceinline__ void fma_4x4(float (&acc)[4][4], float4 w, float4 x) {
  const float wv[4] = {w.x, w.y, w.z, w.w}, xv[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(wv[i], xv[j], acc[i][j]);
  }
}

template <Act ACT>
__device__ __forceinline__ float activate(float v, const Epilogue& e) {
  if constexpr (ACT == Act::Relu) {
    return fmaxf(v, 0.0f);
  } else if constexpr (ACT == Act::Param) {
    return param_activate(v, e.param_act, e.alpha, e.beta);
  } else {
    return v;
  }
}

// The pooled value of window (py, px) from the maximum, the sum and the count of its positions inside the
// [OH, OW] map (however they were gathered).
__device__ __forceinline__ float pool_finish(const PoolGeometry& p, int py, int px, int OH, int OW, float best, float sum,
                                             int count) {
  if (p.kind == FusedPool::Max) return best;
  if (p.count_include_pad) {
    // ONNX counts padded positions, but not window positions beyond the padded extent (ceil_mode).
    const int y0 = py * p.sh - p.pad_top;
    const int x0 = px * p.sw - p.pad_left;
    const int hy = min(y0 + (p.kh - 1) * p.dil_h + 1, OH + p.pad_bottom) - y0;
    const int wx = min(x0 + (p.kw - 1) * p.dil_w + 1, OW + p.pad_right) - x0;
    return sum / static_cast<float>(((hy + p.dil_h - 1) / p.dil_h) * ((wx + p.dil_w - 1) / p.dil_w));
  }
  return count > 0 ? sum / static_cast<float>(count) : 0.0f;
}

// One pooling window's running maximum, sum and count of the positions inside the map: add() each
// activated value, shuffle_xor() merges the partial windows of lanes of a warp, finish() the pooled value.
struct PoolAccumulator {
  float best = -INFINITY, sum = 0.0f;
  int count = 0;

  __device__ __forceinline__ void add(float v) {
    best = fmaxf(best, v);
    sum += v;
    ++count;
  }
  // Merges with the lane `offset` away (xor) among the lanes of `mask`, which must all call it.
  __device__ __forceinline__ void shuffle_xor(unsigned mask, int offset) {
    best = fmaxf(best, __shfl_xor_sync(mask, best, offset));
    sum += __shfl_xor_sync(mask, sum, offset);
    count += __shfl_xor_sync(mask, count, offset);
  }
  __device__ __forceinline__ float finish(const PoolGeometry& p, int py, int px, int OH, int OW) const {
    return pool_finish(p, py, px, OH, OW, best, sum, count);
  }
};

// Pools one output (py, px) of a [OH, OW] map: `value_at(y, x)` gives the activated conv output at (y, x),
// asked only for positions inside the map (the window's padded positions are skipped, as ONNX does).
template <class ValueAt>
__device__ __forceinline__ float pool_window(const PoolGeometry& p, int py, int px, int OH, int OW, ValueAt&& value_at) {
  const int y0 = py * p.sh - p.pad_top;
  const int x0 = px * p.sw - p.pad_left;
  PoolAccumulator window;
  for (int i = 0; i < p.kh; ++i) {
    const int y = y0 + i * p.dil_h;
    if (y < 0 || y >= OH) continue;
    for (int j = 0; j < p.kw; ++j) {
      const int x = x0 + j * p.dil_w;
      if (x < 0 || x >= OW) continue;
      window.add(value_at(y, x));
    }
  }
  return window.finish(p, py, px, OH, OW);
}

// Pools one output (n, f, py, px) from a map held in shared memory. `map` holds the activated conv
// outputs of rows [row0, row0+rows) and columns [col0, col0+cols) of one (n, f) plane, row pitch `pitch`;
// the window must lie inside that region or outside the conv output (padding).
__device__ __forceinline__ float pool_from_smem(const float* map, int pitch, int row0, int col0, int py, int px,
                                                const PoolGeometry& p, int OH, int OW) {
  return pool_window(p, py, px, OH, OW, [&](int y, int x) { return map[(y - row0) * pitch + (x - col0)]; });
}

// Whether max_window_3x3 serves this pooling: max windows of at most 3x3, no dilation.
__host__ __device__ inline bool small_max_window(const PoolGeometry& p) {
  return p.kind == FusedPool::Max && p.kh <= 3 && p.kw <= 3 && p.dil_h == 1 && p.dil_w == 1;
}

// The max over the window of pooled output (py, px) (small_max_window(p) holds), from a map in shared memory
// whose element (y0, x0) of the window's first position is at `corner`, row pitch `pitch`: nine predicated
// loads, independent of each other, so their latencies overlap (a window loop chains one load and branch a
// position: on the few threads that pool after a block's last barrier, that loop was most of the block's
// critical path).
__device__ __forceinline__ float max_window_3x3(const float* corner, int pitch, const PoolGeometry& p, int py, int px,
                                                int OH, int OW) {
  const int y0 = py * p.sh - p.pad_top, x0 = px * p.sw - p.pad_left;
  float best = -INFINITY;
#pragma unroll
  for (int i = 0; i < 3; ++i) {
#pragma unroll
    for (int j = 0; j < 3; ++j) {
      const int y = y0 + i, x = x0 + j;
      if (i < p.kh && j < p.kw && y >= 0 && y < OH && x >= 0 && x < OW) best = fmaxf(best, corner[i * pitch + j]);
    }
  }
  return best;
}

// Pools a block's activated conv tile into global memory. `conv_tile` holds `filters` maps of th x tw
// (conv rows from r0, columns from c0); filter f's pooled plane starts at planes + f * PH * PW. Covers the
// pooled tile [py0, py0 + ptile_h) x [px0, px0 + ptile_w) of each filter, outputs first, first + step, ...
// (a block's threads, or every thread of a cluster).
__device__ inline void pool_tile(const float* conv_tile, int th, int tw, int filters, int r0, int c0, int py0,
                                 int px0, int ptile_h, int ptile_w, const PoolGeometry& p, int OH, int OW,
                                 float* planes, int first, int step) {
  const int per_filter = ptile_h * ptile_w;
  const bool small_max = small_max_window(p);
  for (int i = first; i < filters * per_filter; i += step) {
    const int f = i / per_filter;
    const int py = py0 + (i % per_filter) / ptile_w;
    const int px = px0 + (i % per_filter) % ptile_w;
    if (py < p.PH && px < p.PW) {
      const float* map = conv_tile + f * th * tw;
      planes[(static_cast<int64_t>(f) * p.PH + py) * p.PW + px] =
          small_max ? max_window_3x3(map + (py * p.sh - p.pad_top - r0) * tw + (px * p.sw - p.pad_left - c0), tw, p,
                                     py, px, OH, OW)
                    : pool_from_smem(map, tw, r0, c0, py, px, p, OH, OW);
    }
  }
}

}  // namespace cnnrt::kernels
