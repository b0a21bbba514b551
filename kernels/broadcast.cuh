// Binary elementwise ops with numpy broadcasting (Add, Sub, Mul, Div, Pow, Max, Min, PRelu), and Expand.
#pragma once

#include "kernels/common.cuh"

namespace cnnrt::kernels {

enum class BinaryOp {
  Add,
  Sub,
  Mul,
  Div,
  Pow,    // powf(a, b)
  Max,    // a < b ? b : a (NaN in b is ignored, as std::max does)
  Min,    // b < a ? b : a
  PRelu,  // a < 0 ? a * b : a, with b the slope
};

// out[i] = op(a[...], b[...]) over the output's N-D extent: output element (i0, i1, ...) reads a at
// i0 * a_strides[0] + i1 * a_strides[1] + ... and likewise b; a stride is 0 on the axes an operand repeats.
struct BroadcastDesc {
  int rank = 0;                      // 0..kMaxRank (0: one element)
  int64_t out_dims[kMaxRank] = {};   // the output is contiguous (row-major) with these extents
  int64_t a_strides[kMaxRank] = {};  // elements
  int64_t b_strides[kMaxRank] = {};  // elements
};

// The descriptor of numpy broadcasting: shapes are aligned at their last axis, an operand axis of extent 1
// (or missing) is repeated. Operands are contiguous. Requires a_rank, b_rank <= out_rank <= kMaxRank and
// out_dims the broadcast shape (the planner has checked). A null dims pointer is fine for rank 0.
BroadcastDesc make_broadcast_desc(int out_rank, const int64_t* out_dims, int a_rank, const int64_t* a_dims, int b_rank,
                                  const int64_t* b_dims);

// out = op(a, b) under `desc`. out may be the same buffer as a (or b) when that operand is not broadcast:
// variadic Sum/Max/Min chain launch_binary with the output as accumulating operand a
// (out = in0 op in1, then out = out op in_k), and Mean adds UnaryOp::Scale by 1 / inputs at the end.
// Axes are merged where possible (same-shape ops run as one flat loop, per-channel ones as 3-D), and
// float4 accesses are used when the innermost extent is a multiple of 4, bases are 16-byte aligned and each
// operand is contiguous or repeated along the innermost axis (same-shape, scalar, per-channel cases).
void launch_binary(BinaryOp op, const float* a, const float* b, float* out, const BroadcastDesc& desc,
                   cudaStream_t stream);

// Expand: out = a broadcast to desc.out_dims (reads desc.a_strides; b_strides are ignored). Build desc with
// make_broadcast_desc(out_rank, out_dims, in_rank, in_dims, 0, nullptr).
void launch_expand(const float* in, float* out, const BroadcastDesc& desc, cudaStream_t stream);

}  // namespace cnnrt::kernels
