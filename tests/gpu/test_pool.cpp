// launch_pool2d and launch_global_pool against the CPU reference: strides, dilation, asymmetric padding,
// ceil_mode windows that overhang the end padding, count_include_pad, 1-D windows, long and short planes.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ir/window.hpp"
#include "kernel_test_util.hpp"
#include "kernels/pool.cuh"

namespace cnnrt::testing {
namespace {

using kernels::PoolOp;

struct PoolCase {
  ir::Shape input;              // [N, C, W] or [N, C, H, W]
  std::vector<int64_t> kernel;  // one per spatial axis
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;
  std::vector<int64_t> pads;  // begins, then ends
  bool ceil_mode = false;
};

// The engine's view of one spatial axis (ir::window_output_size is what shape inference uses).
kernels::SlidingAxis axis_of(const PoolCase& c, size_t i) {
  const size_t spatial = c.kernel.size();
  kernels::SlidingAxis axis;
  axis.input = c.input[2 + i];
  axis.kernel = c.kernel[i];
  axis.stride = c.strides[i];
  axis.dilation = c.dilations[i];
  axis.pad_begin = c.pads[i];
  axis.pad_end = c.pads[spatial + i];
  axis.output = ir::window_output_size(axis.input, axis.kernel, axis.stride, axis.dilation, axis.pad_begin,
                                       axis.pad_end, c.ceil_mode);
  return axis;
}

const std::vector<PoolCase>& pool_cases() {
  static const std::vector<PoolCase> cases = {
      {{1, 1, 7, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}},
      {{2, 3, 33, 31}, {3, 3}, {2, 2}, {1, 1}, {0, 0, 0, 0}, true},
      {{1, 2, 8, 8}, {2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}},
      {{2, 4, 31, 33}, {3, 3}, {2, 2}, {1, 1}, {1, 0, 0, 1}, true},  // asymmetric pads
      {{1, 3, 9, 9}, {3, 2}, {2, 3}, {2, 1}, {2, 1, 1, 2}, true},    // dilation (MaxPool only)
      {{2, 3, 1000}, {5}, {3}, {1}, {2, 2}, true},                   // 1-D
      {{1, 1, 1, 1}, {1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}},
      {{1, 1, 5, 5}, {5, 5}, {1, 1}, {1, 1}, {2, 2, 2, 2}},        // windows mostly padding
      {{1, 1, 6, 6}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, true},  // last window overhangs the end padding
      {{2, 64, 56, 56}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}},     // ResNet stem pool
      {{1, 2, 7, 1}, {3, 1}, {1, 1}, {3, 1}, {3, 0, 3, 0}, true},
      {{3, 5, 33, 31}, {2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}, true},  // 2x2 windows, the last row and column cut short
      {{2, 8, 55, 55}, {3, 3}, {2, 2}, {1, 1}, {0, 0, 0, 0}, true},  // SqueezeNet's pools
      {{1, 2, 31, 33}, {4, 5}, {3, 4}, {1, 1}, {1, 2, 2, 1}, true},  // a window size the kernel does not compile in
  };
  return cases;
}

ir::Attributes window_attrs(const PoolCase& c) {
  return make_attrs({{"kernel_shape", c.kernel},
                     {"strides", c.strides},
                     {"pads", c.pads},
                     {"ceil_mode", int64_t{c.ceil_mode ? 1 : 0}}});
}

TEST_CASE("MaxPool and AveragePool match the CPU reference") {
  uint32_t seed = 600;
  for (const PoolCase& c : pool_cases()) {
    const bool one_d = c.kernel.size() == 1;
    kernels::Pool2dDesc desc;
    desc.planes = c.input[0] * c.input[1];
    desc.cols = axis_of(c, one_d ? 0 : 1);
    if (!one_d) desc.rows = axis_of(c, 0);
    ir::Shape out_shape = {c.input[0], c.input[1]};
    if (!one_d) out_shape.push_back(desc.rows.output);
    out_shape.push_back(desc.cols.output);
    const ir::HostTensor x = random_tensor(c.input, seed++);
    DeviceBuffer x_device(x.float_values());

    {
      INFO("MaxPool " << ir::shape_str(c.input) << " -> " << ir::shape_str(out_shape));
      ir::Attributes attrs = window_attrs(c);
      attrs.set("dilations", c.dilations);
      const ir::HostTensor want = cpu_reference("MaxPool", attrs, {&x}, out_shape);
      DeviceBuffer out(static_cast<size_t>(want.numel()));
      kernels::launch_pool2d(PoolOp::Max, x_device.get(), out.get(), desc, nullptr);
      finish_launch();
      CHECK(error_against(out, want) < kTolerance);
    }
    if (c.input[0] > 1) {
      // Into a strided block of a channel Concat's output: each image 5 floats past the last, the gaps untouched.
      INFO("MaxPool " << ir::shape_str(c.input) << " -> " << ir::shape_str(out_shape) << " with an output image stride");
      ir::Attributes attrs = window_attrs(c);
      attrs.set("dilations", c.dilations);
      const ir::HostTensor want = cpu_reference("MaxPool", attrs, {&x}, out_shape);
      const int64_t image = want.numel() / c.input[0], stride = image + 5;
      kernels::Pool2dDesc strided = desc;
      strided.channels = c.input[1];
      strided.out_image_floats = stride;
      DeviceBuffer out(static_cast<size_t>((c.input[0] - 1) * stride + image));  // poisoned (NaN) until written
      kernels::launch_pool2d(PoolOp::Max, x_device.get(), out.get(), strided, nullptr);
      finish_launch();
      const std::vector<float> got = out.download();
      std::vector<float> dense;
      int64_t written_in_gaps = 0;
      for (int64_t n = 0; n < c.input[0]; ++n) {
        dense.insert(dense.end(), got.begin() + n * stride, got.begin() + n * stride + image);
        if (n + 1 < c.input[0]) {
          written_in_gaps += std::count_if(got.begin() + n * stride + image, got.begin() + (n + 1) * stride,
                                           [](float v) { return !std::isnan(v); });
        }
      }
      CHECK(written_in_gaps == 0);
      CHECK(relative_error(dense, want.float_values()) < kTolerance);
    }
    bool dilated = false;
    for (int64_t d : c.dilations) dilated = dilated || d != 1;
    if (dilated) continue;  // AveragePool has no dilations
    for (bool count_include_pad : {false, true}) {
      INFO("AveragePool " << ir::shape_str(c.input) << " -> " << ir::shape_str(out_shape) << ", count_include_pad "
                          << count_include_pad);
      ir::Attributes attrs = window_attrs(c);
      attrs.set("count_include_pad", int64_t{count_include_pad ? 1 : 0});
      const ir::HostTensor want = cpu_reference("AveragePool", attrs, {&x}, out_shape);
      desc.count_include_pad = count_include_pad;
      DeviceBuffer out(static_cast<size_t>(want.numel()));
      kernels::launch_pool2d(PoolOp::Average, x_device.get(), out.get(), desc, nullptr);
      finish_launch();
      CHECK(error_against(out, want) < kTolerance);
    }
  }
}

TEST_CASE("global pools match the CPU reference") {
  const std::vector<ir::Shape> shapes = {
      {1, 8, 7, 7},                      // plane 49: a warp per plane, scalar loads
      {2, 3, 1, 1},     {2, 5, 33, 31},  // plane 1023
      {1, 4, 112, 112},                  // long planes, few of them: a block per plane, float4
      {3, 7, 1000},                      // rank 3
      {1, 2, 3, 4, 5},                   // rank 5
      {4, 2048, 4, 4},                   // many short planes
  };
  uint32_t seed = 700;
  for (const ir::Shape& shape : shapes) {
    const ir::HostTensor x = random_tensor(shape, seed++);
    ir::Shape out_shape = {shape[0], shape[1]};
    out_shape.resize(shape.size(), 1);
    DeviceBuffer x_device(x.float_values());
    struct GlobalCase {
      const char* onnx_op;
      PoolOp op;
    };
    for (const GlobalCase c :
         {GlobalCase{"GlobalMaxPool", PoolOp::Max}, GlobalCase{"GlobalAveragePool", PoolOp::Average}}) {
      INFO(c.onnx_op << " " << ir::shape_str(shape));
      const ir::HostTensor want = cpu_reference(c.onnx_op, {}, {&x}, out_shape);
      DeviceBuffer out(static_cast<size_t>(want.numel()));
      kernels::launch_global_pool(c.op, x_device.get(), out.get(), shape[0] * shape[1], product(shape, 2), nullptr);
      finish_launch();
      CHECK(error_against(out, want) < kTolerance);
    }
  }
}

}  // namespace
}  // namespace cnnrt::testing
