// ONNX ModelProto -> graph IR. Every check of the model file lives here: that it is a model at all,
// tensor data against dims, names (duplicates, dangling reads), cycles, limits, and which ops, attributes
// and types cnnrt can run. Unsupported things are collected and reported together, in one error.
#pragma once

#include <cstddef>
#include <string>

#include "cnnrt/cnnrt.hpp"
#include "ir/graph.hpp"

namespace cnnrt::onnx_io {

constexpr int64_t kMinOpset = 6;   // opset 6 graphs are upgraded to opset 7 semantics on load
constexpr int64_t kMaxOpset = 21;

// Reads and loads `path`. External tensor data is looked up next to the file.
ir::Graph load_model_file(const std::string& path, const Limits& limits);

// Loads a serialized ModelProto. `name` is used in messages; `model_dir` is where external data may live
// ("" forbids external data).
ir::Graph load_model_bytes(const void* data, std::size_t size, const std::string& name, const std::string& model_dir,
                           const Limits& limits);

}  // namespace cnnrt::onnx_io
