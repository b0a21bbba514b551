// Gemm through cuBLASLt: candidates beside launch_gemm, chosen where they measure faster (the planner times
// both on the real shapes). cuBLASLt's heuristic ranks its algorithms for a product; each of the first few is
// one candidate (`cublaslt_h0`, `_h1`, ...). FP32 in, FP32 compute (no TF32), FP32 out.
//
// Row-major out = A B is column-major out^T = B^T A^T, so the stored B is cuBLASLt's first operand and the
// stored A its second; ONNX Gemm's C of shape [N] or [1, N] (beta 1) is the bias epilogue along out^T's rows,
// a C of [M, N] its C matrix (any beta); ReLU is the ReLU epilogue, any other activation a pass of its own
// over the output after the product (launch_activation, in place).
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

#include "kernels/gemm.cuh"

namespace cnnrt::kernels {

class CublasGemm {
 public:
  // Bytes of workspace every algorithm offered may use (the launch's `workspace`, 256-byte aligned).
  static constexpr size_t kWorkspaceBytes = size_t(4) << 20;

  // Empty when cuBLASLt can run the product as described (a single product; C absent, a row bias with
  // beta 1 or a whole matrix); else why not.
  static std::string unsupported(const GemmDesc& desc, bool has_c);
  // Up to `count` algorithms for the product on the current device, in the heuristic's order (none when it
  // offers none). Throws std::runtime_error when cuBLASLt cannot start or describe the product.
  static std::vector<std::shared_ptr<const CublasGemm>> algorithms(const GemmDesc& desc, bool has_c, int count);

  // out = act(alpha * A B (+ C)), on `stream`. Operands whose addresses are not aligned as the algorithm
  // was chosen for (16 bytes where the leading dimensions allow), and a call cuBLASLt refuses, run on
  // launch_gemm instead (unsplit): the answer is the same, only the time differs.
  void launch(const float* a, const float* b, const float* c, float* out, void* workspace, cudaStream_t stream) const;

  struct Product;  // cuBLASLt's descriptions of the operands, shared by a product's algorithms
  struct State;    // the product and one algorithm for it
  explicit CublasGemm(std::shared_ptr<const State> state) : state_(std::move(state)) {}

 private:
  std::shared_ptr<const State> state_;
};

}  // namespace cnnrt::kernels
