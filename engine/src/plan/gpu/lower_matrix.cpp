// Lowering of Gemm, MatMul and FusedGemm (Gemm + activation) to the batched SGEMM kernel.
#include "ir/fused.hpp"
#include "kernels/gemm.cuh"
#include "plan/gpu/conv_step.hpp"
#include "plan/gpu/lower_util.hpp"

namespace cnnrt::plan {

namespace {

// One product as a step: inputs A, B (and C when has_c), K split over the device's SMs where the tiles alone
// would leave them idle (with a workspace input for the partial sums).
void add_gemm_step(LowerContext& lc, const ir::Node& node, const char* kernel, std::string config,
                   kernels::GemmDesc desc, bool has_c) {
  desc.split_k = kernels::gemm_split_k(desc, lc.context.device.sm_count);
  const int64_t workspace = kernels::gemm_workspace_floats(desc);
  std::vector<int> inputs;
  for (size_t i = 0; i < (has_c ? 3u : 2u); ++i) inputs.push_back(lc.slot(node.input(i)));
  if (workspace > 0) {
    inputs.push_back(lc.workspace(workspace * 4, "gemm K splits"));
    config += fmt::format(", K split {} ways", desc.split_k);
  }
  const size_t ws_input = inputs.size() - 1;
  lc.add_step(node, kernel, config, inputs, output_slots(lc, node),
              [desc, has_c, workspace, ws_input](const float* const* in, float* const* out, Stream s) {
                kernels::launch_gemm(in[0], in[1], has_c ? in[2] : nullptr, out[0], desc, s,
                                     workspace > 0 ? const_cast<float*>(in[ws_input]) : nullptr);
              });
}

void lower_gemm(const ir::Node& node, LowerContext& lc) {
  const ir::Shape& a = input_shape(lc, node, 0);
  const ir::Shape& b = input_shape(lc, node, 1);
  const bool has_c = node.has_input(2);
  const ir::Shape c = has_c ? input_shape(lc, node, 2) : ir::Shape{};
  kernels::GemmDesc desc = kernels::onnx_gemm_desc(
      a.data(), node.attrs.get_int("transA", 0) != 0, b.data(), node.attrs.get_int("transB", 0) != 0,
      node.attrs.get_float("alpha", 1.0f), node.attrs.get_float("beta", 1.0f), has_c ? static_cast<int>(c.size()) : -1,
      c.data());
  const KernelActivation act = node.op == ir::fused::kFusedGemm ? kernel_activation(node) : KernelActivation{};
  desc.act = act.act;
  desc.act_alpha = act.alpha;
  desc.act_beta = act.beta;
  add_gemm_step(lc, node, act.act != kernels::ParamAct::None ? "gemm+activation" : "gemm",
                fmt::format("{}x{}x{}{}", desc.m, desc.n, desc.k, has_c ? " +C" : ""), desc, has_c);
}

void lower_matmul(const ir::Node& node, LowerContext& lc) {
  const ir::Shape& a = input_shape(lc, node, 0);
  const ir::Shape& b = input_shape(lc, node, 1);
  require_rank_at_most(a, kernels::kMaxRank, "MatMul operand");
  require_rank_at_most(b, kernels::kMaxRank, "MatMul operand");
  const kernels::GemmDesc desc =
      kernels::matmul_desc(static_cast<int>(a.size()), a.data(), static_cast<int>(b.size()), b.data());
  add_gemm_step(lc, node, "gemm", fmt::format("{}x{}x{} batch rank {}", desc.m, desc.n, desc.k, desc.batch_rank), desc,
                false);
}

}  // namespace

std::vector<LoweringEntry> matrix_lowerings() {
  return {{"Gemm", lower_gemm}, {"FusedGemm", lower_gemm}, {"MatMul", lower_matmul}};
}

}  // namespace cnnrt::plan
