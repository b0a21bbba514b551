#include "ir/tensor.hpp"

#include <fmt/format.h>

#include <limits>

#include "core/error.hpp"

namespace cnnrt::ir {

std::string dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Undefined: return "undefined";
    case DType::Float32: return "float32";
    case DType::UInt8: return "uint8";
    case DType::Int8: return "int8";
    case DType::UInt16: return "uint16";
    case DType::Int16: return "int16";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::String: return "string";
    case DType::Bool: return "bool";
    case DType::Float16: return "float16";
    case DType::Float64: return "float64";
    case DType::UInt32: return "uint32";
    case DType::UInt64: return "uint64";
    case DType::Complex64: return "complex64";
    case DType::Complex128: return "complex128";
    case DType::BFloat16: return "bfloat16";
  }
  // Types ONNX added after the enum above, named as onnx_pb.h does: float8 (IR 9, opset 19 type lists) and
  // 4-bit integers (IR 10, opset 21). cnnrt computes with none of them; only messages name them.
  switch (static_cast<int>(dtype)) {
    case 17: return "float8e4m3fn";
    case 18: return "float8e4m3fnuz";
    case 19: return "float8e5m2";
    case 20: return "float8e5m2fnuz";
    case 21: return "uint4";
    case 22: return "int4";
    default: return fmt::format("dtype {}", static_cast<int>(dtype));
  }
}

int64_t numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    CNNRT_CHECK(d >= 0, ErrorCode::InvalidModel, "negative dimension {} in shape {}", d, shape_str(shape));
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) {
      fail(ErrorCode::InvalidModel, "shape {} has more elements than int64 can count", shape_str(shape));
    }
    n *= d;
  }
  return n;
}

std::string shape_str(const Shape& shape) {
  if (shape.empty()) return "scalar";
  return fmt::format("{}", fmt::join(shape, "x"));
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

HostTensor::HostTensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  numel_ = ir::numel(shape_);
  if (dtype_ == DType::Float32) {
    f32_.assign(static_cast<size_t>(numel_), 0.0f);
  } else if (dtype_ == DType::Int64) {
    i64_.assign(static_cast<size_t>(numel_), 0);
  } else {
    fail(ErrorCode::Unsupported, "tensors of type {} are not supported (cnnrt computes in float32, with "
         "int64 for shapes and indices)", dtype_name(dtype_));
  }
}

HostTensor HostTensor::floats(Shape shape, std::vector<float> values) {
  HostTensor t;
  t.dtype_ = DType::Float32;
  t.shape_ = std::move(shape);
  t.numel_ = ir::numel(t.shape_);
  CNNRT_CHECK(static_cast<int64_t>(values.size()) == t.numel_, ErrorCode::Internal,
              "HostTensor::floats: {} values for shape {}", values.size(), shape_str(t.shape_));
  t.f32_ = std::move(values);
  return t;
}

HostTensor HostTensor::ints(Shape shape, std::vector<int64_t> values) {
  HostTensor t;
  t.dtype_ = DType::Int64;
  t.shape_ = std::move(shape);
  t.numel_ = ir::numel(t.shape_);
  CNNRT_CHECK(static_cast<int64_t>(values.size()) == t.numel_, ErrorCode::Internal,
              "HostTensor::ints: {} values for shape {}", values.size(), shape_str(t.shape_));
  t.i64_ = std::move(values);
  return t;
}

void HostTensor::reshape(Shape shape) {
  CNNRT_CHECK(ir::numel(shape) == numel_, ErrorCode::Internal, "reshape {} -> {} changes the element count",
              shape_str(shape_), shape_str(shape));
  shape_ = std::move(shape);
}

int64_t HostTensor::int_at(int64_t i) const {
  return dtype_ == DType::Int64 ? i64_[static_cast<size_t>(i)] : static_cast<int64_t>(f32_[static_cast<size_t>(i)]);
}

double HostTensor::value_at(int64_t i) const {
  return dtype_ == DType::Int64 ? static_cast<double>(i64_[static_cast<size_t>(i)]) : f32_[static_cast<size_t>(i)];
}

}  // namespace cnnrt::ir
