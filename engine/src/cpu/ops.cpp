// The CPU kernel table (assembled from the family files) and the helpers they share.
#include <algorithm>

#include "cpu/kernel_util.hpp"

namespace cnnrt::cpu {

static KernelTable build_table() {
  KernelTable table;
  add_elementwise_kernels(table);
  add_window_kernels(table);
  add_reduce_kernels(table);
  add_matrix_kernels(table);
  add_movement_kernels(table);
  add_shape_kernels(table);
  add_fused_kernels(table);
  add_resize_kernels(table);
  std::sort(table.begin(), table.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 1; i < table.size(); ++i) {
    CNNRT_CHECK(table[i - 1].first != table[i].first, ErrorCode::Internal, "CPU kernel {} is registered twice",
                table[i].first);
  }
  return table;
}

KernelFn find_kernel(std::string_view op) {
  static const KernelTable table = build_table();
  auto it = std::lower_bound(table.begin(), table.end(), op,
                             [](const auto& entry, std::string_view name) { return entry.first < name; });
  return it != table.end() && it->first == op ? it->second : nullptr;
}

StridedView broadcast_view(const ir::Shape& input, const ir::Shape& output) {
  CNNRT_CHECK(input.size() <= output.size(), ErrorCode::Internal, "cannot broadcast {} to {}", ir::shape_str(input),
              ir::shape_str(output));
  const ir::Shape input_strides = ir::contiguous_strides(input);
  const size_t lead = output.size() - input.size();  // axes the input lacks
  StridedView view;
  view.strides.assign(output.size(), 0);
  for (size_t i = 0; i < input.size(); ++i) {
    const int64_t dim = input[i];
    CNNRT_CHECK(dim == output[lead + i] || dim == 1, ErrorCode::Internal, "cannot broadcast {} to {}",
                ir::shape_str(input), ir::shape_str(output));
    view.strides[lead + i] = dim == 1 ? 0 : input_strides[i];
  }
  return view;
}

void copy_through_view(const ir::HostTensor& in, const StridedView& view, ir::HostTensor& out) {
  dispatch_dtype(in.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* src = data_of<T>(in);
    T* dst = data_of<T>(out);
    for_each_index(out.shape(), {view}, [&](int64_t o, const int64_t* offsets) { dst[o] = src[offsets[0]]; });
  });
}

int64_t extent_product(const ir::Shape& shape, size_t first, size_t last) {
  int64_t product = 1;
  for (size_t i = first; i < last && i < shape.size(); ++i) product *= shape[i];
  return product;
}

}  // namespace cnnrt::cpu
