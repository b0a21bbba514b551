// The one-launch chain kernel (kernels/conv_chain.cuh) as an alternative to a LeNet-class chain's steps.
#pragma once

#include <cstddef>

#include "plan/conv_chain_match.hpp"
#include "plan/gpu/planner.hpp"

namespace cnnrt::plan {

// The chain's nodes are already lowered, as the steps from `first_step` on. If the chain kernel runs this
// chain, it is measured against those steps (run back to back, the reference its output must match) and
// replaces them when it is faster; otherwise the steps stay. A plan note says which and why.
void offer_conv_chain(const ConvChainMatch& match, size_t first_step, LowerContext& lc);

}  // namespace cnnrt::plan
