// Lowering of Gemm, MatMul and FusedGemm (Gemm + activation): our batched SGEMM kernel, measured against
// cuBLASLt's ranked algorithms where cuBLASLt takes the product (kernels/gemm_cublas.hpp).
#include <stdexcept>

#include "core/log.hpp"
#include "ir/fused.hpp"
#include "kernels/gemm.cuh"
#include "kernels/gemm_cublas.hpp"
#include "plan/gpu/conv_step.hpp"
#include "plan/gpu/lower_util.hpp"

namespace cnnrt::plan {

namespace {

constexpr int kCublasCandidates = 3;  // cuBLASLt's first algorithms, each timed
constexpr const char* kOurs = "gemm";
constexpr const char* kOursActivated = "gemm+activation";

std::string cublas_candidate_name(size_t rank) { return fmt::format("cublaslt_h{}", rank); }

}  // namespace

std::vector<KernelCandidate> gemm_candidates(const std::string& what, kernels::GemmDesc desc, const GemmBinding& bind,
                                             const std::string& config, int sm_count) {
  desc.split_k = kernels::gemm_split_k(desc, sm_count);
  const bool has_c = bind.c >= 0 || bind.c_fixed != nullptr;
  std::vector<KernelCandidate> candidates;
  {
    KernelCandidate ours;
    ours.name = desc.act != kernels::ParamAct::None ? kOursActivated : kOurs;
    ours.workspace_floats = kernels::gemm_workspace_floats(desc);
    ours.config = ours.workspace_floats > 0 ? fmt::format("{}, K split {} ways", config, desc.split_k) : config;
    const bool split = ours.workspace_floats > 0;
    ours.launch = [desc, bind, split](const float* const* in, float* const* out, Stream s) {
      kernels::launch_gemm(bind.a_of(in), bind.b_of(in), bind.c_of(in), out[0], desc, s,
                           split ? const_cast<float*>(in[bind.workspace]) : nullptr);
    };
    candidates.push_back(std::move(ours));
  }
  std::vector<std::shared_ptr<const kernels::CublasGemm>> algos;
  try {
    algos = kernels::CublasGemm::algorithms(desc, has_c, kCublasCandidates);
  } catch (const std::runtime_error& e) {
    log().warn("{}: {}; cuBLASLt not offered", what, e.what());
  }
  for (size_t i = 0; i < algos.size(); ++i) {
    KernelCandidate c;
    c.name = cublas_candidate_name(i);
    const bool act_pass = desc.act != kernels::ParamAct::None && desc.act != kernels::ParamAct::Relu;
    c.config = fmt::format("{}, cuBLASLt's algorithm {} by its heuristic{}", config, i,
                           act_pass ? ", then the activation" : "");
    c.workspace_floats = static_cast<int64_t>(kernels::CublasGemm::kWorkspaceBytes / 4);
    c.launch = [algo = algos[i], bind](const float* const* in, float* const* out, Stream s) {
      algo->launch(bind.a_of(in), bind.b_of(in), bind.c_of(in), out[0], const_cast<float*>(in[bind.workspace]), s);
    };
    candidates.push_back(std::move(c));
  }
  return candidates;
}

namespace {

// One product as a step: inputs A, B (and C when has_c), then the chosen kernel's workspace (ours: K split over
// the device's SMs where the tiles alone would leave them idle; cuBLASLt's: its scratch).
void add_gemm_step(LowerContext& lc, const ir::Node& node, const std::string& config, kernels::GemmDesc desc,
                   bool has_c) {
  const size_t operands = has_c ? 3u : 2u;
  GemmBinding bind;
  bind.c = has_c ? 2 : -1;
  bind.workspace = static_cast<int>(operands);
  std::vector<KernelCandidate> candidates =
      gemm_candidates(node.name, desc, bind, config, lc.context.device.sm_count);
  candidates[0].reference = true;  // checked against the CPU reference by the GPU tests; the oracle of the others here
  candidates[0].contender = true;

  TuneShapes shapes;
  for (size_t i = 0; i < operands; ++i) shapes.input_floats.push_back(ir::numel(input_shape(lc, node, i)));
  shapes.output_floats = ir::numel(output_shape(lc, node));
  std::string batch;
  for (int axis = 0; axis < desc.batch_rank; ++axis) {
    batch += fmt::format(" {}:{}/{}", desc.batch_dims[axis], desc.a_batch_strides[axis], desc.b_batch_strides[axis]);
  }
  const std::string signature = fmt::format(
      "gemm m={} n={} k={} ta={} lda={} tb={} ldb={} alpha={} beta={} c={} cs={}x{} act={} a={} b={} batch{}", desc.m,
      desc.n, desc.k, desc.trans_a, desc.lda, desc.trans_b, desc.ldb, desc.alpha, desc.beta, has_c, desc.c_row_stride,
      desc.c_col_stride, static_cast<int>(desc.act), desc.act_alpha, desc.act_beta, batch);
  const Choice choice = choose_kernel(lc, signature, candidates, shapes);
  const KernelCandidate& chosen = candidates[choice.index];
  std::vector<int> inputs;
  for (size_t i = 0; i < operands; ++i) inputs.push_back(lc.slot(node.input(i)));
  if (chosen.workspace_floats > 0) inputs.push_back(lc.workspace(chosen.workspace_floats * 4, "gemm workspace"));
  Step& step = lc.add_step(node, chosen.name, chosen.config + ", " + choice.how, inputs, output_slots(lc, node),
                           chosen.launch);
  step.candidates = choice.timings;
  const double products = double(shapes.output_floats);
  step.flops = 2.0 * products * double(desc.k);
  step.min_bytes = 4.0 * (double(shapes.input_floats[0]) + double(shapes.input_floats[1]) + products);
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
  add_gemm_step(lc, node, fmt::format("{}x{}x{}{}", desc.m, desc.n, desc.k, has_c ? " +C" : ""), desc, has_c);
}

void lower_matmul(const ir::Node& node, LowerContext& lc) {
  const ir::Shape& a = input_shape(lc, node, 0);
  const ir::Shape& b = input_shape(lc, node, 1);
  require_rank_at_most(a, kernels::kMaxRank, "MatMul operand");
  require_rank_at_most(b, kernels::kMaxRank, "MatMul operand");
  const kernels::GemmDesc desc =
      kernels::matmul_desc(static_cast<int>(a.size()), a.data(), static_cast<int>(b.size()), b.data());
  add_gemm_step(lc, node, fmt::format("{}x{}x{} batch rank {}", desc.m, desc.n, desc.k, desc.batch_rank), desc, false);
}

}  // namespace

std::vector<std::string> gemm_kernel_names() {
  std::vector<std::string> names{kOurs, kOursActivated};
  for (size_t i = 0; i < kCublasCandidates; ++i) names.push_back(cublas_candidate_name(i));
  return names;
}

std::vector<LoweringEntry> matrix_lowerings() {
  return {{"Gemm", lower_gemm}, {"FusedGemm", lower_gemm}, {"MatMul", lower_matmul}};
}

}  // namespace cnnrt::plan
