// Which products the planner offers to cuBLASLt (kernels/gemm_cublas.hpp), on the host: a single product
// with no C, a bias along the outputs (beta 1) or a whole C matrix (any beta), any activation; not batched
// products, empty ones, a scaled bias, C broadcast along the rows or a scalar C.
#include <doctest/doctest.h>

#if CNNRT_WITH_CUDA
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/gemm_cublas.hpp"

namespace {

using cnnrt::kernels::CublasGemm;
using cnnrt::kernels::GemmDesc;

// A 4x8 by 8x5 Gemm (B transposed when trans_b) with C of `c_dims` (empty: none) and `beta`.
GemmDesc gemm(const std::vector<int64_t>& c_dims, float beta, bool trans_b = false) {
  const std::vector<int64_t> a = {4, 8};
  const std::vector<int64_t> b = trans_b ? std::vector<int64_t>{5, 8} : std::vector<int64_t>{8, 5};
  return cnnrt::kernels::onnx_gemm_desc(a.data(), false, b.data(), trans_b, 1.0f, beta,
                                        c_dims.empty() ? -1 : static_cast<int>(c_dims.size()), c_dims.data());
}

bool offered(const GemmDesc& d, bool has_c) { return CublasGemm::unsupported(d, has_c).empty(); }

}  // namespace

TEST_CASE("cuBLASLt is offered single products whose C it can add, with any activation") {
  CHECK(offered(gemm({}, 1.0f), false));
  CHECK(offered(gemm({}, 1.0f, true), false));
  CHECK(offered(gemm({5}, 1.0f), true));     // the bias epilogue
  CHECK(offered(gemm({1, 5}, 1.0f), true));
  CHECK(offered(gemm({4, 5}, 1.0f), true));  // C as cuBLASLt's matrix
  CHECK(offered(gemm({4, 5}, -0.5f), true));
  CHECK(offered(gemm({4, 1}, 0.0f), true));  // beta 0: C is not read
  GemmDesc tanh = gemm({5}, 1.0f);
  tanh.act = cnnrt::kernels::ParamAct::Tanh;  // a pass after the product
  CHECK(offered(tanh, true));

  CHECK(CublasGemm::unsupported(gemm({5}, 0.5f), true) == "a row bias scaled by beta");
  CHECK(CublasGemm::unsupported(gemm({4, 1}, 1.0f), true) == "C broadcast along the rows or a scalar");
  CHECK(CublasGemm::unsupported(gemm({1}, 1.0f), true) == "C broadcast along the rows or a scalar");
  GemmDesc batched = gemm({}, 1.0f);
  batched.batch_rank = 1;
  batched.batch_dims[0] = 3;
  CHECK(CublasGemm::unsupported(batched, false) == "a batched product");
  GemmDesc empty = gemm({}, 1.0f);
  empty.k = 0;
  CHECK(CublasGemm::unsupported(empty, false) == "an empty product");
}
#endif
