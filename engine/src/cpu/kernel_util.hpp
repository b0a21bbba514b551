// Shared pieces of the CPU kernels: the kernel tables of each family, typed access to tensors, and the one
// index walker that broadcasting, Transpose, Slice, Expand and the reductions all use.
#pragma once

#include <string_view>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "cpu/ops.hpp"
#include "ir/window.hpp"

namespace cnnrt::cpu {

using KernelTable = std::vector<std::pair<std::string_view, KernelFn>>;

// Each family file adds its kernels; ops.cpp assembles them.
void add_elementwise_kernels(KernelTable& table);  // elementwise.cpp
void add_window_kernels(KernelTable& table);       // window.cpp
void add_reduce_kernels(KernelTable& table);       // reduce.cpp
void add_matrix_kernels(KernelTable& table);       // matrix.cpp
void add_movement_kernels(KernelTable& table);     // movement.cpp
void add_shape_kernels(KernelTable& table);        // shape_ops.cpp
void add_fused_kernels(KernelTable& table);        // fused.cpp (FusedConv, FusedGemm)
void add_resize_kernels(KernelTable& table);       // resize.cpp

// ---- typed access ------------------------------------------------------------------------------------

template <class T>
T* data_of(ir::HostTensor& tensor);
template <>
inline float* data_of<float>(ir::HostTensor& tensor) { return tensor.f32(); }
template <>
inline int64_t* data_of<int64_t>(ir::HostTensor& tensor) { return tensor.i64(); }

template <class T>
const T* data_of(const ir::HostTensor& tensor);
template <>
inline const float* data_of<float>(const ir::HostTensor& tensor) { return tensor.f32(); }
template <>
inline const int64_t* data_of<int64_t>(const ir::HostTensor& tensor) { return tensor.i64(); }

// Calls fn(T{}) with T the element type of `dtype` (float or int64_t), so that one generic lambda serves both.
template <class Fn>
void dispatch_dtype(ir::DType dtype, Fn&& fn) {
  if (dtype == ir::DType::Float32) {
    fn(float{});
  } else if (dtype == ir::DType::Int64) {
    fn(int64_t{});
  } else {
    fail(ErrorCode::Internal, "CPU kernels compute float32 and int64, not {}", ir::dtype_name(dtype));
  }
}

// ---- index walking -----------------------------------------------------------------------------------

// How an input is read from the output's index space: output element (i0, i1, ...) reads the input at
// offset base + i0 * strides[0] + i1 * strides[1] + ... (offsets in elements).
struct StridedView {
  int64_t base = 0;
  ir::Shape strides;  // one per output axis
};

// numpy broadcasting of `input` to `output`: stride 0 on the axes the input repeats.
StridedView broadcast_view(const ir::Shape& input, const ir::Shape& output);

// Calls visit(out_offset, view_offsets) for every element of `shape` in row-major order, where
// view_offsets[k] is the offset views[k] reads for that element.
template <class Visit>
void for_each_index(const ir::Shape& shape, const std::vector<StridedView>& views, Visit&& visit) {
  const int64_t total = ir::numel(shape);
  const size_t rank = shape.size();
  std::vector<int64_t> index(rank, 0);
  std::vector<int64_t> offsets;
  for (const StridedView& view : views) offsets.push_back(view.base);
  for (int64_t out = 0; out < total; ++out) {
    visit(out, offsets.data());
    // Advance like an odometer: bump the last axis, carrying into earlier ones.
    for (size_t axis = rank; axis-- > 0;) {
      ++index[axis];
      for (size_t k = 0; k < views.size(); ++k) offsets[k] += views[k].strides[axis];
      if (index[axis] < shape[axis]) break;
      for (size_t k = 0; k < views.size(); ++k) offsets[k] -= views[k].strides[axis] * shape[axis];
      index[axis] = 0;
    }
  }
}

// out[i] = in[view offset of i]: Transpose, Slice, Expand.
void copy_through_view(const ir::HostTensor& in, const StridedView& view, ir::HostTensor& out);

// Product of shape[first, last): outer/inner extents around an axis.
int64_t extent_product(const ir::Shape& shape, size_t first, size_t last);

}  // namespace cnnrt::cpu
