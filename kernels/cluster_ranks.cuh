// Helpers of the kernels whose thread-block clusters split one image's work over `ranks` blocks (compute capability
// 9.0), or run it in one block where ranks == 1 (any GPU): a barrier over whichever it is, and a store into a rank's
// shared memory. Internal: included by .cu files only.
#pragma once

#include <cooperative_groups.h>

#include "kernels/common.cuh"

namespace cnnrt::kernels {

// A barrier over the cluster (ranks > 1: release and acquire, so that what each rank stored, into its own or another
// rank's shared memory or into global memory, is visible to every rank after it), else over the block.
__device__ __forceinline__ void rank_barrier(int ranks) {
#if !CNNRT_ARCH_BELOW(900)
  if (ranks > 1) {
    cooperative_groups::this_cluster().sync();
    return;
  }
#endif
  __syncthreads();
}

// Stores v at offset i of `array` (shared memory) in rank r of the cluster (ranks > 1), else in this block's.
__device__ __forceinline__ void store_in_rank(float* array, int i, float v, int r, int ranks) {
#if !CNNRT_ARCH_BELOW(900)
  if (ranks > 1) {
    cooperative_groups::this_cluster().map_shared_rank(array, r)[i] = v;
    return;
  }
#endif
  array[i] = v;
}

}  // namespace cnnrt::kernels
