// Lowering of Gemm, MatMul and FusedGemm (Gemm + activation) to the batched SGEMM kernel.
#include "ir/fused.hpp"
#include "kernels/elementwise.cuh"
#include "kernels/gemm.cuh"
#include "plan/gpu/conv_step.hpp"
#include "plan/gpu/lower_util.hpp"

namespace cnnrt::plan {

namespace {

void lower_gemm(const ir::Node& node, LowerContext& lc) {
  const ir::Shape& a = input_shape(lc, node, 0);
  const ir::Shape& b = input_shape(lc, node, 1);
  const bool has_c = node.has_input(2);
  const ir::Shape c = has_c ? input_shape(lc, node, 2) : ir::Shape{};
  const kernels::GemmDesc desc = kernels::onnx_gemm_desc(
      a.data(), node.attrs.get_int("transA", 0) != 0, b.data(), node.attrs.get_int("transB", 0) != 0,
      node.attrs.get_float("alpha", 1.0f), node.attrs.get_float("beta", 1.0f), has_c ? static_cast<int>(c.size()) : -1,
      c.data());
  const KernelActivation act = node.op == ir::fused::kFusedGemm ? kernel_activation(node) : KernelActivation{};
  const bool activate = act.act != kernels::ParamAct::None;
  const int64_t count = ir::numel(output_shape(lc, node));
  add_simple_step(lc, node, activate ? "gemm+activation" : "gemm",
                  fmt::format("{}x{}x{}{}", desc.m, desc.n, desc.k, has_c ? " +C" : ""),
                  [=](const float* const* in, float* const* out, Stream s) {
                    kernels::launch_gemm(in[0], in[1], has_c ? in[2] : nullptr, out[0], desc, s);
                    if (activate) kernels::launch_activation(act.act, act.alpha, act.beta, out[0], out[0], count, s);
                  });
}

void lower_matmul(const ir::Node& node, LowerContext& lc) {
  const ir::Shape& a = input_shape(lc, node, 0);
  const ir::Shape& b = input_shape(lc, node, 1);
  require_rank_at_most(a, kernels::kMaxRank, "MatMul operand");
  require_rank_at_most(b, kernels::kMaxRank, "MatMul operand");
  const kernels::GemmDesc desc =
      kernels::matmul_desc(static_cast<int>(a.size()), a.data(), static_cast<int>(b.size()), b.data());
  add_simple_step(lc, node, "gemm", fmt::format("{}x{}x{} batch rank {}", desc.m, desc.n, desc.k, desc.batch_rank),
                  [desc](const float* const* in, float* const* out, Stream s) {
                    kernels::launch_gemm(in[0], in[1], nullptr, out[0], desc, s);
                  });
}

}  // namespace

std::vector<LoweringEntry> matrix_lowerings() {
  return {{"Gemm", lower_gemm}, {"FusedGemm", lower_gemm}, {"MatMul", lower_matmul}};
}

}  // namespace cnnrt::plan
