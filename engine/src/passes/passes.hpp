// Entry points of the individual passes (one .cpp each in this folder, named as the pass); see pass_list.inc
// for the order.
// Each rewrites a bound graph in place and appends one line to `log` per rewrite, naming the nodes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.hpp"

namespace cnnrt::passes {

// What the backend that runs the graph offers, where a rewrite depends on it.
struct Target {
  // It runs a classifier's dense head (a global average pool, views and Gemms: match_dense_chain in
  // chain_match.hpp) as one launch up to kDenseHeadMaxBatch (the GPU planner's dense chain kernel, on compute
  // capability 9.0): fuse_pool then leaves such a pool out of the convolution before it.
  bool dense_head_kernel = false;
};

void eliminate_identity(ir::Graph& graph, const Target& target, std::vector<std::string>& log);
void fold_pad(ir::Graph& graph, const Target& target, std::vector<std::string>& log);
void fold_batchnorm(ir::Graph& graph, const Target& target, std::vector<std::string>& log);
void fold_bias_add(ir::Graph& graph, const Target& target, std::vector<std::string>& log);
void relu_through_concat(ir::Graph& graph, const Target& target, std::vector<std::string>& log);
void fuse_composite_activation(ir::Graph& graph, const Target& target, std::vector<std::string>& log);
void fuse_activation(ir::Graph& graph, const Target& target, std::vector<std::string>& log);
void fuse_residual(ir::Graph& graph, const Target& target, std::vector<std::string>& log);
void fuse_pool(ir::Graph& graph, const Target& target, std::vector<std::string>& log);

// The batch up to which a classifier's dense head is left whole for a target's dense head kernel (the GPU
// planner's, plan/gpu/lower_chain.cpp, one cluster an image).
constexpr int64_t kDenseHeadMaxBatch = 64;

}  // namespace cnnrt::passes
