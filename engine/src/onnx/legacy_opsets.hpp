// Opset 6 -> opset 7 for the ops cnnrt runs: legacy broadcasting (`broadcast`/`axis` on binary ops and
// Gemm), `is_test`/`spatial`/`consumed_inputs` on BatchNormalization and Dropout. After this a node of an
// opset-6 file means what the same node means at opset 7. PyTorch's old exporter and the pytorch-converted
// conformance suite write opset 6.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.hpp"

namespace cnnrt::onnx_io {

// `declared_input_dims`: declared dims of graph inputs (-1 for symbolic), by value id, used to place a
// legacy `axis` broadcast. Appends an issue when a legacy form cannot be expressed at opset 7.
void upgrade_legacy_node(ir::Node& node, ir::Graph& graph, int64_t file_opset,
                         const std::unordered_map<int, ir::Shape>& declared_input_dims,
                         std::vector<std::string>& issues);

}  // namespace cnnrt::onnx_io
