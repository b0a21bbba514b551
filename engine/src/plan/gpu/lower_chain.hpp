// Fusion across nodes decided by measurement: the one-launch chain kernel (kernels/conv_chain.cuh) as an
// alternative to a LeNet-class chain's steps, the dense chain kernel to a dense head's, the squeeze-excitation
// kernel to a gate's, the depthwise + pointwise kernel to a MobileNet pair's, the inverted residual block kernel
// to a whole block's. The planner decides it here, in one place, before anything reaches the plan.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kernels/mbconv.cuh"
#include "passes/chain_match.hpp"
#include "plan/gpu/planner.hpp"
#include "plan/gpu/tuner.hpp"

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
// How many of the dense head's first layers the dense chain kernel can run here with what comes before them (its
// shared memory holds the later layers' weights in one block): all of them where it cannot run the head at all (the
// lowering then says why), else the most that fit, at least one after a pool.
size_t dense_chain_layers_that_fit(const passes::DenseChainMatch& match, const LowerContext& lc);

// The steps the plan gets for a squeeze-and-excitation gate `match` (its four nodes lowered one by one in
// `steps`): one launch of the gate kernel where a variant of it measures faster than the steps, else `steps`.
std::vector<Step> lower_squeeze_excite(const passes::SqueezeExciteMatch& match, std::vector<Step> steps, LowerContext& lc);

// The steps the plan gets for a depthwise + pointwise pair `match` (its two convolutions lowered one by one in
// `steps`): one launch of the pair kernel where a tile of it measures faster than the steps, else `steps`. With
// `shuffle` (ShuffleNet's unit) the kernel reads the Transpose's input through the channel shuffle, and `steps` are
// the shuffled depthwise convolution's steps and the pointwise convolution's.
std::vector<Step> lower_dw_pw(const passes::DwPwMatch& match, std::vector<Step> steps, LowerContext& lc,
                              const passes::ShuffledDepthwiseMatch* shuffle = nullptr);

// The steps the plan gets for convolutions of one input concatenated along the channels (`match`): `steps` are
// the convolutions lowered one by one, then the Concat's step unless it runs in place (its inputs written into
// their blocks of its output, at batch 1: no step). Where the filters line up (SiblingConvsMatch), one convolution of
// all of them (the smaller filters zero-padded to the largest, centred as their paddings say) is offered with every
// registry kernel against those steps replayed, and the faster wins; not where the zero taps add more than 100 MFLOP
// (about 2 us of a GPU's FP32 peak: a step's fixed cost).
std::vector<Step> lower_sibling_convs(const passes::SiblingConvsMatch& match, std::vector<Step> steps,
                                      bool concat_in_place, LowerContext& lc);

// The steps the plan gets for a convolution (or sibling convolutions concatenated, merged as lower_sibling_convs
// merges them) and the 1x1 convolution that alone reads it (`match`; `steps` are its nodes lowered one by one, the
// siblings and their Concat as the plan would run them): one launch of the fused kernel (kernels/conv_pw.cuh)
// where it measures faster than the steps replayed, else `steps`.
std::vector<Step> lower_conv_pointwise(const passes::ConvPointwiseMatch& match, std::vector<Step> steps,
                                       bool concat_in_place, LowerContext& lc);

// The steps the plan gets for a channel shuffle and the depthwise convolution after it (`match`; `steps` are the
// Transpose's copy and the convolution, lowered one by one): the convolution reading its input through the
// shuffle (kernels::InputPrologue), with every registry kernel that does, where one measures faster than the two
// steps replayed; else `steps`.
std::vector<Step> lower_shuffled_depthwise(const passes::ShuffledDepthwiseMatch& match, std::vector<Step> steps,
                                           LowerContext& lc);

// The steps the plan gets for a BatchNormalization (and its activation) and the convolution after it (`match`;
// `steps` are the two, lowered one by one): the convolution reading its input through the affine and activation
// (kernels::InputPrologue), with every registry kernel that does, where one measures faster than the two steps
// replayed; else `steps`.
std::vector<Step> lower_affine_conv(const passes::AffineConvMatch& match, std::vector<Step> steps, LowerContext& lc);

// The steps the plan gets for DenseNet's bottleneck layer `match` (BatchNormalization, 1x1 and 3x3 convolutions;
// `steps` are the normalization read by the 1x1 convolution, as lower_affine_conv left them, and the 3x3): one
// launch of the dense layer kernel (kernels/dense_layer.cuh) where a tile of it measures faster than those steps,
// else `steps`.
std::vector<Step> lower_dense_layer(const passes::DenseLayerMatch& match, std::vector<Step> steps, LowerContext& lc);

// An inverted residual block the plan runs as one step of the block kernel: what a chain of them is made of.
struct BlockStep {
  kernels::MbconvDesc desc;
  std::string signature;
  int x_slot = -1, residual_slot = -1, out_slot = -1;  // residual_slot -1: none
};

// The steps the plan gets for an inverted residual block `match` (its nodes lowered in `steps`, with whatever
// fusions the pair and gate kernels won inside it): one launch of the block kernel where a variant of it measures
// faster than those steps, else `steps`. Where the kernel wins, the block is added to `chosen`.
std::vector<Step> lower_inverted_residual(const passes::InvertedResidualMatch& match, std::vector<Step> steps,
                                          LowerContext& lc, std::vector<BlockStep>& chosen);

// Consecutive steps of the block kernel in `plan` (those in `blocks`), offered as chains of blocks in one launch
// (kernels/mbconv.cuh) against those steps replayed; each run of them becomes one step where that measures faster.
void offer_block_chains(const std::vector<BlockStep>& blocks, LowerContext& lc, GpuPlan& plan);

// What the fused kernels' lowerings (here and lower_net.cpp) share.

// Per slot that lies inside another (a block of an in-place Concat): that buffer's slot and the byte offset.
using SlotAliases = std::map<int, std::pair<int, int64_t>>;

// Where the slots of a fused candidate live in a tuning run: among the candidate's inputs (in[0 .. inputs()), the
// buffers `in_slots`), its output (out[0], slot `out_slot`), the constants, or the workspace (in[inputs()]) that holds
// every other arena slot, a 256-byte aligned region each; a slot of `aliases` inside its buffer.
class TuningLayout {
 public:
  struct Ref {
    enum Kind { Input, Output, Fixed, Workspace } kind = Fixed;
    const float* pointer = nullptr;  // Fixed
    int64_t offset = 0;              // floats into the input, output or workspace
    size_t input = 0;                // Input: which
  };
  TuningLayout(std::vector<int> in_slots, int out_slot, const SlotAliases* aliases, LowerContext& lc);
  Ref ref(int slot);  // places the slot's buffer in the workspace on first sight
  size_t inputs() const { return in_slots_.size(); }
  int64_t workspace_floats() const { return workspace_; }
  // The address of `r` in a tuning launch with `n_in` inputs (then the workspace) and the output `out[0]`.
  static float* resolve(const Ref& r, const float* const* in, size_t n_in, float* const* out);

 private:
  std::vector<int> in_slots_;
  int out_slot_;
  const SlotAliases* aliases_;
  LowerContext& lc_;
  std::map<int, int64_t> regions_;
  int64_t workspace_ = 0;
};

// `steps` launched back to back over the tuning run's buffers as `layout` places them (which it extends).
LaunchFn replay_launch(const std::vector<Step>& steps, TuningLayout& layout);

// The steps a fused kernel replaces, replayed with their intermediates in one workspace: the reference candidate
// ("separate_steps", a contender). Its inputs are the slots `in_slots`, then the workspace; out[0] is `out_slot`.
KernelCandidate replay_candidate(const std::vector<Step>& steps, const std::vector<int>& in_slots, int out_slot,
                                 LowerContext& lc, const SlotAliases* aliases = nullptr);

// How a choice was made, for the plan's notes: every candidate's time, fastest first, or how it was chosen.
std::string timing_text(const Choice& choice);

// Gemm's B as [N][K] with alpha folded in, and beta * C as [N] (empty when there is no C).
struct DenseWeights {
  int64_t n = 0, k = 0;
  std::vector<float> w, bias;
};
DenseWeights dense_weights(const ir::Node& gemm, const ir::Graph& g);

}  // namespace cnnrt::plan
