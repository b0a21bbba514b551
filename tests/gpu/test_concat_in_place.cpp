// Concats in place: at batch 1 a channel Concat's inputs are written straight into their blocks of its output
// (nested, as DenseNet's), and the Concats that must copy still do: a graph input as a block, one value given
// twice, a Concat that is the graph's output, a block that would start off a 64-byte line, and at batch 2
// (where the blocks are strided) every Concat of a block that is not a convolution's output read by it alone.
// At batch 2 and more, SqueezeNet's fire modules (convolutions of one input, concatenated) write their strided
// blocks in place, on every family that writes an image stride, and DenseNet's nested Concats too (their stacks
// read strided by the normalizations). Each against the CPU backend.
#include <initializer_list>
#include <string>
#include <vector>

#include "cnnrt/cnnrt.hpp"
#include "gpu_test_util.hpp"
#include "tests/model_builder.hpp"

namespace cnnrt::testing {
namespace {

void conv3x3(ModelBuilder& m, const std::string& in, const std::string& out, int64_t c, int64_t f, uint32_t seed) {
  m.initializer("w_" + out, {f, c, 3, 3}, random_floats(static_cast<size_t>(f * c * 9), seed));
  m.initializer("b_" + out, {f}, random_floats(static_cast<size_t>(f), seed + 1));
  ModelBuilder::attr_ints(m.node("Conv", {in, "w_" + out, "b_" + out}, {out}, out), "pads", {1, 1, 1, 1});
}

void concat(ModelBuilder& m, std::initializer_list<std::string> in, const std::string& out) {
  ModelBuilder::attr_int(m.node("Concat", in, {out}, out), "axis", 1);
}

// x [N, 4, 8, 8] -> t = Relu(x);  dense = Concat(Concat(t, conv(t)), conv(that))  (in place at batch 1);
// from_input = Concat(x, a) (a graph input as a block); twice = Concat(a, a); out_cat = Concat(b, a) (the
// graph's output); odd = Concat(p, q) of 1-channel 3x5 maps (the second block would start 60 bytes in);
// line = Concat(u, v) of 1-channel 4x8 maps (the second block starts 128 bytes in: in place, at batch 2 too);
// wide = Concat(c, from_input, twice) is in place again: the two copying Concats write into its blocks.
std::string dense_model() {
  ModelBuilder m;
  m.input("x", {-1, 4, 8, 8}).output("y").output("out_cat").output("z").output("w");
  m.node("Relu", {"x"}, {"t"}, "t");
  conv3x3(m, "t", "a", 4, 4, 10);
  concat(m, {"t", "a"}, "cat1");
  conv3x3(m, "cat1", "b", 8, 4, 20);
  concat(m, {"cat1", "b"}, "cat2");
  conv3x3(m, "cat2", "c", 12, 4, 30);
  concat(m, {"x", "a"}, "from_input");
  concat(m, {"a", "a"}, "twice");
  concat(m, {"c", "from_input", "twice"}, "wide");
  conv3x3(m, "wide", "y", 20, 2, 40);
  concat(m, {"b", "a"}, "out_cat");
  // Two 1-channel 3x5 maps from a strided 1x1 conv, concatenated: the second block is not 64-byte aligned.
  m.initializer("w_p", {1, 4, 1, 1}, random_floats(4, 50)).initializer("w_q", {1, 4, 1, 1}, random_floats(4, 51));
  ModelBuilder::attr_ints(m.node("Conv", {"c", "w_p"}, {"p"}, "p"), "strides", {3, 2});
  ModelBuilder::attr_ints(m.node("Conv", {"c", "w_q"}, {"q"}, "q"), "strides", {3, 2});
  concat(m, {"p", "q"}, "odd");
  m.node("Relu", {"odd"}, {"z"}, "z");
  // Two 1-channel 4x8 maps (32 floats), concatenated: the second block is 128-byte aligned, not 256.
  m.initializer("w_u", {1, 4, 1, 1}, random_floats(4, 52)).initializer("w_v", {1, 4, 1, 1}, random_floats(4, 53));
  ModelBuilder::attr_ints(m.node("Conv", {"c", "w_u"}, {"u"}, "u"), "strides", {2, 1});
  ModelBuilder::attr_ints(m.node("Conv", {"c", "w_v"}, {"v"}, "v"), "strides", {2, 1});
  concat(m, {"u", "v"}, "line");
  m.node("Sigmoid", {"line"}, {"w"}, "w");
  return m.bytes();
}

// The model `bytes` run on `inputs` by the CPU backend (outputs[0]) and the GPU (outputs[1], with `forced` as
// --force-kernel), tuned afresh, and the GPU plan at the inputs' batch.
struct CpuAndGpu {
  std::vector<std::vector<Tensor>> outputs;
  std::string plan;
};
CpuAndGpu run_on_cpu_and_gpu(const std::string& bytes, const char* name, const std::vector<Tensor>& inputs,
                             const char* forced = "") {
  const int64_t batch = inputs.at(0).shape.at(0);
  CpuAndGpu r;
  for (Device device : {Device::Cpu, Device::Gpu}) {
    Options options;
    options.device = device;
    options.batch_sizes = {batch};
    options.tuning_cache = "none";
    options.force_kernel = forced;
    const Model model = Model::load_from_memory(bytes.data(), bytes.size(), options, name);
    Context context(model);
    r.outputs.push_back(context.run(inputs));
    if (device == Device::Gpu) r.plan = model.describe_plan(batch);
  }
  return r;
}

TEST_CASE("a channel Concat at batch 1 runs in place, nested; the Concats that must copy still copy") {
  const std::string bytes = dense_model();
  for (int64_t batch : {1, 2}) {
    CAPTURE(batch);
    const std::vector<Tensor> inputs = {{{batch, 4, 8, 8}, random_floats(static_cast<size_t>(batch * 256), 60)}};
    const CpuAndGpu run = run_on_cpu_and_gpu(bytes, "dense.onnx", inputs);
    const std::vector<std::vector<Tensor>>& outputs = run.outputs;
    const std::string& plan = run.plan;
    INFO(plan);
    const std::string note =
        batch == 1 ? "concats in place (no copy): cat1, cat2, wide, line\n" : "concats in place (no copy): line\n";
    CHECK(plan.find(note) != std::string::npos);
    REQUIRE(outputs[0].size() == 4);
    // A block written to the wrong place is off by O(1); float sums in another order through four convolutions of
    // up to 180 terms (outputs of magnitude ~10) by up to ~1e-5 of max(1, |value|), which the measured kernel
    // choice (channel splits) moves from run to run.
    for (size_t k = 0; k < outputs[0].size(); ++k) {
      CAPTURE(k);
      CHECK(max_rel_error(outputs[1][k], outputs[0][k]) < 1e-4);
    }
  }
}

// x [N, 8, 8, 8] -> s = Relu(Conv1x1(x)) (4 channels); fire = Concat(Relu(Conv1x1(s)) (6), Relu(Conv3x3(s)) (10));
// apart = Concat(Conv1x1(fire) (4, no activation), Relu(Conv3x3(fire)) (12)): different activations, never merged;
// y = Conv3x3(apart) (3). 8x8 maps: every block starts on a multiple of 256 bytes.
std::string fire_model() {
  ModelBuilder m;
  m.input("x", {-1, 8, 8, 8}).output("y");
  auto conv = [&m](const std::string& in, const std::string& out, int64_t c, int64_t f, int64_t k, bool relu,
                   uint32_t seed) {
    m.initializer("w_" + out, {f, c, k, k}, random_floats(static_cast<size_t>(f * c * k * k), seed));
    m.initializer("b_" + out, {f}, random_floats(static_cast<size_t>(f), seed + 1));
    const std::string conv_out = relu ? out + "_conv" : out;
    const int64_t pad = k / 2;
    ModelBuilder::attr_ints(m.node("Conv", {in, "w_" + out, "b_" + out}, {conv_out}, conv_out), "pads", {pad, pad, pad, pad});
    if (relu) m.node("Relu", {conv_out}, {out}, out);
  };
  conv("x", "s", 8, 4, 1, true, 70);
  conv("s", "e1", 4, 6, 1, true, 72);
  conv("s", "e3", 4, 10, 3, true, 74);
  concat(m, {"e1", "e3"}, "fire");
  conv("fire", "a1", 16, 4, 1, false, 76);
  conv("fire", "a3", 16, 12, 3, true, 78);
  concat(m, {"a1", "a3"}, "apart");
  conv("apart", "y", 16, 3, 3, false, 80);
  return m.bytes();
}

// The one-output model `bytes` (input [batch, channels, 8, 8]) planned with each kernel of `forced` at each batch:
// the plan runs the Concats `in_place` names in place, and the output matches the CPU backend's.
void check_in_place(const std::string& bytes, const char* name, int64_t channels,
                    std::initializer_list<const char*> forced, std::initializer_list<int64_t> batches,
                    const std::string& in_place, uint32_t seed) {
  for (const char* kernel : forced) {
    for (int64_t batch : batches) {
      CAPTURE(kernel);
      CAPTURE(batch);
      const size_t n = static_cast<size_t>(batch * channels * 64);
      const std::vector<Tensor> inputs = {{{batch, channels, 8, 8}, random_floats(n, seed)}};
      const CpuAndGpu run = run_on_cpu_and_gpu(bytes, name, inputs, kernel);
      const std::vector<std::vector<Tensor>>& outputs = run.outputs;
      const std::string& plan = run.plan;
      INFO(plan);
      CHECK(plan.find("concats in place (no copy): " + in_place + "\n") != std::string::npos);
      REQUIRE(outputs[0].size() == 1);
      CHECK(max_rel_error(outputs[1][0], outputs[0][0]) < 1e-4);
    }
  }
}

TEST_CASE("at batch > 1 a channel Concat of convolutions read by it alone runs in place, its blocks strided") {
  // Measured choices, then each family that writes an image stride forced, and the reference; `separate_steps`
  // keeps the fire's convolutions apart (unmerged) so that they write their strided blocks.
  check_in_place(fire_model(), "fire.onnx", 8, {"separate_steps", "tc", "igemm", "dot", "direct_reference"}, {1, 2, 3, 7},
                 "fire, apart", 90);
}

// DenseNet in small: x [N, 3, 8, 8] -> s = Conv3x3 (16); per layer, y = Conv3x3(Relu(Conv1x1(Relu(BN(stack))))) (8)
// and stack = Concat(stack, y): cat1 (24), cat2 (32); a transition t = AveragePool2x2(Conv1x1(Relu(BN(cat2)))) (16,
// 4x4) and one more layer, cat3 (24); out = GlobalAveragePool(Relu(BN(cat3))). At batch > 1 every stack is a strided
// block of the next (read by its BN, written by the Concats' inputs: convolutions, a pooled one, nested Concats).
std::string dense_block_model() {
  ModelBuilder m;
  m.input("x", {-1, 3, 8, 8}).output("out");
  auto conv = [&m](const std::string& in, const std::string& out, int64_t c, int64_t f, int64_t k, uint32_t seed) {
    m.initializer("w_" + out, {f, c, k, k}, random_floats(static_cast<size_t>(f * c * k * k), seed));
    m.initializer("b_" + out, {f}, random_floats(static_cast<size_t>(f), seed + 1));
    ModelBuilder::attr_ints(m.node("Conv", {in, "w_" + out, "b_" + out}, {out}, out), "pads", {k / 2, k / 2, k / 2, k / 2});
  };
  auto bn_relu = [&m](const std::string& x, const std::string& y, int64_t c, uint32_t seed) {
    m.initializer(y + "_scale", {c}, random_floats(static_cast<size_t>(c), seed, 0.5f, 1.5f));
    m.initializer(y + "_bias", {c}, random_floats(static_cast<size_t>(c), seed + 1));
    m.initializer(y + "_mean", {c}, random_floats(static_cast<size_t>(c), seed + 2));
    m.initializer(y + "_var", {c}, random_floats(static_cast<size_t>(c), seed + 3, 0.5f, 2.0f));
    m.node("BatchNormalization", {x, y + "_scale", y + "_bias", y + "_mean", y + "_var"}, {y + "_bn"}, y + "_bn");
    m.node("Relu", {y + "_bn"}, {y}, y);
  };
  auto layer = [&](const std::string& stack, int64_t c, const std::string& out, uint32_t seed) {
    bn_relu(stack, out + "_a", c, seed);
    conv(out + "_a", out + "_b", c, 16, 1, seed + 10);
    m.node("Relu", {out + "_b"}, {out + "_c"}, out + "_c");
    conv(out + "_c", out, 16, 8, 3, seed + 20);
  };
  conv("x", "s", 3, 16, 3, 100);
  layer("s", 16, "y1", 110);
  concat(m, {"s", "y1"}, "cat1");
  layer("cat1", 24, "y2", 140);
  concat(m, {"cat1", "y2"}, "cat2");
  bn_relu("cat2", "t_a", 32, 170);
  conv("t_a", "t_b", 32, 16, 1, 180);
  auto& pool = m.node("AveragePool", {"t_b"}, {"t"}, "t");
  ModelBuilder::attr_ints(pool, "kernel_shape", {2, 2});
  ModelBuilder::attr_ints(pool, "strides", {2, 2});
  layer("t", 16, "y3", 190);
  concat(m, {"t", "y3"}, "cat3");
  bn_relu("cat3", "o", 24, 220);
  m.node("GlobalAveragePool", {"o"}, {"out"}, "gap");
  return m.bytes();
}

TEST_CASE("at batch > 1 DenseNet's nested Concats run in place, their stacks strided and read so by the normalizations") {
  // Measured choices; dot forced (its `pre` kernels read the stacks through the normalizations); each family that
  // writes an image stride; the reference.
  check_in_place(dense_block_model(), "dense_block.onnx", 3, {"", "separate_steps", "dot", "tc", "igemm", "direct_reference"},
                 {1, 2, 3}, "cat1, cat2, cat3", 230);
}

}  // namespace
}  // namespace cnnrt::testing
