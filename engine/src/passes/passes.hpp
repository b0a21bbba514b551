// Entry points of the individual passes (one .cpp each in this folder); see pass_list.inc for the order.
// Each rewrites a bound graph in place and appends one line to `log` per rewrite, naming the nodes.
#pragma once

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

}  // namespace cnnrt::passes
