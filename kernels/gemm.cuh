// Batched SGEMM for Gemm and MatMul (and fully connected layers): out = alpha * op(A) op(B) + beta * C.
#pragma once

#include "kernels/common.cuh"
#include "kernels/layer.hpp"

namespace cnnrt::kernels {

constexpr int kMaxBatchRank = kMaxRank - 2;

// For each batch index and i < m, j < n:
//   out[batch][i][j] = alpha * sum_{p < k} opA(i, p) * opB(p, j) + beta * C(i, j)
// Matrices are row-major with a leading dimension (elements between consecutive stored rows):
//   opA(i, p) = trans_a ? a[p * lda + i] : a[i * lda + p]     (A stored K x M when trans_a, else M x K)
//   opB(p, j) = trans_b ? b[j * ldb + p] : b[p * ldb + j]     (B stored N x K when trans_b, else K x N)
// C is optional (a null pointer at launch: no addend) and the same for every batch:
//   C(i, j) = c[i * c_row_stride + j * c_col_stride]; strides 0 broadcast it (Gemm's C of shape [N],
//   [M, 1], [1, N], [M, N] or a scalar).
// Batches: out is contiguous [batch_dims..., m, n]; the matrices of batch index (b_0, b_1, ...) start at
// a + sum_d b_d * a_batch_strides[d] and likewise for b (stride 0 on the axes an operand broadcasts).
// The activation `act` (with act_alpha, act_beta as Epilogue::alpha, beta) applies to every output last.
// split_k > 1 (one product only): K is split over that many blocks per tile (gemm_split_k), whose partial sums
// go through a workspace of gemm_workspace_floats(desc) floats and are added in split order.
struct GemmDesc {
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  bool trans_a = false;
  int64_t lda = 0;
  bool trans_b = false;
  int64_t ldb = 0;
  float alpha = 1.0f;
  float beta = 0.0f;
  int64_t c_row_stride = 0;
  int64_t c_col_stride = 0;
  int batch_rank = 0;  // 0..kMaxBatchRank; 0: a single product
  int64_t batch_dims[kMaxBatchRank] = {};
  int64_t a_batch_strides[kMaxBatchRank] = {};  // elements
  int64_t b_batch_strides[kMaxBatchRank] = {};  // elements
  ParamAct act = ParamAct::None;
  float act_alpha = 0.0f;
  float act_beta = 0.0f;
  int split_k = 1;
};

// ONNX Gemm: A of a_dims (2-D), B of b_dims (2-D), optional C of c_rank <= 2 extents c_dims broadcast to
// [M, N] (c_rank < 0: no C). Contiguous operands.
GemmDesc onnx_gemm_desc(const int64_t* a_dims, bool trans_a, const int64_t* b_dims, bool trans_b, float alpha,
                        float beta, int c_rank, const int64_t* c_dims);
// numpy matmul (ONNX MatMul): a 1-D A is a row [1, K], a 1-D B a column [K, 1] (the engine drops those unit
// axes from the output shape; the data is the same); batch axes broadcast. Contiguous operands; ranks 1..kMaxRank.
GemmDesc matmul_desc(int a_rank, const int64_t* a_dims, int b_rank, const int64_t* b_dims);

// The K split that keeps `sm_count` SMs busy (two blocks each) on a product whose tiles alone would not, with
// every split at least 4 slices deep: 1 (no split) for m <= 16, batched products and products with tiles enough.
int gemm_split_k(const GemmDesc& desc, int sm_count);
// Floats of workspace the product needs (0 without a K split).
int64_t gemm_workspace_floats(const GemmDesc& desc);

// Runs the product. m <= 16 (fully connected layers up to batch 16): 4 rows of the output a thread, each chunk
// of 4 rows its own work item; one warp per (chunk, output column) reducing along K when op(B) is contiguous
// along K (trans_b, as ONNX Gemm weights usually are), else blocks of 32 columns with K split over 8 warps.
// Otherwise a 64 x 64 shared-memory tile per block, 16 deep in K (or the block's K split), 8 x 4 outputs per
// thread, the next K slice fetched while the current one is multiplied. Any sizes and strides; float
// accumulation (relative error grows like sqrt(k) * 6e-8). No alignment requirement; `workspace` (device,
// gemm_workspace_floats(desc) floats) only with a K split.
void launch_gemm(const float* a, const float* b, const float* c, float* out, const GemmDesc& desc, cudaStream_t stream,
                 float* workspace = nullptr);

}  // namespace cnnrt::kernels
