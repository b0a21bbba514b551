// launch_channel_affine against the CPU reference of BatchNormalization, with scale and shift folded as the
// planner folds them (in double, then rounded to float), alone and with each fused activation after it
// (FusedBatchNormalization), and a DenseNet-style Concat -> BatchNormalization -> Relu model on the GPU.
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "cnnrt/cnnrt.hpp"
#include "kernel_test_util.hpp"
#include "kernels/batchnorm.cuh"
#include "tests/model_builder.hpp"

namespace cnnrt::testing {
namespace {

// A random input of `shape` and BatchNormalization parameters for its channels (axis 1), the CPU reference's
// output, and the per-channel scale and shift as the planner folds them (in double, then rounded to float).
struct BatchNormCase {
  ir::HostTensor x, gamma, beta, mean, variance, want;
  std::vector<float> scale, shift;

  BatchNormCase(const ir::Shape& shape, float epsilon, uint32_t& seed)
      : x(random_tensor(shape, seed++)),
        gamma(random_tensor({shape[1]}, seed++)),
        beta(random_tensor({shape[1]}, seed++)),
        mean(random_tensor({shape[1]}, seed++)),
        variance(random_tensor({shape[1]}, seed++, 0.1f, 2.0f)),
        want(cpu_reference("BatchNormalization", make_attrs({{"epsilon", epsilon}}),
                           {&x, &gamma, &beta, &mean, &variance}, shape)) {
    for (size_t c = 0; c < static_cast<size_t>(shape[1]); ++c) {
      const double multiplier = gamma.float_values()[c] / std::sqrt(double{variance.float_values()[c]} + epsilon);
      scale.push_back(static_cast<float>(multiplier));
      shift.push_back(static_cast<float>(beta.float_values()[c] - mean.float_values()[c] * multiplier));
    }
  }
};

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
    const BatchNormCase bn(shape, epsilon, seed);
    const ir::HostTensor& want = bn.want;
    DeviceBuffer x_device(bn.x.float_values());
    DeviceBuffer scale_device(bn.scale);
    DeviceBuffer shift_device(bn.shift);
    DeviceBuffer out(static_cast<size_t>(bn.x.numel()));
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

TEST_CASE("channel affine reads a strided input (a block of a channel Concat's output), NaN between its images") {
  // (gap floats between images: a multiple of 4 keeps the float4 path, others take the scalar one)
  const std::vector<std::pair<ir::Shape, int64_t>> cases = {
      {{2, 16, 8, 8}, 1024}, {{3, 12, 8, 8}, 4}, {{2, 16, 7, 7}, 49}, {{5, 3, 4, 4}, 3}, {{1, 8, 4, 4}, 16}};
  uint32_t seed = 700;
  for (const auto& [shape, gap] : cases) {
    INFO(ir::shape_str(shape) << " gap " << gap);
    const BatchNormCase bn(shape, 1e-5f, seed);
    const int64_t image = product(shape, 1), x_image = image + gap;
    std::vector<float> strided(static_cast<size_t>((shape[0] - 1) * x_image + image), std::nanf(""));
    const std::vector<float> dense = bn.x.float_values();
    for (int64_t n = 0; n < shape[0]; ++n) {
      std::copy_n(dense.begin() + n * image, image, strided.begin() + n * x_image);
    }
    DeviceBuffer x_device(strided), scale_device(bn.scale), shift_device(bn.shift);
    DeviceBuffer out(static_cast<size_t>(bn.x.numel()));
    kernels::launch_channel_affine(x_device.get(), scale_device.get(), shift_device.get(), out.get(), shape[0],
                                   shape[1], product(shape, 2), nullptr, kernels::ParamAct::Relu, 0.0f, 0.0f, x_image);
    finish_launch();
    const ir::HostTensor want = cpu_reference("Relu", {}, {&bn.want}, shape);
    CHECK(error_against(out, want) < kTolerance);
  }
}

TEST_CASE("channel affine with a fused activation matches BatchNormalization then the activation") {
  struct Case {
    const char* op;
    kernels::ParamAct act;
    float alpha, beta;
    ir::Attributes attrs;
  };
  const std::vector<Case> cases = {
      {"Relu", kernels::ParamAct::Relu, 0.0f, 0.0f, {}},
      {"LeakyRelu", kernels::ParamAct::LeakyRelu, 0.1f, 0.0f, make_attrs({{"alpha", 0.1f}})},
      {"Clip", kernels::ParamAct::Clip, -0.5f, 0.5f, make_attrs({{"min", -0.5f}, {"max", 0.5f}})},
      {"Sigmoid", kernels::ParamAct::Sigmoid, 0.0f, 0.0f, {}},
      {"HardSwish", kernels::ParamAct::HardSwish, 0.0f, 0.0f, {}},
      {"Gelu", kernels::ParamAct::Gelu, 0.0f, 0.0f, {}},
  };
  const std::vector<ir::Shape> shapes = {{1, 1}, {2, 16, 7, 7}, {1, 32, 8, 8}, {3, 4, 31}, {7, 33, 5, 4}};
  uint32_t seed = 900;
  for (const Case& c : cases) {
    for (const ir::Shape& shape : shapes) {
      INFO(c.op << " " << ir::shape_str(shape));
      const BatchNormCase bn(shape, 1e-5f, seed);
      const ir::HostTensor want = cpu_reference(c.op, c.attrs, {&bn.want}, shape);
      DeviceBuffer x_device(bn.x.float_values()), scale_device(bn.scale), shift_device(bn.shift);
      DeviceBuffer out(static_cast<size_t>(bn.x.numel()));
      kernels::launch_channel_affine(x_device.get(), scale_device.get(), shift_device.get(), out.get(), shape[0],
                                     shape[1], product(shape, 2), nullptr, c.act, c.alpha, c.beta);
      finish_launch();
      CHECK(error_against(out, want) < kTolerance);
    }
  }
}

TEST_CASE("Concat -> BatchNormalization -> Relu (DenseNet's layer input) runs as one fused step on the GPU") {
  for (const char* act : {"Relu", "HardSwish"}) {
    CAPTURE(act);
    ModelBuilder m;
    m.input("a", {-1, 5, 9, 7}).input("b", {-1, 3, 9, 7}).output("y");
    ModelBuilder::attr_int(m.node("Concat", {"a", "b"}, {"c"}, "cat"), "axis", 1);
    m.initializer("g", {8}, random_floats(8, 31)).initializer("be", {8}, random_floats(8, 32));
    m.initializer("m", {8}, random_floats(8, 33)).initializer("v", {8}, random_floats(8, 34, 0.2f, 2.0f));
    m.node("BatchNormalization", {"c", "g", "be", "m", "v"}, {"n"}, "bn");
    m.node(act, {"n"}, {"y"}, "act");
    const std::string bytes = m.bytes();
    const std::vector<Tensor> inputs = {{{3, 5, 9, 7}, random_floats(3 * 5 * 9 * 7, 35)},
                                        {{3, 3, 9, 7}, random_floats(3 * 3 * 9 * 7, 36)}};
    std::vector<Tensor> outputs;
    for (Device device : {Device::Cpu, Device::Gpu}) {
      Options options;
      options.device = device;
      options.batch_sizes = {3};
      options.tuning_cache = "none";
      const Model model = Model::load_from_memory(bytes.data(), bytes.size(), options, "densenet_input.onnx");
      Context context(model);
      outputs.push_back(context.run(inputs)[0]);
      if (device == Device::Gpu) {
        const std::vector<StepTiming> steps = context.profile(inputs, 1);
        REQUIRE(steps.size() == 2);
        CHECK(steps[1].kernel == std::string("channel_affine+") + act);
        CHECK(steps[1].nodes == std::vector<std::string>{"bn", "act"});
      }
    }
    CHECK(max_rel_error(outputs[1], outputs[0]) < kTolerance);
  }
}

}  // namespace
}  // namespace cnnrt::testing
