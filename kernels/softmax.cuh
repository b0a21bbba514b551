// Softmax and LogSoftmax over one axis.
#pragma once

#include "kernels/common.cuh"

namespace cnnrt::kernels {

enum class SoftmaxKind { Softmax, LogSoftmax };

// x, y contiguous, viewed as [outer, length, inner]; normalizes along `length`:
//   Softmax:    y = exp(x - max) / sum(exp(x - max))
//   LogSoftmax: y = x - max - log(sum(exp(x - max)))
// Numerically stable: the row maximum is subtracted before exponentiating (an online max/sum pass, then an
// output pass). Opset < 13 (coerce_2d) is the engine's job: it passes inner = 1, length = product of the
// extents from `axis` on. inner == 1: a warp per row, a whole block per row for long rows with few rows,
// float4 when rows are 16-byte aligned; inner > 1: a thread per (outer, inner) column, coalesced across inner.
void launch_softmax(SoftmaxKind kind, const float* x, float* y, int64_t outer, int64_t length, int64_t inner,
                    cudaStream_t stream);

}  // namespace cnnrt::kernels
