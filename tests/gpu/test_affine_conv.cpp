// A BatchNormalization (and its activation) read only by a convolution runs as that convolution reading its input
// through the affine where that measures faster than the two steps (plan/gpu/lower_chain.hpp; DenseNet's
// pre-activation): forced to the dot (or pw) family, every such pair is one step; forced to the separate steps, none
// is.
// Each against the CPU backend.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "cnnrt/cnnrt.hpp"
#include "gpu_test_util.hpp"
#include "kernel_test_util.hpp"
#include "tests/model_builder.hpp"

namespace cnnrt::testing {
namespace {

void batch_norm(ModelBuilder& m, const std::string& x, const std::string& y, int64_t c, uint32_t seed) {
  m.initializer(y + "_scale", {c}, random_floats(static_cast<size_t>(c), seed, 0.5f, 1.5f));
  m.initializer(y + "_bias", {c}, random_floats(static_cast<size_t>(c), seed + 1));
  m.initializer(y + "_mean", {c}, random_floats(static_cast<size_t>(c), seed + 2));
  m.initializer(y + "_var", {c}, random_floats(static_cast<size_t>(c), seed + 3, 0.5f, 2.0f));
  m.node("BatchNormalization", {x, y + "_scale", y + "_bias", y + "_mean", y + "_var"}, {y}, y);
}

void conv(ModelBuilder& m, const std::string& in, const std::string& out, int64_t c, int64_t f, int64_t k,
          int64_t stride, uint32_t seed) {
  m.initializer("w_" + out, {f, c, k, k}, random_floats(static_cast<size_t>(f * c * k * k), seed));
  m.initializer("b_" + out, {f}, random_floats(static_cast<size_t>(f), seed + 1));
  auto& node = m.node("Conv", {in, "w_" + out, "b_" + out}, {out}, out);
  ModelBuilder::attr_ints(node, "pads", {k / 2, k / 2, k / 2, k / 2});
  ModelBuilder::attr_ints(node, "strides", {stride, stride});
}

// x [N, 24, 9, 7]: y = conv 3x3 (padded: the padding must stay zero, not ReLU(shift)) of Relu(bn_a(x));
// z = conv 1x1 stride 2 of Clip(bn_b(x), -0.5, 0.5) then a 2x2 max pool (fused into the convolution).
std::string affine_model() {
  ModelBuilder m;
  m.input("x", {-1, 24, 9, 7}).output("y").output("z");
  batch_norm(m, "x", "bn_a", 24, 10);
  m.node("Relu", {"bn_a"}, {"act_a"}, "act_a");
  conv(m, "act_a", "y", 24, 5, 3, 1, 20);
  batch_norm(m, "x", "bn_b", 24, 30);
  m.initializer("lo", {}, {-0.5f});
  m.initializer("hi", {}, {0.5f});
  m.node("Clip", {"bn_b", "lo", "hi"}, {"act_b"}, "act_b");
  conv(m, "act_b", "z_conv", 24, 16, 1, 2, 40);
  auto& pool = m.node("MaxPool", {"z_conv"}, {"z"}, "z_pool");
  ModelBuilder::attr_ints(pool, "kernel_shape", {2, 2});
  ModelBuilder::attr_ints(pool, "strides", {2, 2});
  return m.bytes();
}

TEST_CASE("normalization read by a convolution: the dot kernels read through the affine where forced, and match the CPU") {
  const std::string bytes = affine_model();
  Options cpu_options;
  cpu_options.device = Device::Cpu;
  const Model cpu_model = Model::load_from_memory(bytes.data(), bytes.size(), cpu_options, "affine.onnx");
  for (const std::string forced : {"dot", "separate_steps"}) {
    set_log_level(LogLevel::Off);  // --force-kernel warns for every conv it cannot force
    const Model model = Model::load_from_memory(bytes.data(), bytes.size(), forced_gpu_options(forced), "affine.onnx");
    for (int64_t batch : {1, 2, 3}) {
      CAPTURE(forced);
      CAPTURE(batch);
      const std::string plan = model.describe_plan(batch);
      INFO(plan);
      const size_t fused = forced == "dot" ? 1u : 0u;
      CHECK(occurrences(plan, "note: normalization bn_a read by convolution y: one launch, dot") == fused);
      CHECK(occurrences(plan, "note: normalization bn_b read by convolution z_conv: one launch, dot") == fused);
      CHECK((plan.find("channel_affine") != std::string::npos) == (fused == 0));  // the affine steps
      const std::vector<Tensor> x = {{{batch, 24, 9, 7}, random_floats(static_cast<size_t>(batch * 24 * 63), 50)}};
      const std::vector<Tensor> gpu = Context(model).run(x);
      const std::vector<Tensor> cpu = Context(cpu_model).run(x);
      REQUIRE(gpu.size() == 2);
      CHECK(gpu[1].shape == std::vector<int64_t>{batch, 16, 2, 2});
      for (size_t k = 0; k < 2; ++k) CHECK(relative_error(gpu[k].data, cpu[k].data) < kTolerance);
    }
    set_log_level(LogLevel::Warn);
  }
}

TEST_CASE("normalization read by a convolution: DenseNet's twenty pre-activations, each read through where forced") {
  // Eighteen dense layers' BatchNormalization + ReLU before their 1x1 convolution, two transitions'; the last one
  // feeds the global pool.
  check_fused_plans({"densenet_bc", 32, "dot", "normalization ", 20, {1, 2}, INT64_MAX, 53});
  // The same on the pw kernels (1x1 at stride 1: all twenty; the transitions' pooling as a step after them).
  check_fused_plans({"densenet_bc", 32, "pw", "normalization ", 20, {1, 2}, INT64_MAX, 57});
}

}  // namespace
}  // namespace cnnrt::testing
