// Matrix kernels: Gemm and MatMul (numpy semantics). Plain triple loops, sums in double.
#include "cpu/kernel_util.hpp"

namespace cnnrt::cpu {
namespace {

using ir::HostTensor;

// One row-major matrix inside a tensor, read possibly transposed.
struct MatrixRef {
  const float* data = nullptr;
  int64_t row_stride = 0;  // elements between (i, k) and (i + 1, k)
  int64_t col_stride = 1;  // elements between (i, k) and (i, k + 1)
  float at(int64_t i, int64_t k) const { return data[i * row_stride + k * col_stride]; }
};

// result[i, j] = sum_k a(i, k) * b(k, j), for an m x n result (row-major) and a shared extent k.
void multiply(const MatrixRef& a, const MatrixRef& b, int64_t m, int64_t n, int64_t k, double* result) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0.0;
      for (int64_t p = 0; p < k; ++p) sum += static_cast<double>(a.at(i, p)) * b.at(p, j);
      result[i * n + j] = sum;
    }
  }
}

// Y = alpha * A' * B' + beta * C, with A' = transA ? A^T : A (same for B), C broadcast to [M, N].
void gemm_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  const HostTensor& a = *in[0];
  const HostTensor& b = *in[1];
  const HostTensor* c = in.size() > 2 ? in[2] : nullptr;
  HostTensor& y = *out[0];
  const bool trans_a = node.attrs.get_int("transA", 0) != 0;
  const bool trans_b = node.attrs.get_int("transB", 0) != 0;
  const double alpha = node.attrs.get_float("alpha", 1.0f);
  const double beta = node.attrs.get_float("beta", 1.0f);
  const int64_t m = y.shape()[0];
  const int64_t n = y.shape()[1];
  const int64_t k = trans_a ? a.shape()[0] : a.shape()[1];
  const int64_t a_cols = a.shape()[1];
  const int64_t b_cols = b.shape()[1];
  const MatrixRef a_ref{a.f32(), trans_a ? 1 : a_cols, trans_a ? a_cols : 1};
  const MatrixRef b_ref{b.f32(), trans_b ? 1 : b_cols, trans_b ? b_cols : 1};
  std::vector<double> product(static_cast<size_t>(m * n));
  multiply(a_ref, b_ref, m, n, k, product.data());
  if (c == nullptr) {
    for (int64_t i = 0; i < m * n; ++i) y.f32()[i] = static_cast<float>(alpha * product[i]);
    return;
  }
  for_each_index(y.shape(), {broadcast_view(c->shape(), y.shape())}, [&](int64_t i, const int64_t* at) {
    y.f32()[i] = static_cast<float>(alpha * product[i] + beta * c->f32()[at[0]]);
  });
}

// numpy matmul: 1-D A is a row, 1-D B a column; the leading (batch) dims broadcast.
void matmul_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  const HostTensor& a = *in[0];
  const HostTensor& b = *in[1];
  HostTensor& y = *out[0];
  const ir::Shape a2 = a.rank() == 1 ? ir::Shape{1, a.shape()[0]} : a.shape();
  const ir::Shape b2 = b.rank() == 1 ? ir::Shape{b.shape()[0], 1} : b.shape();
  const int64_t m = a2[a2.size() - 2];
  const int64_t k = a2[a2.size() - 1];
  const int64_t n = b2[b2.size() - 1];
  const ir::Shape a_batch(a2.begin(), a2.end() - 2);
  const ir::Shape b_batch(b2.begin(), b2.end() - 2);
  const ir::Shape batch = ir::broadcast_shapes(a_batch, b_batch);
  // Offsets of each batch's matrices: broadcast strides counted in whole matrices.
  StridedView a_view = broadcast_view(a_batch, batch);
  StridedView b_view = broadcast_view(b_batch, batch);
  for (int64_t& stride : a_view.strides) stride *= m * k;
  for (int64_t& stride : b_view.strides) stride *= k * n;
  std::vector<double> product(static_cast<size_t>(m * n));
  for_each_index(batch, {a_view, b_view}, [&](int64_t index, const int64_t* at) {
    const MatrixRef a_ref{a.f32() + at[0], k, 1};
    const MatrixRef b_ref{b.f32() + at[1], n, 1};
    multiply(a_ref, b_ref, m, n, k, product.data());
    float* result = y.f32() + index * m * n;
    for (int64_t i = 0; i < m * n; ++i) result[i] = static_cast<float>(product[i]);
  });
}

}  // namespace

void add_matrix_kernels(KernelTable& table) {
  table.insert(table.end(), {
      {"Gemm", gemm_kernel},
      {"MatMul", matmul_kernel},
  });
}

}  // namespace cnnrt::cpu
