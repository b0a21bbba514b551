// Entry points of the individual passes (one .cpp each in this folder); see pass_list.inc for the order.
// Each rewrites a bound graph in place and appends one line to `log` per rewrite, naming the nodes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.hpp"

namespace cnnrt::passes {

void eliminate_identity(ir::Graph& graph, std::vector<std::string>& log);  // eliminate_identity.cpp
void fold_pad(ir::Graph& graph, std::vector<std::string>& log);            // fold_pad.cpp
void fold_batchnorm(ir::Graph& graph, std::vector<std::string>& log);      // fold_batchnorm.cpp
void fold_bias_add(ir::Graph& graph, std::vector<std::string>& log);       // fold_bias_add.cpp
void fuse_composite_activation(ir::Graph& graph, std::vector<std::string>& log);  // fuse_composite_activation.cpp
void fuse_activation(ir::Graph& graph, std::vector<std::string>& log);     // fuse_activation.cpp
void fuse_residual(ir::Graph& graph, std::vector<std::string>& log);       // fuse_residual.cpp
void fuse_pool(ir::Graph& graph, std::vector<std::string>& log);           // fuse_pool.cpp

// The batch up to which a classifier's dense head (a global average pool, views and Gemms) is left whole for
// the GPU planner, which offers it to its one-launch kernel (plan/gpu/lower_chain.cpp): fuse_pool then keeps
// such a pool out of the convolution before it.
constexpr int64_t kDenseHeadMaxBatch = 64;

}  // namespace cnnrt::passes
