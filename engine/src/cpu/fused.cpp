// Fused kernels (FusedConv, FusedGemm, FusedConvTranspose, FusedBatchNormalization; conventions in ir/fused.hpp)
// as the unfused reference kernels run one after the other, in the epilogue order of the GPU kernels: conv +
// bias, + residual, activation, pool.
// Each stage rounds to float32 as the unfused graph does, so fusion changes nothing on the CPU.
#include "cpu/kernel_util.hpp"
#include "ir/fused.hpp"

namespace cnnrt::cpu {
namespace {

using ir::HostTensor;

void run_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  const KernelFn kernel = find_kernel(node.op);
  CNNRT_CHECK(kernel != nullptr, ErrorCode::Internal, "the CPU backend has no kernel for {}", node.op);
  kernel(node, in, out);
}

// Applies the fused node's activation to `values` in place.
void apply_activation(const ir::Node& fused, HostTensor& values) {
  const std::optional<ir::fused::Activation> activation = ir::fused::fused_activation(fused);
  if (!activation) return;
  Outputs out{&values};
  run_kernel(ir::fused::activation_node(*activation), {&values}, out);
}

// The conv output's shape [N, F, spatial...] from the canonical window attributes (before pooling).
ir::Shape conv_output_shape(const ir::Node& fused, const HostTensor& x, const HostTensor& w) {
  const ir::Shape spatial(x.shape().begin() + 2, x.shape().end());
  const std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
  ir::Shape shape{x.shape()[0], w.shape()[0]};
  for (const ir::WindowAxis& axis : ir::resolve_window(fused.attrs, spatial, kernel, false)) {
    shape.push_back(axis.output);
  }
  return shape;
}

// Inputs X, W, B (or nullptr), residual (or nullptr / absent).
void fused_conv_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  const bool pooled = ir::fused::has_pool(node);
  HostTensor pre_pool;
  HostTensor& conv_out = pooled ? pre_pool : *out[0];
  if (pooled) pre_pool = HostTensor(ir::DType::Float32, conv_output_shape(node, *in[0], *in[1]));

  ir::Node conv = node;  // Conv's kernel reads the window attributes the fused node shares with it
  conv.op = "Conv";
  Outputs conv_outputs{&conv_out};
  run_kernel(conv, {in[0], in[1], in.size() > 2 ? in[2] : nullptr}, conv_outputs);

  const HostTensor* residual = in.size() > ir::fused::kResidualInput ? in[ir::fused::kResidualInput] : nullptr;
  if (residual != nullptr) {
    ir::Node add;
    add.op = "Add";
    run_kernel(add, {&conv_out, residual}, conv_outputs);
  }
  apply_activation(node, conv_out);
  if (pooled) {
    ir::Node pool;
    pool.op = node.attrs.get_string(ir::fused::kPool, "");
    pool.attrs = ir::fused::pool_attributes(node);
    run_kernel(pool, {&pre_pool}, out);
  }
}

// Inputs A, B, C (or nullptr): Gemm, then the activation.
void fused_gemm_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  ir::Node gemm = node;  // alpha, beta, transA, transB are Gemm's own
  gemm.op = "Gemm";
  run_kernel(gemm, in, out);
  apply_activation(node, *out[0]);
}

// Inputs X, W, B (or nullptr): ConvTranspose, then the activation.
void fused_conv_transpose_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  ir::Node conv = node;  // the window attributes are ConvTranspose's own
  conv.op = "ConvTranspose";
  run_kernel(conv, in, out);
  apply_activation(node, *out[0]);
}

// Inputs X, scale, B, mean, var: BatchNormalization, then the activation.
void fused_batchnorm_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  ir::Node bn = node;  // epsilon is BatchNormalization's own
  bn.op = "BatchNormalization";
  run_kernel(bn, in, out);
  apply_activation(node, *out[0]);
}

}  // namespace

void add_fused_kernels(KernelTable& table) {
  table.insert(table.end(), {
      {ir::fused::kFusedConv, fused_conv_kernel},
      {ir::fused::kFusedGemm, fused_gemm_kernel},
      {ir::fused::kFusedConvTranspose, fused_conv_transpose_kernel},
      {ir::fused::kFusedBatchNorm, fused_batchnorm_kernel},
  });
}

}  // namespace cnnrt::cpu
