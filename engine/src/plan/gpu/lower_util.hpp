// Helpers shared by the lowering functions (one file per op family: lower_*.cpp).
#pragma once

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <string>
#include <vector>

#include "core/error.hpp"
#include "ir/graph.hpp"
#include "kernels/gemm.cuh"
#include "plan/gpu/planner.hpp"
#include "plan/gpu/tuner.hpp"

namespace cnnrt::plan {

inline const ir::Shape& input_shape(const LowerContext& lc, const ir::Node& node, size_t i) {
  return lc.graph.shape_of(node.input(i));
}
inline const ir::Shape& output_shape(const LowerContext& lc, const ir::Node& node) {
  return lc.graph.shape_of(node.outputs.at(0));
}
inline int64_t product(const ir::Shape& s, size_t from = 0, size_t to = SIZE_MAX) {
  int64_t p = 1;
  for (size_t i = from; i < s.size() && i < to; ++i) p *= s[i];
  return p;
}
// Axis-rank guard for the N-D kernels.
void require_rank_at_most(const ir::Shape& shape, int max_rank, const char* what);

// The step's inputs/outputs as slots: data inputs in order (omitted ones skipped), then the outputs.
// The tuner's choice among `candidates` (measured, cached or forced), or index 0 ("heuristic") without one.
Choice choose_kernel(LowerContext& lc, const std::string& signature, const std::vector<KernelCandidate>& candidates,
                     const TuneShapes& shapes);

// The candidates the tuner measured close to its choice (within 15% + 0.3 us of its time), fastest first, each with
// its time: neither the chosen one nor a reference. None where the choice was not measured.
std::vector<std::pair<const KernelCandidate*, double>> close_candidates(const Choice& choice,
                                                                        const std::vector<KernelCandidate>& candidates);
// Of those, at most two that can run in the chosen one's place (needing no more workspace). The whole plan decides
// among them (runtime::measure_plan_choices): a kernel's time on its own does not say how it runs beside its
// neighbours (a cluster kernel launched while the step before drains, say).
std::vector<StepKernel> close_alternatives(const Choice& choice, const std::vector<KernelCandidate>& candidates);

// Whether `fused`, a candidate of `choice`, measured at most `ratio` times the time of the steps it would replace
// (`separate_steps`): those steps, replayed alone, get none of the whole graph's overlap search and side streams,
// which hide part of each step's launch in the network. True where either was not timed (forced, heuristic).
bool clearly_faster_than_steps(const Choice& choice, const std::string& fused, double ratio);

std::vector<int> input_slots(LowerContext& lc, const ir::Node& node);

// Whether kernels compiled at plan time for a model's shapes (NVRTC) are offered: unless CNNRT_NO_JIT is set
// (and not "0").
bool plan_time_compilation();
// Every kernel name a Gemm, MatMul or FusedGemm step may run under (lower_matrix.cpp), for the kernel-set
// fingerprint.
std::vector<std::string> gemm_kernel_names();
// Where a product's launch finds its operands: A, B and C as inputs of the launch (their indices) or fixed device
// pointers (weights and biases), and the input that is its workspace.
struct GemmBinding {
  int a = 0;
  int b = 1;                      // -1: b_fixed
  const float* b_fixed = nullptr;
  int c = 2;                      // -1: c_fixed (null: no C)
  const float* c_fixed = nullptr;
  int workspace = 3;
  const float* a_of(const float* const* in) const { return in[a]; }
  const float* b_of(const float* const* in) const { return b >= 0 ? in[b] : b_fixed; }
  const float* c_of(const float* const* in) const { return c >= 0 ? in[c] : c_fixed; }
};
// The candidates for one product `desc` (a product with C where `bind` has one): our kernel first ("gemm", or
// "gemm+activation"), then cuBLASLt's first algorithms by its heuristic where it takes the product
// (kernels/gemm_cublas.hpp; where it refuses, a warning naming `what`). `config` describes the product in each
// candidate's configuration.
std::vector<KernelCandidate> gemm_candidates(const std::string& what, kernels::GemmDesc desc, const GemmBinding& bind,
                                             const std::string& config, int sm_count);
// An inference BatchNormalization (or FusedBatchNormalization) as y = x * scale[c] + shift[c]: both uploaded.
struct ChannelAffine {
  const float* scale = nullptr;
  const float* shift = nullptr;
};
ChannelAffine batchnorm_affine(const ir::Node& node, LowerContext& lc);
std::vector<int> output_slots(LowerContext& lc, const ir::Node& node);

// Step with a launch that only needs the stream and the resolved pointers.
inline Step& add_simple_step(LowerContext& lc, const ir::Node& node, const std::string& kernel,
                             const std::string& config, LaunchFn launch) {
  return lc.add_step(node, kernel, config, input_slots(lc, node), output_slots(lc, node), std::move(launch));
}

// Registration of the lowering functions of each family (lowerings.cpp builds the table from these).
struct LoweringEntry {
  const char* op;
  LowerFn fn;
};
std::vector<LoweringEntry> elementwise_lowerings();
std::vector<LoweringEntry> window_lowerings();
std::vector<LoweringEntry> matrix_lowerings();
std::vector<LoweringEntry> movement_lowerings();
std::vector<LoweringEntry> resize_lowerings();
std::vector<LoweringEntry> conv_transpose_lowerings();  // lower_conv_transpose.cpp
std::vector<LoweringEntry> normalization_lowerings();   // lower_normalization.cpp

}  // namespace cnnrt::plan
