// Warp and block reductions, and the split of independent rows among warps or blocks, shared by the
// reduction, pooling, softmax and GEMM kernels. Internal: included by .cu files only. 1-D blocks whose size is
// a multiple of 32.
#pragma once

#include <cfloat>

#include "kernels/common.cuh"

namespace cnnrt::kernels {

constexpr unsigned kFullWarpMask = 0xffffffffu;

__device__ inline float shuffle_xor(float value, int lane_mask) {
  return __shfl_xor_sync(kFullWarpMask, value, lane_mask);
}

// Every lane of the warp gets combine() of all 32 lanes' values. Needs all 32 lanes converged.
template <class T, class Combine>
__device__ T warp_allreduce(T value, Combine combine) {
#pragma unroll
  for (int lane_mask = kWarpSize / 2; lane_mask > 0; lane_mask /= 2) {
    value = combine(value, shuffle_xor(value, lane_mask));
  }
  return value;
}

// Every thread of the block gets combine() of all threads' values. `scratch`: shared memory for 32 values.
// Contains __syncthreads(): every thread of the block must call it, the same number of times.
template <class T, class Combine>
__device__ T block_allreduce(T value, Combine combine, T* scratch) {
  value = warp_allreduce(value, combine);
  const int warp = threadIdx.x / kWarpSize;
  const int warps = blockDim.x / kWarpSize;
  __syncthreads();  // a previous call may still be reading scratch
  if (threadIdx.x % kWarpSize == 0) scratch[warp] = value;
  __syncthreads();
  value = scratch[0];
  for (int w = 1; w < warps; ++w) value = combine(value, scratch[w]);
  return value;
}

// The rows a thread works on: its group (one warp, or the whole block) takes rows first_row,
// first_row + row_step, ...; within the group the thread is `lane` of `size`.
struct RowGroup {
  int64_t first_row;
  int64_t row_step;
  int lane;
  int size;
  bool whole_block;  // uniform over the launch; group_allreduce then synchronizes the block
};

__device__ inline RowGroup row_group(bool whole_block) {
  if (whole_block) {
    return RowGroup{blockIdx.x, gridDim.x, static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x), true};
  }
  const int64_t warps_per_block = blockDim.x / kWarpSize;
  return RowGroup{blockIdx.x * warps_per_block + threadIdx.x / kWarpSize, gridDim.x * warps_per_block,
                  static_cast<int>(threadIdx.x % kWarpSize), kWarpSize, false};
}

// In block mode all threads of the block iterate the same rows, so the barriers inside are reached uniformly.
template <class T, class Combine>
__device__ T group_allreduce(const RowGroup& group, T value, Combine combine, T* scratch) {
  return group.whole_block ? block_allreduce(value, combine, scratch) : warp_allreduce(value, combine);
}

// Rows of `length` floats are split among warps when short or plentiful, among blocks when long and few.
// Not tuned on hardware: a warp reads 128 bytes per step, so a row of <= 1024 floats is <= 8 steps per lane
// (a block would mostly wait on its barriers); 8192 rows keep all warps of an H100 (132 SMs x 64) busy.
inline bool rows_need_whole_blocks(int64_t rows, int64_t length) { return length > 1024 && rows < 8192; }

// Threads per block of the row kernels, and the grid: one warp or one block per row, capped.
constexpr int kRowThreads = 256;
inline unsigned row_blocks(int64_t rows, bool whole_block) {
  return whole_block ? blocks_for(rows, 1) : blocks_for(rows * kWarpSize, kRowThreads);
}

struct SumCombine {
  __device__ float operator()(float a, float b) const { return a + b; }
};

}  // namespace cnnrt::kernels
