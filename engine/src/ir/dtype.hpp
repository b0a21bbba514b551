// Element types, numbered as ONNX's TensorProto.DataType so that conversion is a cast.
#pragma once

#include <cstdint>
#include <string>

namespace cnnrt::ir {

enum class DType : int32_t {
  Undefined = 0,
  Float32 = 1,
  UInt8 = 2,
  Int8 = 3,
  UInt16 = 4,
  Int16 = 5,
  Int32 = 6,
  Int64 = 7,
  String = 8,
  Bool = 9,
  Float16 = 10,
  Float64 = 11,
  UInt32 = 12,
  UInt64 = 13,
  Complex64 = 14,
  Complex128 = 15,
  BFloat16 = 16,
};

// "float32", "int64", ... or "dtype 42" for numbers ONNX may add later.
std::string dtype_name(DType dtype);
// Float32 and Int64 are the types cnnrt computes with (Int64 only for shapes and indices).
inline bool dtype_supported(DType dtype) { return dtype == DType::Float32 || dtype == DType::Int64; }

}  // namespace cnnrt::ir
