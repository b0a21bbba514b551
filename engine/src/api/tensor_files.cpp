#include "cnnrt/cnnrt.hpp"
#include "onnx/tensor_proto.hpp"

namespace cnnrt {

Tensor read_tensor_file(const std::string& path, std::string* name) {
  const ir::HostTensor t = onnx_io::read_tensor_file(path, name);
  Tensor out;
  out.shape = t.shape();
  if (t.dtype() == ir::DType::Float32) {
    out.data = t.float_values();
  } else {
    out.data.reserve(t.int_values().size());
    for (int64_t v : t.int_values()) out.data.push_back(static_cast<float>(v));
  }
  return out;
}

void write_tensor_file(const std::string& path, const Tensor& tensor, const std::string& name) {
  onnx_io::write_tensor_file(path, ir::HostTensor::floats(tensor.shape, tensor.data), name);
}

}  // namespace cnnrt
