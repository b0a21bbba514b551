// Data movement kernels, for float32 activations and int64 constants alike: the views (a copy here),
// Cast, Transpose, Slice, Expand (all through copy_through_view), DepthToSpace, SpaceToDepth, Concat, Split,
// Gather and Pad.
#include <cmath>
#include <limits>
#include <type_traits>

#include "cpu/kernel_util.hpp"
#include "ir/depth_space.hpp"

namespace cnnrt::cpu {
namespace {

using ir::DType;
using ir::HostTensor;

// Identity, Dropout, Reshape, Flatten, Squeeze, Unsqueeze: same elements, new shape.
void copy_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  dispatch_dtype(in[0]->dtype(), [&](auto zero) {
    using T = decltype(zero);
    std::copy(data_of<T>(*in[0]), data_of<T>(*in[0]) + in[0]->numel(), data_of<T>(*out[0]));
  });
}

// float -> int64 truncates toward zero; NaN becomes 0 and out-of-range values saturate (a plain cast would be
// undefined behaviour).
int64_t float_to_int64(float value) {
  if (std::isnan(value)) return 0;
  if (value >= 0x1p63f) return std::numeric_limits<int64_t>::max();
  if (value < -0x1p63f) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(value);
}

void cast_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  const HostTensor& x = *in[0];
  HostTensor& y = *out[0];
  const auto to = static_cast<DType>(node.attrs.get_int("to", 0));
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (to == DType::Bool) {
      y.i64()[i] = x.value_at(i) != 0 ? 1 : 0;
    } else if (to == DType::Int64) {
      y.i64()[i] = x.dtype() == DType::Int64 ? x.i64()[i] : float_to_int64(x.f32()[i]);
    } else {
      y.f32()[i] = static_cast<float>(x.value_at(i));
    }
  }
}

// DepthToSpace, SpaceToDepth: the output in row-major order over the 6-D index space of ir/depth_space.hpp.
void depth_space_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  const ir::BlockRearrangement r = ir::block_rearrangement(node, in[0]->shape());
  StridedView view;
  view.strides = r.in_strides;
  dispatch_dtype(in[0]->dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* src = data_of<T>(*in[0]);
    T* dst = data_of<T>(*out[0]);
    for_each_index(r.dims, {view}, [&](int64_t o, const int64_t* offsets) { dst[o] = src[offsets[0]]; });
  });
}

void transpose_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  const std::vector<int64_t> perm = node.attrs.get_ints("perm");
  const ir::Shape in_strides = ir::contiguous_strides(in[0]->shape());
  StridedView view;
  for (int64_t axis : perm) view.strides.push_back(in_strides[axis]);  // output axis d walks input axis perm[d]
  copy_through_view(*in[0], view, *out[0]);
}

void slice_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  const std::vector<int64_t> starts = node.attrs.get_ints("starts");
  const std::vector<int64_t> steps = node.attrs.get_ints("steps");
  const ir::Shape in_strides = ir::contiguous_strides(in[0]->shape());
  CNNRT_CHECK(starts.size() == in_strides.size() && steps.size() == in_strides.size(), ErrorCode::Internal,
              "Slice starts/steps are not canonical for {}", ir::shape_str(in[0]->shape()));
  StridedView view;
  for (size_t axis = 0; axis < in_strides.size(); ++axis) {
    view.base += starts[axis] * in_strides[axis];
    view.strides.push_back(steps[axis] * in_strides[axis]);
  }
  copy_through_view(*in[0], view, *out[0]);
}

void expand_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  copy_through_view(*in[0], broadcast_view(in[0]->shape(), out[0]->shape()), *out[0]);
}

// Inputs laid side by side along `axis`: each input contributes one block per outer index.
void concat_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  const size_t axis = static_cast<size_t>(node.attrs.get_int("axis", 0));
  const ir::Shape& shape = out[0]->shape();
  const int64_t outer = extent_product(shape, 0, axis);
  const int64_t out_block = extent_product(shape, axis, shape.size());
  dispatch_dtype(out[0]->dtype(), [&](auto zero) {
    using T = decltype(zero);
    int64_t offset = 0;  // where this input's block starts inside each output block
    for (const HostTensor* input : in) {
      const int64_t block = extent_product(input->shape(), axis, input->shape().size());
      const T* src = data_of<T>(*input);
      T* dst = data_of<T>(*out[0]);
      for (int64_t o = 0; o < outer; ++o) std::copy(src + o * block, src + (o + 1) * block, dst + o * out_block + offset);
      offset += block;
    }
  });
}

// The inverse of Concat: output k takes split[k] consecutive indices of `axis`, one block per outer index.
void split_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  const size_t axis = static_cast<size_t>(node.attrs.get_int("axis", 0));
  const std::vector<int64_t> sizes = node.attrs.get_ints("split");
  CNNRT_CHECK(sizes.size() == out.size(), ErrorCode::Internal, "Split has {} sizes for {} outputs", sizes.size(),
              out.size());
  const ir::Shape& shape = in[0]->shape();
  const int64_t outer = extent_product(shape, 0, axis);
  const int64_t inner = extent_product(shape, axis + 1, shape.size());
  const int64_t in_block = shape[axis] * inner;
  dispatch_dtype(in[0]->dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* src = data_of<T>(*in[0]);
    int64_t offset = 0;  // where output k's block starts inside each input block
    for (size_t k = 0; k < out.size(); ++k) {
      const int64_t block = sizes[k] * inner;
      if (out[k] != nullptr) {  // an omitted output still takes its indices
        T* dst = data_of<T>(*out[k]);
        for (int64_t o = 0; o < outer; ++o) {
          std::copy(src + o * in_block + offset, src + o * in_block + offset + block, dst + o * block);
        }
      }
      offset += block;
    }
  });
}

// output[outer, j, inner] = data[outer, indices[j], inner]; negative indices count from the end.
void gather_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  const HostTensor& data = *in[0];
  const HostTensor& indices = *in[1];
  const size_t axis = static_cast<size_t>(node.attrs.get_int("axis", 0));
  const int64_t outer = extent_product(data.shape(), 0, axis);
  const int64_t extent = data.shape()[axis];
  const int64_t inner = extent_product(data.shape(), axis + 1, data.shape().size());
  const int64_t count = indices.numel();
  dispatch_dtype(data.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* src = data_of<T>(data);
    T* dst = data_of<T>(*out[0]);
    for (int64_t j = 0; j < count; ++j) {
      int64_t index = indices.i64()[j];
      CNNRT_CHECK(index >= -extent && index < extent, ErrorCode::InvalidModel,
                  "Gather index {} is out of range for axis {} of size {}", index, axis, extent);
      if (index < 0) index += extent;
      for (int64_t o = 0; o < outer; ++o) {
        const T* from = src + (o * extent + index) * inner;
        std::copy(from, from + inner, dst + (o * count + j) * inner);
      }
    }
  });
}

// ---- Pad ---------------------------------------------------------------------------------------------

enum class PadMode { Constant, Edge, Reflect };

// Input index that output index `i` of a padded axis reads, or -1 for the constant value.
int64_t pad_source(int64_t i, int64_t pad_begin, int64_t extent, PadMode mode) {
  const int64_t p = i - pad_begin;
  if (p >= 0 && p < extent) return p;
  switch (mode) {
    case PadMode::Constant: return -1;
    case PadMode::Edge: return p < 0 ? 0 : extent - 1;
    case PadMode::Reflect: {
      // Mirrored without repeating the edge, as numpy does: periodic with period 2 * (extent - 1), so pads
      // larger than the axis keep reflecting.
      if (extent == 1) return 0;
      const int64_t period = 2 * (extent - 1);
      const int64_t phase = ((p % period) + period) % period;
      return phase < extent ? phase : period - phase;
    }
  }
  return -1;
}

void pad_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  const HostTensor& x = *in[0];
  HostTensor& y = *out[0];
  const std::vector<int64_t> pads = node.attrs.get_ints("pads");
  const std::string mode_name = node.attrs.get_string("mode", "constant");
  const PadMode mode = mode_name == "edge" ? PadMode::Edge : mode_name == "reflect" ? PadMode::Reflect
                                                                                      : PadMode::Constant;
  const size_t rank = x.shape().size();
  CNNRT_CHECK(pads.size() == 2 * rank, ErrorCode::Internal, "Pad pads are not canonical for {}",
              ir::shape_str(x.shape()));
  // Per axis, the input offset each output index reads (-1: the constant value).
  const ir::Shape in_strides = ir::contiguous_strides(x.shape());
  std::vector<std::vector<int64_t>> source(rank);
  for (size_t axis = 0; axis < rank; ++axis) {
    for (int64_t i = 0; i < y.shape()[axis]; ++i) {
      const int64_t index = pad_source(i, pads[axis], x.shape()[axis], mode);
      source[axis].push_back(index < 0 ? -1 : index * in_strides[axis]);
    }
  }
  const float value = node.attrs.get_float("value", 0.0f);
  const ir::Shape out_strides = ir::contiguous_strides(y.shape());
  dispatch_dtype(x.dtype(), [&](auto zero) {
    using T = decltype(zero);
    T fill = value;
    if constexpr (std::is_same_v<T, int64_t>) fill = float_to_int64(value);
    const T* src = data_of<T>(x);
    T* dst = data_of<T>(y);
    for (int64_t o = 0; o < y.numel(); ++o) {
      int64_t offset = 0;
      bool inside = true;
      for (size_t axis = 0; axis < rank && inside; ++axis) {
        const int64_t from = source[axis][(o / out_strides[axis]) % y.shape()[axis]];
        inside = from >= 0;
        offset += from;
      }
      dst[o] = inside ? src[offset] : fill;
    }
  });
}

}  // namespace

void add_movement_kernels(KernelTable& table) {
  table.insert(table.end(), {
      {"Identity", copy_kernel},
      {"Dropout", copy_kernel},
      {"Reshape", copy_kernel},
      {"Flatten", copy_kernel},
      {"Squeeze", copy_kernel},
      {"Unsqueeze", copy_kernel},
      {"Cast", cast_kernel},
      {"Transpose", transpose_kernel},
      {"DepthToSpace", depth_space_kernel},
      {"SpaceToDepth", depth_space_kernel},
      {"Slice", slice_kernel},
      {"Expand", expand_kernel},
      {"Concat", concat_kernel},
      {"Split", split_kernel},
      {"Gather", gather_kernel},
      {"Pad", pad_kernel},
  });
}

}  // namespace cnnrt::cpu
