// The ops the model zoo's image-to-image and mobile nets need, end to end on the GPU against the CPU backend:
// ConvTranspose (fused with its activation, 1-D, run-time weights), DepthToSpace (DCR, CRD) and SpaceToDepth,
// channel shuffle (5-D Reshape/Transpose) and a 6-D pixel shuffle, InstanceNormalization with run-time parameters,
// and a fully convolutional model with symbolic height and width planned and run for explicit input shapes (host
// and device buffers). Random inputs, never zeros.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "cnnrt/cnnrt.hpp"
#include "gpu_test_util.hpp"
#include "model_builder.hpp"

using namespace cnnrt;
using testing::ModelBuilder;

namespace {

Options options_for(Device device) {
  Options options;
  options.device = device;
  options.tuning = false;
  options.tuning_cache = "none";
  return options;
}

Model load(const ModelBuilder& m, Device device, Options options = {}) {
  Options o = options_for(device);
  o.input_shapes = options.input_shapes;
  const std::string bytes = m.bytes();
  return Model::load_from_memory(bytes.data(), bytes.size(), o, "test.onnx");
}

size_t count_of(const Shape& shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

std::vector<Tensor> random_inputs(const std::vector<Shape>& shapes, uint32_t seed) {
  std::vector<Tensor> inputs;
  for (const Shape& s : shapes) inputs.push_back({s, testing::random_floats(count_of(s), seed++)});
  return inputs;
}

// Runs `m` on both backends; every output agrees within 1e-5 (relative norm). Returns the GPU steps.
std::vector<StepTiming> check_gpu_matches_cpu(const ModelBuilder& m, const std::vector<Shape>& shapes,
                                              uint32_t seed) {
  const std::vector<Tensor> inputs = random_inputs(shapes, seed);
  const Model cpu = load(m, Device::Cpu), gpu = load(m, Device::Gpu);
  const std::vector<Tensor> want = Context(cpu).run(inputs);
  Context context(gpu);
  const std::vector<Tensor> got = context.run(inputs);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CHECK(got[i].shape == want[i].shape);
    CHECK(testing::relative_error(got[i].data, want[i].data) < 1e-5);
  }
  return context.profile(inputs, 1);
}

std::vector<std::string> kernels_of(const std::vector<StepTiming>& steps) {
  std::vector<std::string> kernels;
  for (const StepTiming& s : steps) kernels.push_back(s.kernel);
  return kernels;
}

ModelBuilder reshape_transpose(const Shape& in, const Shape& mid, const std::vector<int64_t>& perm, const Shape& out) {
  ModelBuilder m;
  m.input("x", in).output("y");
  m.int_initializer("mid", {static_cast<int64_t>(mid.size())}, mid);
  m.int_initializer("out", {static_cast<int64_t>(out.size())}, out);
  m.node("Reshape", {"x", "mid"}, {"r"}, "split_groups");
  auto& t = m.node("Transpose", {"r"}, {"t"}, "shuffle");
  ModelBuilder::attr_ints(t, "perm", perm);
  m.node("Reshape", {"t", "out"}, {"y"}, "merge_groups");
  return m;
}

}  // namespace

TEST_CASE("DepthToSpace (DCR, CRD) and SpaceToDepth run on the GPU as strided copies") {
  for (const char* mode : {"DCR", "CRD"}) {
    CAPTURE(mode);
    ModelBuilder m;
    m.input("x", {-1, 18, 7, 5}).output("y");
    auto& node = m.node("DepthToSpace", {"x"}, {"y"}, "d2s");
    ModelBuilder::attr_int(node, "blocksize", 3);
    ModelBuilder::attr_string(node, "mode", mode);
    const auto steps = check_gpu_matches_cpu(m, {{2, 18, 7, 5}}, 3000);
    CHECK(kernels_of(steps) == std::vector<std::string>{"strided_copy"});
  }
  ModelBuilder m;
  m.input("x", {-1, 3, 8, 6}).output("y");
  auto& node = m.node("SpaceToDepth", {"x"}, {"y"}, "s2d");
  ModelBuilder::attr_int(node, "blocksize", 2);
  check_gpu_matches_cpu(m, {{3, 3, 8, 6}}, 3010);
}

TEST_CASE("channel shuffle (5-D Reshape, Transpose, Reshape) and a 6-D pixel shuffle run on the GPU") {
  // ShuffleNet: x.view(n, g, c/g, h, w).transpose(1, 2).reshape(n, c, h, w) with g = 3, c = 12.
  const auto shuffle = check_gpu_matches_cpu(
      reshape_transpose({2, 12, 7, 9}, {2, 3, 4, 7, 9}, {0, 2, 1, 3, 4}, {2, 12, 7, 9}), {{2, 12, 7, 9}}, 3020);
  CHECK(kernels_of(shuffle) == std::vector<std::string>{"strided_copy"});  // the Reshapes are views
  // PixelShuffle as PyTorch's older exporters wrote it: 6-D.
  check_gpu_matches_cpu(reshape_transpose({1, 9, 31, 33}, {1, 1, 3, 3, 31, 33}, {0, 1, 4, 2, 5, 3}, {1, 1, 93, 99}),
                        {{1, 9, 31, 33}}, 3030);
}

TEST_CASE("ConvTranspose on the GPU: fused with its activation, 1-D, and with weights computed at run time") {
  SUBCASE("2x2 stride 2 up-convolution + bias + Sigmoid: one step") {
    ModelBuilder m;
    m.input("x", {-1, 8, 7, 9}).output("y");
    std::vector<float> w(8 * 4 * 2 * 2);
    for (size_t i = 0; i < w.size(); ++i) w[i] = 0.07f * static_cast<float>(i % 11) - 0.3f;
    m.initializer("w", {8, 4, 2, 2}, w).initializer("b", {4}, {0.1f, -0.1f, 0.2f, -0.3f});
    auto& up = m.node("ConvTranspose", {"x", "w", "b"}, {"u"}, "up");
    ModelBuilder::attr_ints(up, "strides", {2, 2});
    m.node("Sigmoid", {"u"}, {"y"}, "mask");
    const auto steps = check_gpu_matches_cpu(m, {{2, 8, 7, 9}}, 3040);
    REQUIRE(steps.size() == 1);
    CHECK(steps[0].kernel.rfind("conv_transpose_gather_m", 0) == 0);
    CHECK(steps[0].nodes == std::vector<std::string>{"up", "mask"});
  }
  SUBCASE("1-D, groups, stride 3, dilation 2, output_padding") {
    ModelBuilder m;
    m.input("x", {-1, 4, 1000}).output("y");
    std::vector<float> w(4 * 3 * 5);
    for (size_t i = 0; i < w.size(); ++i) w[i] = 0.5f - 0.04f * static_cast<float>(i % 23);
    m.initializer("w", {4, 3, 5}, w);
    auto& up = m.node("ConvTranspose", {"x", "w"}, {"y"}, "up");
    ModelBuilder::attr_ints(up, "strides", {3});
    ModelBuilder::attr_ints(up, "dilations", {2});
    ModelBuilder::attr_ints(up, "pads", {2, 1});
    ModelBuilder::attr_ints(up, "output_padding", {1});
    ModelBuilder::attr_int(up, "group", 2);
    check_gpu_matches_cpu(m, {{3, 4, 1000}}, 3050);
  }
  SUBCASE("weights and bias as model inputs, output_shape") {
    ModelBuilder m;
    m.input("x", {1, 3, 5, 6}).input("w", {3, 2, 3, 3}).input("b", {2}).output("y");
    auto& up = m.node("ConvTranspose", {"x", "w", "b"}, {"y"}, "up");
    ModelBuilder::attr_ints(up, "strides", {3, 2});
    ModelBuilder::attr_ints(up, "output_shape", {17, 14});
    check_gpu_matches_cpu(m, {{1, 3, 5, 6}, {3, 2, 3, 3}, {2}}, 3060);
  }
}

TEST_CASE("InstanceNormalization on the GPU, with constant and with run-time scale and bias") {
  ModelBuilder m;
  m.input("x", {-1, 3, 33, 31}).input("scale", {3}).output("y");
  m.initializer("bias", {3}, {0.5f, -0.25f, 1.0f});
  auto& norm = m.node("InstanceNormalization", {"x", "scale", "bias"}, {"y"}, "norm");
  ModelBuilder::attr_float(norm, "epsilon", 1e-3f);
  const auto steps = check_gpu_matches_cpu(m, {{2, 3, 33, 31}, {3}}, 3070);
  CHECK(kernels_of(steps) == std::vector<std::string>{"instance_norm"});
}

TEST_CASE("a fully convolutional model with symbolic H and W plans and runs for explicit input shapes") {
  const ModelBuilder m = testing::fully_convolutional_denoiser();
  Options prepared;
  prepared.input_shapes = {{{1, 1, 64, 48}}};
  const Model gpu = load(m, Device::Gpu, prepared);
  const Model cpu = load(m, Device::Cpu);
  CHECK(gpu.output_shapes({{2, 1, 33, 31}}) == std::vector<Shape>{{2, 1, 33, 31}});
  const std::string plan = gpu.describe_plan({{1, 1, 64, 48}});
  CHECK(plan.find("input  image: 1x1x64x48") != std::string::npos);

  Context context(gpu);
  for (const Shape& shape : {Shape{1, 1, 64, 48}, Shape{2, 1, 33, 31}, Shape{1, 1, 7, 1000}}) {
    CAPTURE(shape);
    const std::vector<Tensor> inputs = random_inputs({shape}, 3080);
    const std::vector<float> want = Context(cpu).run(inputs)[0].data;
    // Host buffers with explicit shapes.
    std::vector<float> host_out(count_of(shape), 0.0f);
    const float* in = inputs[0].data.data();
    float* out = host_out.data();
    context.run(&in, &out, {shape});
    CHECK(testing::relative_error(host_out, want) < 1e-5);
    // Device buffers, queued.
    testing::DeviceBuffer d_in(inputs[0].data), d_out(count_of(shape));
    const float* d_in_ptr = d_in.get();
    float* d_out_ptr = d_out.get();
    context.enqueue(&d_in_ptr, &d_out_ptr, {shape});
    context.synchronize();
    CHECK(testing::relative_error(d_out.download(), want) < 1e-5);
  }
  // Shapes the model cannot take are refused before anything runs, naming the input and the dimension.
  std::vector<float> buffer(64);
  const float* in = buffer.data();
  float* out = buffer.data();
  try {
    context.run(&in, &out, {{1, 2, 8, 8}});
    FAIL("a contradicted fixed dimension was accepted");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidInput);
    CHECK(std::string(e.what()).find("input 'image' dimension 1 is fixed at 1, got 2") != std::string::npos);
  }
}
