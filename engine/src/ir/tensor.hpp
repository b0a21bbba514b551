// Shapes and host tensors: weights, folded constants, and the CPU backend's activations.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/dtype.hpp"

namespace cnnrt::ir {

using Shape = std::vector<int64_t>;

// Number of elements; throws InvalidModel when a dim is negative or the product overflows int64.
int64_t numel(const Shape& shape);
// "1x3x224x224"; "scalar" for rank 0.
std::string shape_str(const Shape& shape);
// Row-major strides in elements.
Shape contiguous_strides(const Shape& shape);

// A dense row-major tensor of float32 or int64 in host memory.
class HostTensor {
 public:
  HostTensor() = default;
  HostTensor(DType dtype, Shape shape);  // zero-filled
  static HostTensor floats(Shape shape, std::vector<float> values);
  static HostTensor ints(Shape shape, std::vector<int64_t> values);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return numel_; }
  bool empty() const { return dtype_ == DType::Undefined; }

  float* f32() { return f32_.data(); }
  const float* f32() const { return f32_.data(); }
  int64_t* i64() { return i64_.data(); }
  const int64_t* i64() const { return i64_.data(); }
  const std::vector<float>& float_values() const { return f32_; }
  const std::vector<int64_t>& int_values() const { return i64_; }

  // Same data, another shape with the same element count.
  void reshape(Shape shape);
  // Element i as int64 (float values are truncated): for reading shape-like constants of either type.
  int64_t int_at(int64_t i) const;
  double value_at(int64_t i) const;

 private:
  DType dtype_ = DType::Undefined;
  Shape shape_;
  int64_t numel_ = 0;
  std::vector<float> f32_;
  std::vector<int64_t> i64_;
};

}  // namespace cnnrt::ir
