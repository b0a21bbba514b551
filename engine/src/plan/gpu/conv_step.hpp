// What the lowering of a convolution node (Conv, FusedConv) knows about it before any kernel is chosen: the
// layer (kernels/layer.hpp: geometry and fused epilogue) and the tuning signature. lower_window.cpp offers it
// to the kernel registry; lower_chain.cpp reads it for the one-launch chain kernel.
#pragma once

#include <string>
#include <vector>

#include "kernels/conv_registry.hpp"
#include "ir/fused.hpp"
#include "kernels/layer.hpp"
#include "plan/gpu/planner.hpp"
#include "plan/gpu/tuner.hpp"

namespace cnnrt::plan {

struct ConvStep {
  kernels::ConvLayer layer;  // e.bias: the device bias (or null); the residual is bound per launch
  std::string signature;     // identifies the layer completely, for the tuning cache
};

// Describes `node`; throws Unsupported (naming what) for what no GPU kernel runs.
ConvStep describe_conv(const ir::Node& node, LowerContext& lc);

// The fused activation of a FusedConv or FusedGemm in the kernels' terms (ParamAct::None when it has none):
// the one place where an activation's name becomes the kernels' enum.
struct KernelActivation {
  kernels::ParamAct act = kernels::ParamAct::None;
  float alpha = 0.0f, beta = 0.0f;  // LeakyRelu slope; Clip min and max
};
KernelActivation kernel_activation(const ir::Node& fused);
// The same for an activation node's (ir::fused::activation_of).
KernelActivation kernel_activation(const ir::fused::Activation& activation);

// A MaxPool or AveragePool node's window over its input map [channels, H, W] (a 1-D pool: H = 1).
struct PoolWindow {
  int channels = 1, H = 1, W = 1;
  kernels::PoolGeometry pool;  // kind, window, padding, output extents (PH, PW)
};
PoolWindow describe_pool(const ir::Node& node, LowerContext& lc);

// Every registry variant that runs `L` (weights [F][C / groups][KH][KW] on the host and the device, the bias on the
// host or null) as planner candidates: input 0 x, then the residual, then the variant's workspace; a pooled layer's
// convolutions also without the pool, followed by the pooling launch. Families that decline append why to `rejected`.
std::vector<KernelCandidate> conv_kernel_candidates(const kernels::ConvLayer& L, const float* w_host,
                                                   const float* bias_host, const float* w_device, LowerContext& lc,
                                                   std::vector<std::string>* rejected = nullptr);

// What the kernel families may use on the plan's device.
kernels::DeviceCaps device_caps(const gpu::DeviceInfo& device);

}  // namespace cnnrt::plan
