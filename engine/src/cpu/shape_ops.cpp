// Kernels of the fold-only shape ops that need values: ConstantOfShape and Range. (Shape and Size fold
// during inference from shapes alone; Equal, Less, Greater, Where and Not live with the elementwise ops.)
#include "cpu/kernel_util.hpp"

namespace cnnrt::cpu {
namespace {

using ir::HostTensor;

void constant_of_shape_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  const HostTensor& value = node.attrs.get_tensor("value");
  HostTensor& y = *out[0];
  dispatch_dtype(y.dtype(), [&](auto zero) {
    using T = decltype(zero);
    std::fill(data_of<T>(y), data_of<T>(y) + y.numel(), data_of<T>(value)[0]);
  });
}

// start, start + delta, ... for as many elements as the output has (shape inference counted them).
void range_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  HostTensor& y = *out[0];
  dispatch_dtype(y.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T start = data_of<T>(*in[0])[0];
    const T delta = data_of<T>(*in[2])[0];
    T* result = data_of<T>(y);
    for (int64_t i = 0; i < y.numel(); ++i) result[i] = static_cast<T>(start + static_cast<T>(i) * delta);
  });
}

}  // namespace

void add_shape_kernels(KernelTable& table) {
  table.insert(table.end(), {
      {"ConstantOfShape", constant_of_shape_kernel},
      {"Range", range_kernel},
  });
}

}  // namespace cnnrt::cpu
