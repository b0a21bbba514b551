// Offers the last layers of a network to the network kernel (kernels/net.cuh) and the sequence kernel
// (kernels/seqnet.cuh): one launch in place of their steps, where it measures faster.
#pragma once

#include <cstddef>
#include <vector>

#include "plan/gpu/lower_chain.hpp"
#include "plan/gpu/planner.hpp"

namespace cnnrt::plan {

// What the planner knows about its step list once every node is lowered (before the output copies).
struct NetOffer {
  std::vector<int> nodes;        // the nodes that compute (not views, not in-place Concats), in plan order
  std::vector<size_t> step_at;   // per graph node: how many steps the plan had when its turn came
  std::vector<bool> clean_cut;   // per graph node: no node from it on was lowered before its turn (fused
                                 // with an earlier one), so the steps from step_at on are exactly its and later nodes'
  SlotAliases aliases;           // the blocks of in-place Concats
};

// Where the network kernel (batch <= kernels::kNetMaxBatch, compute capability 9.0) or the sequence kernel
// (kernels/seqnet.cuh: batch <= kernels::kSeqMaxBatch, layers whose activations fit in shared memory)
// runs the nodes from some cut on (every node from the cut on of a kind it runs) and one of their variants, with
// the steps before the cut, measures faster than the steps, the plan's steps from the cut on become one step. A
// note says what was measured.
void offer_net_kernel(const NetOffer& offer, LowerContext& lc, GpuPlan& plan);

}  // namespace cnnrt::plan
