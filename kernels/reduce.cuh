// ReduceSum / ReduceMean / ReduceMax / ReduceMin over any set of axes.
#pragma once

#include "kernels/common.cuh"

namespace cnnrt::kernels {

enum class ReduceOp { Sum, Mean, Max, Min };

struct ReduceDesc {
  int rank = 0;                 // 1..kMaxRank
  int64_t dims[kMaxRank] = {};  // input extents (contiguous input)
  int axis_count = 0;           // 0: nothing reduced (the output is a copy of the input)
  int axes[kMaxRank] = {};      // sorted, distinct, in [0, rank)
};

// y = reduction of x over desc.axes; y is contiguous with the kept axes in order (keepdims does not change the
// layout). Sums accumulate in float (per-thread partial sums combined as a tree); Mean divides by the number
// of reduced elements (NaN when that is 0; Sum gives 0, Max -inf, Min +inf then).
// Unit axes are dropped and neighbouring axes merged, giving one of:
//   - reduced axes trailing (GlobalAveragePool, ReduceMean over H, W): contiguous rows, one warp per row, or
//     a whole block per row for long rows with few rows; float4 reads when rows are 16-byte aligned;
//   - otherwise (ReduceMean over C; non-adjacent axes): blocks of 32 consecutive outputs x 8 slices of the
//     reduced elements, reads coalesced along the innermost kept axis. Non-adjacent reduced axes pay 64-bit
//     index divisions per element.
// Few outputs over very many elements use few SMs (no cross-block split, so no workspace and no atomics).
void launch_reduce(ReduceOp op, const float* x, float* y, const ReduceDesc& desc, cudaStream_t stream);

}  // namespace cnnrt::kernels
