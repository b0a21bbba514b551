// ONNX TensorProto <-> HostTensor. Every length is checked against the dims before anything is allocated,
// so a hostile file cannot make us allocate what it only declares.
#pragma once

#include <cstdint>
#include <string>

#include "ir/tensor.hpp"

namespace onnx {
class TensorProto;
}

namespace cnnrt::onnx_io {

struct TensorSource {
  std::string what;           // "initializer 'conv1.weight'", for messages
  std::string model_dir;      // folder that external data paths are relative to; "" = not allowed
  int64_t max_bytes = INT64_MAX;  // refuse (LimitExceeded) a tensor whose data would be larger
};

// Decodes raw_data, typed fields or external data. float32 stays float32; integer and bool types widen to
// int64 (cnnrt computes shapes and indices in int64); other types are Unsupported.
ir::HostTensor decode_tensor(const onnx::TensorProto& proto, const TensorSource& source);

// The element type and dims only (checked like decode_tensor), without reading the data.
ir::DType tensor_dtype(const onnx::TensorProto& proto);

// Reads a serialized TensorProto file (the ONNX test-data layout's input_K.pb / output_K.pb).
ir::HostTensor read_tensor_file(const std::string& path, std::string* name = nullptr);
// Writes a float32 or int64 tensor as a serialized TensorProto with raw_data.
void write_tensor_file(const std::string& path, const ir::HostTensor& tensor, const std::string& name);

}  // namespace cnnrt::onnx_io
