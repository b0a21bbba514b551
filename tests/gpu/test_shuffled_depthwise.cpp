// A channel shuffle (Reshape, Transpose of axes 1 and 2, Reshape) read only by a depthwise convolution runs as that
// convolution reading its input through the shuffle, where that measures faster than the copy and the convolution
// (plan/gpu/lower_chain.hpp): forced to the depthwise family, every such pair is one step; forced to the separate
// steps, none is. Each against the CPU backend.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "cnnrt/cnnrt.hpp"
#include "gpu_test_util.hpp"
#include "kernel_test_util.hpp"
#include "tests/model_builder.hpp"

namespace cnnrt::testing {
namespace {

// Reshape `in` [N, C, H, W] to `split` (the batch -1), swap axes 1 and 2, reshape back to [N, C, H, W].
void shuffle(ModelBuilder& m, const std::string& in, const std::string& out, std::vector<int64_t> split,
             std::vector<int64_t> joined) {
  std::vector<int64_t> perm = {0, 2, 1};
  for (size_t d = 3; d < split.size(); ++d) perm.push_back(static_cast<int64_t>(d));
  m.int_initializer(out + "_split", {static_cast<int64_t>(split.size())}, split);
  m.int_initializer(out + "_joined", {4}, joined);
  m.node("Reshape", {in, out + "_split"}, {out + "_s"}, out + "_split");
  ModelBuilder::attr_ints(m.node("Transpose", {out + "_s"}, {out + "_t"}, out), "perm", perm);
  m.node("Reshape", {out + "_t", out + "_joined"}, {out}, out + "_join");
}

void depthwise(ModelBuilder& m, const std::string& in, const std::string& out, int64_t c, int64_t k, int64_t stride,
               bool relu, uint32_t seed) {
  m.initializer("w_" + out, {c, 1, k, k}, random_floats(static_cast<size_t>(c * k * k), seed));
  m.initializer("b_" + out, {c}, random_floats(static_cast<size_t>(c), seed + 1));
  const std::string conv_out = relu ? out + "_pre" : out;
  auto& node = m.node("Conv", {in, "w_" + out, "b_" + out}, {conv_out}, out);
  ModelBuilder::attr_ints(node, "pads", {k / 2, k / 2, k / 2, k / 2});
  ModelBuilder::attr_ints(node, "strides", {stride, stride});
  ModelBuilder::attr_int(node, "group", c);
  if (relu) m.node("Relu", {conv_out}, {out}, out + "_relu");
}

// x [N, 12, 9, 11] -> Relu -> shuffle of 3 groups (5-D) -> depthwise 3x3 + bias -> shuffle of 2 groups (4-D: the
// map flattened) -> depthwise 5x5 stride 2 + bias + Relu -> y [N, 12, 5, 6].
std::string shuffles_model() {
  ModelBuilder m;
  m.input("x", {-1, 12, 9, 11}).output("y");
  m.node("Relu", {"x"}, {"t"}, "t");
  shuffle(m, "t", "shuffle_a", {-1, 3, 4, 9, 11}, {-1, 12, 9, 11});
  depthwise(m, "shuffle_a", "dw_a", 12, 3, 1, false, 10);
  shuffle(m, "dw_a", "shuffle_b", {-1, 2, 6, 99}, {-1, 12, 9, 11});
  depthwise(m, "shuffle_b", "y", 12, 5, 2, true, 20);
  return m.bytes();
}

TEST_CASE("shuffled depthwise: the depthwise kernels read through the shuffle where forced, and match the CPU") {
  const std::string bytes = shuffles_model();
  Options cpu_options;
  cpu_options.device = Device::Cpu;
  const Model cpu_model = Model::load_from_memory(bytes.data(), bytes.size(), cpu_options, "shuffles.onnx");
  for (const std::string forced : {"dw", "separate_steps"}) {
    set_log_level(LogLevel::Off);  // --force-kernel warns for every conv it cannot force
    const Model model = Model::load_from_memory(bytes.data(), bytes.size(), forced_gpu_options(forced), "shuffles.onnx");
    for (int64_t batch : {1, 2, 3}) {
      CAPTURE(forced);
      CAPTURE(batch);
      const std::string plan = model.describe_plan(batch);
      INFO(plan);
      const size_t fused = forced == "dw" ? 1u : 0u;
      CHECK(occurrences(plan, "note: channel shuffle shuffle_a and depthwise dw_a: one launch, dw_k3_s1") == fused);
      CHECK(occurrences(plan, "note: channel shuffle shuffle_b and depthwise y: one launch, dw_k5_s2") == fused);
      CHECK((plan.find("strided_copy") != std::string::npos) == (fused == 0));  // the shuffles' copies
      const std::vector<Tensor> x = {{{batch, 12, 9, 11}, random_floats(static_cast<size_t>(batch * 12 * 99), 30)}};
      const Tensor gpu = Context(model).run(x)[0];
      const Tensor cpu = Context(cpu_model).run(x)[0];
      CHECK(gpu.shape == std::vector<int64_t>{batch, 12, 5, 6});
      CHECK(relative_error(gpu.data, cpu.data) < kTolerance);
    }
    set_log_level(LogLevel::Warn);
  }
}

// Forced to `dw_k` (the depthwise family's names; `dw` would also force the pair kernel, which reads the shuffle too).
TEST_CASE("shuffled depthwise: ShuffleNet's sixteen shuffles, each read through by its depthwise layer where forced") {
  check_fused_plans({"shufflenet_v1", 224, "dw_k", "channel shuffle", 16, {1, 2}, INT64_MAX, 47});
}

}  // namespace
}  // namespace cnnrt::testing
