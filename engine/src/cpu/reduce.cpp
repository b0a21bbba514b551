// Reduction kernels: ReduceMean/Sum/Max/Min over canonical `axes`, Softmax/LogSoftmax (numerically
// stable: the maximum is subtracted before exponentiating; sums in double) and InstanceNormalization.
#include <algorithm>
#include <cmath>
#include <limits>

#include "cpu/kernel_util.hpp"

namespace cnnrt::cpu {
namespace {

using ir::HostTensor;

enum class Reduction { Mean, Sum, Max, Min };

template <Reduction kind>
void reduce_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  const HostTensor& x = *in[0];
  const std::vector<int64_t> axes = node.attrs.get_ints("axes");
  // Map each input element to its output element: the output with kept dims, stride 0 on reduced axes.
  ir::Shape kept = x.shape();
  for (int64_t axis : axes) {
    CNNRT_CHECK(axis >= 0 && axis < x.rank(), ErrorCode::Internal, "reduce axis {} is not canonical for {}", axis,
                ir::shape_str(x.shape()));
    kept[axis] = 1;
  }
  StridedView to_output;
  to_output.strides = ir::contiguous_strides(kept);
  for (int64_t axis : axes) to_output.strides[axis] = 0;

  const double start = kind == Reduction::Max   ? -std::numeric_limits<double>::infinity()
                       : kind == Reduction::Min ? std::numeric_limits<double>::infinity()
                                                : 0.0;
  std::vector<double> acc(static_cast<size_t>(out[0]->numel()), start);
  const float* values = x.f32();
  for_each_index(x.shape(), {to_output}, [&](int64_t i, const int64_t* at) {
    double& slot = acc[at[0]];
    if constexpr (kind == Reduction::Max) {
      slot = std::max(slot, static_cast<double>(values[i]));
    } else if constexpr (kind == Reduction::Min) {
      slot = std::min(slot, static_cast<double>(values[i]));
    } else {
      slot += values[i];
    }
  });
  // Elements per output element; empty outputs leave nothing to divide.
  const double count = acc.empty() ? 1.0 : static_cast<double>(x.numel()) / static_cast<double>(acc.size());
  for (size_t i = 0; i < acc.size(); ++i) {
    out[0]->f32()[i] = static_cast<float>(kind == Reduction::Mean ? acc[i] / count : acc[i]);
  }
}

// Softmax over `axis` (or over all axes from `axis` on when coerce_2d, as opset < 13 defines it).
template <bool log_output>
void softmax_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  const HostTensor& x = *in[0];
  const ir::Shape& shape = x.shape();
  const size_t axis = static_cast<size_t>(node.attrs.get_int("axis", -1));
  const bool coerce_2d = node.attrs.get_int("coerce_2d", 0) != 0;
  CNNRT_CHECK(axis < shape.size(), ErrorCode::Internal, "softmax axis {} is not canonical for {}", axis,
              ir::shape_str(shape));
  const int64_t outer = extent_product(shape, 0, axis);
  const int64_t length = coerce_2d ? extent_product(shape, axis, shape.size()) : shape[axis];
  const int64_t inner = coerce_2d ? 1 : extent_product(shape, axis + 1, shape.size());  // stride along the axis
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const float* row = x.f32() + o * length * inner + i;
      float* result = out[0]->f32() + o * length * inner + i;
      float max = -std::numeric_limits<float>::infinity();
      for (int64_t k = 0; k < length; ++k) max = std::max(max, row[k * inner]);
      double sum = 0.0;
      for (int64_t k = 0; k < length; ++k) sum += std::exp(static_cast<double>(row[k * inner]) - max);
      const double log_sum = std::log(sum);
      for (int64_t k = 0; k < length; ++k) {
        const double shifted = static_cast<double>(row[k * inner]) - max;
        result[k * inner] = static_cast<float>(log_output ? shifted - log_sum : std::exp(shifted) / sum);
      }
    }
  }
}

// InstanceNormalization: each (n, c) plane normalized by its own mean and (biased) variance,
// y = scale[c] * (x - mean) / sqrt(var + epsilon) + B[c]. Two passes in double: the mean, then the variance.
void instance_norm_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  const HostTensor& x = *in[0];
  const float* scale = in[1]->f32();
  const float* bias = in[2]->f32();
  const double epsilon = node.attrs.get_float("epsilon", 1e-5f);
  const int64_t channels = x.shape()[1];
  const int64_t planes = x.shape()[0] * channels;
  const int64_t plane = extent_product(x.shape(), 2, x.shape().size());
  for (int64_t p = 0; p < planes; ++p) {
    const float* values = x.f32() + p * plane;
    float* result = out[0]->f32() + p * plane;
    double sum = 0.0;
    for (int64_t i = 0; i < plane; ++i) sum += values[i];
    const double mean = plane > 0 ? sum / static_cast<double>(plane) : 0.0;
    double squares = 0.0;
    for (int64_t i = 0; i < plane; ++i) squares += (values[i] - mean) * (values[i] - mean);
    const double variance = plane > 0 ? squares / static_cast<double>(plane) : 0.0;
    const int64_t c = p % channels;
    const double gain = scale[c] / std::sqrt(variance + epsilon);
    for (int64_t i = 0; i < plane; ++i) result[i] = static_cast<float>((values[i] - mean) * gain + bias[c]);
  }
}

}  // namespace

void add_reduce_kernels(KernelTable& table) {
  table.insert(table.end(), {
      {"ReduceMean", reduce_kernel<Reduction::Mean>},
      {"ReduceSum", reduce_kernel<Reduction::Sum>},
      {"ReduceMax", reduce_kernel<Reduction::Max>},
      {"ReduceMin", reduce_kernel<Reduction::Min>},
      {"Softmax", softmax_kernel<false>},
      {"LogSoftmax", softmax_kernel<true>},
      {"InstanceNormalization", instance_norm_kernel},
  });
}

}  // namespace cnnrt::cpu
