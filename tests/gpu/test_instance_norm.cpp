// launch_instance_norm against the CPU reference (sums in double): short and long planes (a warp or a
// block per plane), plane sizes that are and are not multiples of 4, a misaligned base (no float4), many and
// few planes, and inputs far from zero mean (the variance is taken about the mean, not as E[x^2] - mean^2).
#include "kernel_test_util.hpp"
#include "kernels/instance_norm.cuh"

namespace cnnrt::testing {

TEST_CASE("InstanceNormalization matches the CPU reference for every plane shape and alignment") {
  struct Case {
    ir::Shape shape;
    bool misaligned;  // start one float into the buffer: the scalar path even when the plane is a multiple of 4
  };
  const Case cases[] = {
      {{1, 1, 1, 1}, false},     {{2, 3, 7, 7}, false},    {{1, 4, 1000}, false},      {{2, 5, 31, 33}, false},
      {{1, 2, 512, 512}, false}, {{3, 1, 32, 32}, true},   {{1, 3, 33, 31}, true},     {{600, 16, 4, 4}, false},
      {{1, 1, 1, 7}, false},     {{2, 2, 2, 2, 3}, false},
  };
  uint32_t seed = 2900;
  for (const Case& c : cases) {
    INFO(ir::shape_str(c.shape) << (c.misaligned ? " misaligned" : ""));
    note_check_point("instance_norm " + ir::shape_str(c.shape));
    const int64_t channels = c.shape[1];
    const ir::HostTensor x = random_tensor(c.shape, seed++, 2.0f, 3.0f);  // mean 2.5, spread 0.5
    const ir::HostTensor scale = random_tensor({channels}, seed++);
    const ir::HostTensor bias = random_tensor({channels}, seed++);
    const ir::HostTensor want = cpu_reference("InstanceNormalization", make_attrs({{"epsilon", 1e-5f}}),
                                              {&x, &scale, &bias}, c.shape);
    const size_t offset = c.misaligned ? 1 : 0;
    std::vector<float> padded(offset, 0.5f);
    padded.insert(padded.end(), x.float_values().begin(), x.float_values().end());
    DeviceBuffer x_device(padded), scale_device(scale.float_values()), bias_device(bias.float_values());
    DeviceBuffer out(padded.size());
    const int64_t planes = c.shape[0] * channels;
    const int64_t plane = x.numel() / planes;
    kernels::launch_instance_norm(x_device.get() + offset, scale_device.get(), bias_device.get(), out.get() + offset,
                                  planes, channels, plane, 1e-5f, nullptr);
    finish_launch();
    CHECK(error_against(out, offset, want) < kTolerance);
  }
}

}  // namespace cnnrt::testing
