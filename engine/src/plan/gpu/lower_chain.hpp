// Fusion across nodes decided by measurement: the one-launch chain kernel (kernels/conv_chain.cuh) as an
// alternative to a LeNet-class chain's steps, the dense chain kernel to a dense head's, the squeeze-excitation
// kernel to a gate's, the depthwise + pointwise kernel to a MobileNet pair's. The planner decides it here, in one
// place, before anything reaches the plan.
#pragma once

#include <vector>

#include "passes/chain_match.hpp"
#include "plan/gpu/planner.hpp"

namespace cnnrt::plan {

// The steps the plan gets for the chain `match`. `steps` are the chain's convolutions and first dense layer
// lowered one by one, `tail_steps` its dense layers after the first (match.tail), both held apart from the
// plan. Where the chain kernel runs this chain, its variants are measured against those steps (run back to
// back: the reference its output must match), and the faster wins: one chain step, or the steps as they
// are; first with the tail, then, where that loses or cannot run, without it. Plan notes say which and why.
std::vector<Step> lower_conv_chain(const passes::ConvChainMatch& match, std::vector<Step> steps, std::vector<Step> tail_steps,
                                   LowerContext& lc);

// The steps the plan gets for a dense head `match` (its layers lowered one by one in `steps`): one launch of
// the dense chain kernel where a cluster size of it measures faster than the steps, else `steps`.
std::vector<Step> lower_dense_chain(const passes::DenseChainMatch& match, std::vector<Step> steps, LowerContext& lc);

// The steps the plan gets for a squeeze-and-excitation gate `match` (its four nodes lowered one by one in
// `steps`): one launch of the gate kernel where a variant of it measures faster than the steps, else `steps`.
std::vector<Step> lower_squeeze_excite(const passes::SqueezeExciteMatch& match, std::vector<Step> steps, LowerContext& lc);

// The steps the plan gets for a depthwise + pointwise pair `match` (its two convolutions lowered one by one in
// `steps`): one launch of the pair kernel where a tile of it measures faster than the steps, else `steps`.
std::vector<Step> lower_dw_pw(const passes::DwPwMatch& match, std::vector<Step> steps, LowerContext& lc);

}  // namespace cnnrt::plan
