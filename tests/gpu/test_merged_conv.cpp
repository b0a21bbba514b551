// Convolutions of one input whose outputs are concatenated along the channels (SqueezeNet's expand layers) run as
// one convolution of all their filters where that measures faster (plan/gpu/lower_chain.hpp): forced to a kernel
// family, every such group whose filters line up is merged (zero-padded, centred filters, the Concat's order), the
// others say why not; forced to the separate steps, none is. Each against the CPU backend at batch 1 (the Concat in
// place) and beyond (the Concat a copy).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "cnnrt/cnnrt.hpp"
#include "gpu_test_util.hpp"
#include "kernel_test_util.hpp"
#include "tests/model_builder.hpp"

namespace cnnrt::testing {
namespace {

void conv(ModelBuilder& m, const std::string& in, const std::string& out, int64_t c, int64_t f, int64_t kh, int64_t kw,
          std::vector<int64_t> pads, bool relu, uint32_t seed) {
  m.initializer("w_" + out, {f, c, kh, kw}, random_floats(static_cast<size_t>(f * c * kh * kw), seed));
  m.initializer("b_" + out, {f}, random_floats(static_cast<size_t>(f), seed + 1));
  const std::string conv_out = relu ? out + "_pre" : out;
  ModelBuilder::attr_ints(m.node("Conv", {in, "w_" + out, "b_" + out}, {conv_out}, out + "_conv"), "pads", pads);
  if (relu) m.node("Relu", {conv_out}, {out}, out + "_relu");
}

// x [N, 8, 8, 8] -> t = Relu(x); y = Sigmoid(Concat(b: 3x3, a: 1x1, c: 5x3) of t, each + Relu) (merged: the 1x1
// and 3x3 filters centred in the 5x3 frame; the Concat in place: its blocks start on 256-byte multiples; a Relu there
// would be removed, the Concat then writing the graph's output);
// z = Concat(d: 1x1 + Relu, e: 3x3 without) (different activations; the graph's output, so a copy at every batch).
std::string siblings_model() {
  ModelBuilder m;
  m.input("x", {-1, 8, 8, 8}).output("y").output("z");
  m.node("Relu", {"x"}, {"t"}, "t");
  conv(m, "t", "a", 8, 5, 1, 1, {0, 0, 0, 0}, true, 10);
  conv(m, "t", "b", 8, 7, 3, 3, {1, 1, 1, 1}, true, 20);
  conv(m, "t", "c", 8, 3, 5, 3, {2, 1, 2, 1}, true, 30);
  ModelBuilder::attr_int(m.node("Concat", {"b", "a", "c"}, {"y_cat"}, "y_cat"), "axis", 1);
  m.node("Sigmoid", {"y_cat"}, {"y"}, "y");
  conv(m, "t", "d", 8, 4, 1, 1, {0, 0, 0, 0}, true, 40);
  conv(m, "t", "e", 8, 4, 3, 3, {1, 1, 1, 1}, false, 50);
  ModelBuilder::attr_int(m.node("Concat", {"d", "e"}, {"z"}, "z_cat"), "axis", 1);
  return m.bytes();
}

TEST_CASE("merged convolutions: lined-up filters become one convolution, others stay apart, both match the CPU") {
  const std::string bytes = siblings_model();
  Options cpu_options;
  cpu_options.device = Device::Cpu;
  const Model cpu_model = Model::load_from_memory(bytes.data(), bytes.size(), cpu_options, "siblings.onnx");
  for (const std::string forced : {"tc", "separate_steps"}) {
    set_log_level(LogLevel::Off);  // --force-kernel warns for every conv it cannot force
    const Model model = Model::load_from_memory(bytes.data(), bytes.size(), forced_gpu_options(forced), "siblings.onnx");
    for (int64_t batch : {1, 2}) {
      CAPTURE(forced);
      CAPTURE(batch);
      const std::string plan = model.describe_plan(batch);
      INFO(plan);
      CHECK(occurrences(plan, "note: convolutions concatenated by y_cat: one launch, tc") == (forced == "tc" ? 1u : 0u));
      CHECK(occurrences(plan, "note: convolutions concatenated by z_cat: separate steps (different activations)") == 1u);
      // In place at both batches (at batch 2 its convolutions write strided blocks, where they stay apart).
      CHECK(plan.find("concats in place (no copy): y_cat\n") != std::string::npos);
      const std::vector<Tensor> x = {{{batch, 8, 8, 8}, random_floats(static_cast<size_t>(batch * 8 * 64), 60)}};
      const std::vector<Tensor> gpu = Context(model).run(x);
      const std::vector<Tensor> cpu = Context(cpu_model).run(x);
      REQUIRE(gpu.size() == 2);
      for (size_t k = 0; k < 2; ++k) CHECK(relative_error(gpu[k].data, cpu[k].data) < kTolerance);
    }
    set_log_level(LogLevel::Warn);
  }
}

TEST_CASE("merged convolutions: SqueezeNet's eight expand pairs, merged where forced at batch 1 and 2, not at 8") {
  // At batch 8 the zero taps of every pair would add over 100 MFLOP: the note says so, and nothing is merged.
  check_fused_plans({"squeezenet", 224, "tc", "convolutions concatenated by", 8, {1, 2, 8}, 2, 43});
}

}  // namespace
}  // namespace cnnrt::testing
