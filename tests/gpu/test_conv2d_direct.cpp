// launch_conv2d_direct against the CPU reference Conv: strides, dilations, asymmetric padding, groups and
// depthwise (with a channel multiplier), pointwise, 1-D, kernels larger than the input, with and without bias.
#include "ir/window.hpp"
#include "kernel_test_util.hpp"
#include "kernels/conv2d_direct.cuh"

namespace cnnrt::testing {
namespace {

struct ConvCase {
  ir::Shape input;  // [N, C, W] or [N, C, H, W]
  int64_t out_channels;
  std::vector<int64_t> kernel;  // one per spatial axis
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;
  std::vector<int64_t> pads;  // begins, then ends
  int64_t groups;
  bool bias;
};

kernels::SlidingAxis conv_axis(const ConvCase& c, size_t i) {
  const size_t spatial = c.kernel.size();
  kernels::SlidingAxis axis;
  axis.input = c.input[2 + i];
  axis.kernel = c.kernel[i];
  axis.stride = c.strides[i];
  axis.dilation = c.dilations[i];
  axis.pad_begin = c.pads[i];
  axis.pad_end = c.pads[spatial + i];
  axis.output =
      ir::window_output_size(axis.input, axis.kernel, axis.stride, axis.dilation, axis.pad_begin, axis.pad_end, false);
  return axis;
}

TEST_CASE("direct convolution matches the CPU reference") {
  const std::vector<ConvCase> cases = {
      {{1, 1, 5, 5}, 1, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 1, true},
      {{2, 3, 33, 31}, 7, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 1, false},
      {{1, 8, 7, 7}, 8, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 8, false},     // depthwise
      {{1, 4, 9, 9}, 8, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 4, true},      // depthwise, multiplier 2
      {{2, 6, 9, 9}, 4, {3, 3}, {1, 2}, {2, 1}, {2, 0, 1, 3}, 2, true},      // groups, asymmetric pads, dilation
      {{1, 4, 16, 16}, 8, {1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}, 1, true},    // pointwise
      {{2, 3, 31}, 5, {5}, {2}, {2}, {2, 1}, 1, true},                       // 1-D
      {{1, 3, 32, 32}, 16, {7, 7}, {2, 2}, {1, 1}, {3, 3, 3, 3}, 1, true},   // stem-like
      {{1, 2, 3, 3}, 2, {5, 5}, {1, 1}, {1, 1}, {2, 2, 2, 2}, 1, false},     // kernel larger than the input
      {{1, 64, 14, 14}, 32, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 1, true},  // C*KH*KW = 576 terms per output
  };
  uint32_t seed = 1700;
  for (const ConvCase& c : cases) {
    const bool one_d = c.kernel.size() == 1;
    const kernels::ConvGeometry g = kernels::conv_geometry(c.input[0], c.input[1], c.out_channels, c.groups,
                                                           one_d ? kernels::SlidingAxis{} : conv_axis(c, 0),
                                                           conv_axis(c, one_d ? 0 : 1));
    ir::Shape out_shape = {c.input[0], c.out_channels};
    if (!one_d) out_shape.push_back(g.OH);
    out_shape.push_back(g.OW);
    ir::Shape weight_shape = {c.out_channels, c.input[1] / c.groups};
    weight_shape.insert(weight_shape.end(), c.kernel.begin(), c.kernel.end());
    INFO("Conv " << ir::shape_str(c.input) << " * " << ir::shape_str(weight_shape) << " -> " << ir::shape_str(out_shape)
                 << ", groups " << c.groups << (c.bias ? ", bias" : ""));

    const ir::HostTensor x = random_tensor(c.input, seed++);
    const ir::HostTensor w = random_tensor(weight_shape, seed++);
    const ir::HostTensor b = random_tensor({c.out_channels}, seed++);
    std::vector<const ir::HostTensor*> inputs = {&x, &w};
    if (c.bias) inputs.push_back(&b);
    const ir::Attributes attrs = make_attrs({{"kernel_shape", c.kernel},
                                             {"strides", c.strides},
                                             {"dilations", c.dilations},
                                             {"pads", c.pads},
                                             {"group", c.groups}});
    const ir::HostTensor want = cpu_reference("Conv", attrs, inputs, out_shape);

    DeviceBuffer x_device(x.float_values());
    DeviceBuffer w_device(w.float_values());
    DeviceBuffer b_device(b.float_values());
    DeviceBuffer out(static_cast<size_t>(want.numel()));
    kernels::launch_conv2d_direct(x_device.get(), w_device.get(), c.bias ? b_device.get() : nullptr, out.get(), g,
                                  nullptr);
    finish_launch();
    CHECK(error_against(out, want) < kTolerance);
  }
}

}  // namespace
}  // namespace cnnrt::testing
