// launch_channel_affine against the CPU reference of BatchNormalization, with scale and shift folded as the
// planner folds them (in double, then rounded to float).
#include <cmath>

#include "kernel_test_util.hpp"
#include "kernels/batchnorm.cuh"

namespace cnnrt::testing {
namespace {

TEST_CASE("channel affine matches BatchNormalization") {
  const std::vector<ir::Shape> shapes = {
      {1, 1},                                        // 2-D input: inner 1
      {5, 7},          {1, 3, 1, 1}, {2, 16, 7, 7},  // inner 49: scalar path
      {1, 32, 8, 8},                                 // inner 64: float4 path
      {3, 4, 31},                                    // 1-D spatial
      {2, 8, 4, 4, 4},                               // 3-D spatial
      {1, 64, 33, 31},
  };
  const float epsilon = 1e-3f;
  uint32_t seed = 500;
  for (const ir::Shape& shape : shapes) {
    INFO(ir::shape_str(shape));
    const int64_t channels = shape[1];
    const ir::HostTensor x = random_tensor(shape, seed++);
    const ir::HostTensor gamma = random_tensor({channels}, seed++);
    const ir::HostTensor beta = random_tensor({channels}, seed++);
    const ir::HostTensor mean = random_tensor({channels}, seed++);
    const ir::HostTensor variance = random_tensor({channels}, seed++, 0.1f, 2.0f);
    const ir::HostTensor want = cpu_reference("BatchNormalization", make_attrs({{"epsilon", epsilon}}),
                                              {&x, &gamma, &beta, &mean, &variance}, shape);

    std::vector<float> scale(static_cast<size_t>(channels)), shift(static_cast<size_t>(channels));
    for (size_t c = 0; c < scale.size(); ++c) {
      const double multiplier = gamma.float_values()[c] / std::sqrt(double{variance.float_values()[c]} + epsilon);
      scale[c] = static_cast<float>(multiplier);
      shift[c] = static_cast<float>(beta.float_values()[c] - mean.float_values()[c] * multiplier);
    }
    DeviceBuffer x_device(x.float_values());
    DeviceBuffer scale_device(scale);
    DeviceBuffer shift_device(shift);
    DeviceBuffer out(static_cast<size_t>(x.numel()));
    const int64_t inner = product(shape, 2);
    kernels::launch_channel_affine(x_device.get(), scale_device.get(), shift_device.get(), out.get(), shape[0],
                                   channels, inner, nullptr);
    finish_launch();
    CHECK(error_against(out, want) < kTolerance);

    // In place.
    kernels::launch_channel_affine(x_device.get(), scale_device.get(), shift_device.get(), x_device.get(), shape[0],
                                   channels, inner, nullptr);
    finish_launch();
    CHECK(error_against(x_device, want) < kTolerance);
  }
}

}  // namespace
}  // namespace cnnrt::testing
