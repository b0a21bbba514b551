// Whole-network fusion: the one-launch chain kernel (kernels/conv_chain.cuh) as an alternative to a LeNet-class
// chain's steps. The planner decides it here, in one place, before anything reaches the plan.
#pragma once

#include <vector>

#include "plan/conv_chain_match.hpp"
#include "plan/gpu/planner.hpp"

namespace cnnrt::plan {

// The steps the plan gets for the chain `match`. `steps` are the chain's nodes lowered one by one (held
// apart from the plan). Where the chain kernel runs this chain, its variants are measured against those
// steps (run back to back: the reference its output must match), and the faster wins: one chain step, or
// `steps` as they are. A plan note says which and why.
std::vector<Step> lower_conv_chain(const ConvChainMatch& match, std::vector<Step> steps, LowerContext& lc);

}  // namespace cnnrt::plan
