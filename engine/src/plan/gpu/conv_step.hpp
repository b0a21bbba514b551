// What the lowering of a convolution node (Conv, FusedConv) knows about it before any kernel is chosen:
// the geometry, the fused epilogue and the tuning signature. lower_window.cpp builds the candidates from
// it; lower_chain.cpp reads it for the chain kernel.
#pragma once

#include <string>

#include "kernels/conv2d_direct.cuh"
#include "kernels/conv_common.cuh"
#include "kernels/elementwise.cuh"
#include "kernels/pool.cuh"
#include "plan/gpu/planner.hpp"

namespace cnnrt::plan {

// Everything about one convolution step that the candidates share.
struct ConvStep {
  kernels::ConvGeometry g;
  kernels::Conv2dDesc direct;      // the reference kernel's view of the same layer
  kernels::Epilogue epilogue;      // bias, activation, pooling (residual pointer set at launch)
  bool has_residual = false;
  bool has_activation = false;
  kernels::UnaryOp act_op{};
  kernels::UnaryParams act_params;
  kernels::Pool2dDesc pool;        // the reference's separate pooling launch
  int64_t conv_floats = 0;         // elements of the pre-pool conv output
  int64_t out_floats = 0;
  std::string signature;
};

// Describes `node`; throws Unsupported (naming what) for what no GPU kernel runs.
ConvStep describe_conv(const ir::Node& node, LowerContext& lc);

// The kernels' runtime activation for a fused node's "activation" attribute ("" -> None).
kernels::ParamAct param_act(const std::string& act);

}  // namespace cnnrt::plan
