// cnnrt's fused ops, written only by the graph passes (never read from a model file), and the names of
// their attributes. The GPU lowering (plan/gpu/lower_window.cpp, lower_matrix.cpp), the CPU reference
// (cpu/fused.cpp) and shape inference (ir/ops_fused.cpp) all read them through these constants.
//
// All are in domain "cnnrt" (kDomain) and keep the name and ONNX index of the node they extend.
// FusedConv   inputs X, W, B (optional), residual (optional, input 3, exactly the conv output's shape)
//             attributes: Conv's canonical ones (kernel_shape, strides, dilations, pads, group), then
//               activation   "" (none), "Relu", "LeakyRelu", "Clip", "Sigmoid", "Tanh", "HardSigmoid",
//                            "HardSwish", "Swish", "Gelu" (exact)
//               alpha, beta  LeakyRelu slope and Swish's alpha in alpha; Clip min, max and HardSigmoid alpha,
//                            beta in alpha, beta
//               pool         "" (none), "MaxPool", "AveragePool"; with it pool_kernel_shape, pool_strides,
//                            pool_pads (begins then ends), pool_ceil_mode, pool_dilations (MaxPool only),
//                            pool_count_include_pad (AveragePool only), all explicit
//             epilogue order: conv + bias, + residual, activation, pooling. A residual and a pool are never
//             combined (the kernels' Epilogue forbids it).
// FusedGemm   inputs A, B, optional C: exactly Gemm (alpha, beta, transA, transB), then
//               activation   as for FusedConv, its parameters in alpha_act, beta_act (alpha/beta are Gemm's)
// FusedConvTranspose  inputs X, W, optional B: exactly ConvTranspose's canonical form, then
//               activation, alpha, beta   as for FusedConv (epilogue: + bias, activation)
// FusedBatchNormalization  inputs X, scale, B, mean, var: exactly inference BatchNormalization (epsilon), then
//               activation, alpha, beta   as for FusedConv
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "ir/graph.hpp"

namespace cnnrt::ir::fused {

inline constexpr const char* kDomain = "cnnrt";  // Node::domain of the fused ops
inline constexpr const char* kFusedConv = "FusedConv";
inline constexpr const char* kFusedGemm = "FusedGemm";
inline constexpr const char* kFusedConvTranspose = "FusedConvTranspose";
inline constexpr const char* kFusedBatchNorm = "FusedBatchNormalization";

inline constexpr size_t kResidualInput = 3;  // FusedConv input slot of the residual operand

inline constexpr const char* kActivation = "activation";
inline constexpr const char* kConvActAlpha = "alpha";
inline constexpr const char* kConvActBeta = "beta";
inline constexpr const char* kGemmActAlpha = "alpha_act";
inline constexpr const char* kGemmActBeta = "beta_act";

inline constexpr const char* kPool = "pool";
inline constexpr const char* kPoolKernelShape = "pool_kernel_shape";
inline constexpr const char* kPoolStrides = "pool_strides";
inline constexpr const char* kPoolPads = "pool_pads";
inline constexpr const char* kPoolDilations = "pool_dilations";
inline constexpr const char* kPoolCeilMode = "pool_ceil_mode";
inline constexpr const char* kPoolCountIncludePad = "pool_count_include_pad";

// An elementwise activation a fused node can apply: the op of a canonical activation node and its parameters.
struct Activation {
  std::string op;      // "Relu", "LeakyRelu", "Clip", "Sigmoid", "Tanh"
  float alpha = 0.0f;  // LeakyRelu slope; Clip min
  float beta = 0.0f;   // Clip max
};

// Turns `node` (a copy of the op it extends) into fused op `op` (kFusedConv, kFusedGemm, kFusedConvTranspose,
// kFusedBatchNorm) in cnnrt's domain.
void make_fused(Node& node, const char* op);

// The activation a canonical node computes, when it is one the fused ops can apply; nullopt otherwise.
std::optional<Activation> activation_of(const Node& node);

// The activation a fused node applies (attribute names per op, see above); nullopt when it has none.
std::optional<Activation> fused_activation(const Node& fused);
// Writes the activation attributes of a FusedConv or FusedGemm.
void set_fused_activation(Node& fused, const Activation& activation);

// A standalone canonical node computing `activation` (for the CPU reference, which runs the ordinary kernel).
Node activation_node(const Activation& activation);

// True when the FusedConv pools; pool_attributes then gives the pooling as an ordinary MaxPool/AveragePool
// node's canonical attributes, and set_pool writes them from such a node.
bool has_pool(const Node& fused);
Attributes pool_attributes(const Node& fused);
// `pool` is a canonical MaxPool or AveragePool node.
void set_pool(Node& fused, const Node& pool);

}  // namespace cnnrt::ir::fused
