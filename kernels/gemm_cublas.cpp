// Gemm through cuBLASLt (see gemm_cublas.hpp).
#include "kernels/gemm_cublas.hpp"

#include <cublasLt.h>
#include <fmt/format.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <stdexcept>

#include "kernels/elementwise.cuh"

namespace cnnrt::kernels {

namespace {

void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(fmt::format("cuBLASLt {}: {}", what, cublasLtGetStatusString(s)));
}

// One handle a device for the process (cuBLASLt handles are not bound to a stream and may be shared by threads).
cublasLtHandle_t handle_for_current_device() {
  static std::mutex mutex;
  static std::map<int, cublasLtHandle_t> handles;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) throw std::runtime_error("cuBLASLt: no current CUDA device");
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = handles.find(device);
  if (it == handles.end()) {
    cublasLtHandle_t h = nullptr;
    check(cublasLtCreate(&h), "create");
    it = handles.emplace(device, h).first;
  }
  return it->second;
}

template <class T>
void set_desc(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const T& value) {
  check(cublasLtMatmulDescSetAttribute(d, attr, &value, sizeof(value)), "set a product attribute");
}

// Where C lies, for the epilogue.
enum class GemmAddend { None, RowBias, Matrix };

// C's form for the epilogue; None, with `why` set, for the forms cuBLASLt is not offered.
GemmAddend addend_of(const GemmDesc& desc, bool has_c, std::string* why = nullptr) {
  if (!has_c || desc.beta == 0.0f) return GemmAddend::None;
  if (desc.c_row_stride == 0 && desc.c_col_stride == 1) {
    if (desc.beta == 1.0f) return GemmAddend::RowBias;
    if (why) *why = "a row bias scaled by beta";
  } else if (desc.c_row_stride == desc.n && desc.c_col_stride == 1) {
    return GemmAddend::Matrix;
  } else if (why) {
    *why = "C broadcast along the rows or a scalar";
  }
  return GemmAddend::None;
}

// The widest alignment (bytes, at most 16) every row of a matrix with leading dimension `ld` floats keeps.
int row_alignment(int64_t ld) { return ld % 4 == 0 ? 16 : ld % 2 == 0 ? 8 : 4; }

}  // namespace

struct CublasGemm::Product {
  GemmDesc desc;  // the product (split_k 1: the fallback's)
  GemmAddend addend = GemmAddend::None;
  cublasLtHandle_t handle = nullptr;
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;  // stored B, stored A, out^T
  int align_b = 4, align_a = 4, align_out = 4;

  Product(const GemmDesc& d, bool has_c) : desc(d), addend(addend_of(d, has_c)), handle(handle_for_current_device()) {
    desc.split_k = 1;
    const uint64_t m = d.m, n = d.n, k = d.k;
    try {
      // Stored B: N x K (ld ldb) as is, or K x N transposed; stored A: K x M as is, or M x K transposed.
      check(cublasLtMatrixLayoutCreate(&first, CUDA_R_32F, d.trans_b ? k : n, d.trans_b ? n : k, d.ldb), "describe B");
      check(cublasLtMatrixLayoutCreate(&second, CUDA_R_32F, d.trans_a ? m : k, d.trans_a ? k : m, d.lda), "describe A");
      check(cublasLtMatrixLayoutCreate(&out, CUDA_R_32F, n, m, d.n), "describe the output");
    } catch (...) {
      destroy();
      throw;
    }
    align_b = row_alignment(d.ldb);
    align_a = row_alignment(d.lda);
    align_out = row_alignment(d.n);
  }
  ~Product() { destroy(); }
  Product(const Product&) = delete;
  Product& operator=(const Product&) = delete;

  // A product descriptor with the epilogue (the bias pointer is a launch's: one descriptor a launch keeps
  // concurrent launches of one plan apart). The caller destroys it.
  cublasLtMatmulDesc_t make_op(const float* bias) const {
    cublasLtMatmulDesc_t op = nullptr;
    check(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "create a product");
    try {
      set_desc(op, CUBLASLT_MATMUL_DESC_TRANSA, desc.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N);
      set_desc(op, CUBLASLT_MATMUL_DESC_TRANSB, desc.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N);
      const bool relu = desc.act == ParamAct::Relu;
      cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
      if (addend == GemmAddend::RowBias) epilogue = relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
      else if (relu) epilogue = CUBLASLT_EPILOGUE_RELU;
      set_desc(op, CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue);
      if (addend == GemmAddend::RowBias) set_desc(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, static_cast<const void*>(bias));
    } catch (...) {
      cublasLtMatmulDescDestroy(op);
      throw;
    }
    return op;
  }

 private:
  void destroy() noexcept {
    if (first) cublasLtMatrixLayoutDestroy(first);
    if (second) cublasLtMatrixLayoutDestroy(second);
    if (out) cublasLtMatrixLayoutDestroy(out);
  }
};

struct CublasGemm::State {
  std::shared_ptr<const Product> product;
  cublasLtMatmulAlgo_t algo{};
};

std::string CublasGemm::unsupported(const GemmDesc& d, bool has_c) {
  if (d.batch_rank != 0) return "a batched product";
  if (d.m <= 0 || d.n <= 0 || d.k <= 0) return "an empty product";
  if (d.m > INT32_MAX || d.n > INT32_MAX || d.k > INT32_MAX) return "extents beyond 32 bits";
  std::string why;
  addend_of(d, has_c, &why);
  return why;
}

std::vector<std::shared_ptr<const CublasGemm>> CublasGemm::algorithms(const GemmDesc& desc, bool has_c, int count) {
  std::vector<std::shared_ptr<const CublasGemm>> result;
  if (!unsupported(desc, has_c).empty() || count <= 0) return result;
  const auto product = std::make_shared<const Product>(desc, has_c);

  cublasLtMatmulPreference_t pref = nullptr;
  check(cublasLtMatmulPreferenceCreate(&pref), "create a preference");
  std::vector<cublasLtMatmulHeuristicResult_t> found(static_cast<size_t>(count));
  int returned = 0;
  cublasLtMatmulDesc_t op = nullptr;
  try {
    const uint64_t workspace = kWorkspaceBytes;
    const uint32_t a = product->align_b, b = product->align_a, cd = product->align_out;
    check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace)),
          "limit the workspace");
    check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &a, sizeof(a)), "align");
    check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &b, sizeof(b)), "align");
    check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &cd, sizeof(cd)), "align");
    check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &cd, sizeof(cd)), "align");
    op = product->make_op(nullptr);
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(product->handle, op, product->first, product->second,
                                                             product->out, product->out, pref, count, found.data(),
                                                             &returned);
    if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED) check(st, "rank algorithms");
    if (st != CUBLAS_STATUS_SUCCESS) returned = 0;
  } catch (...) {
    if (op) cublasLtMatmulDescDestroy(op);
    cublasLtMatmulPreferenceDestroy(pref);
    throw;
  }
  cublasLtMatmulDescDestroy(op);
  cublasLtMatmulPreferenceDestroy(pref);
  for (int i = 0; i < returned; ++i) {
    if (found[static_cast<size_t>(i)].state != CUBLAS_STATUS_SUCCESS) continue;
    auto s = std::make_shared<State>();
    s->product = product;
    s->algo = found[static_cast<size_t>(i)].algo;
    result.push_back(std::make_shared<CublasGemm>(std::move(s)));
  }
  return result;
}

void CublasGemm::launch(const float* a, const float* b, const float* c, float* out, void* workspace,
                        cudaStream_t stream) const {
  const Product& s = *state_->product;
  auto aligned = [](const void* p, int bytes) { return reinterpret_cast<uintptr_t>(p) % uintptr_t(bytes) == 0; };
  const bool matrix_c = s.addend == GemmAddend::Matrix;
  bool ok = aligned(b, s.align_b) && aligned(a, s.align_a) && aligned(out, s.align_out) &&
            (!matrix_c || aligned(c, s.align_out)) && aligned(workspace, 256);
  if (ok) {
    cublasLtMatmulDesc_t op = nullptr;
    try {
      op = s.make_op(s.addend == GemmAddend::RowBias ? c : nullptr);
    } catch (const std::runtime_error&) {
      ok = false;
    }
    if (ok) {
      const float alpha = s.desc.alpha, beta = matrix_c ? s.desc.beta : 0.0f;
      const void* c_matrix = matrix_c ? static_cast<const void*>(c) : static_cast<const void*>(out);
      ok = cublasLtMatmul(s.handle, op, &alpha, b, s.first, a, s.second, &beta, c_matrix, s.out, out, s.out,
                          &state_->algo, workspace, kWorkspaceBytes, stream) == CUBLAS_STATUS_SUCCESS;
      cublasLtMatmulDescDestroy(op);
    }
  }
  if (!ok) {
    launch_gemm(a, b, s.addend == GemmAddend::None ? nullptr : c, out, s.desc, stream);
    return;
  }
  // Activations the epilogue lacks (all but ReLU): one pass over the output, in place.
  if (s.desc.act != ParamAct::None && s.desc.act != ParamAct::Relu) {
    launch_activation(s.desc.act, s.desc.act_alpha, s.desc.act_beta, out, out, s.desc.m * s.desc.n, stream);
  }
}

}  // namespace cnnrt::kernels
