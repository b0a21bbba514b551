// The graph passes (engine/src/passes): each rewrites what it should, leaves alone what it must not, logs
// one line per rewrite naming the nodes, and changes no output: every case runs on the CPU reference with
// all passes on and with all passes off, on random non-zero inputs, and the outputs agree within 1e-5.
#include <algorithm>
#include <random>
#include <utility>

#include "ir/fused.hpp"
#include "ir/ops.hpp"
#include "model_builder.hpp"
#include "onnx/loader.hpp"
#include "op_test_util.hpp"
#include "passes/passes.hpp"
#include "passes/pipeline.hpp"
#include "passes/chain_match.hpp"

using namespace cnnrt;
using cnnrt::testing::ModelBuilder;
using cnnrt::test::error_of;

namespace {

namespace fused = ir::fused;

const std::vector<std::string> kAllPasses = {"eliminate_identity",  "fold_pad",        "fold_batchnorm",
                                             "fold_bias_add",       "relu_through_concat",
                                             "fuse_composite_activation",
                                             "fuse_activation",     "fuse_residual",   "fuse_pool"};

// Uniform in [-1, -0.1] u [0.1, 1]: random, never zero.
std::vector<float> random_values(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> magnitude(0.1f, 1.0f);
  std::vector<float> values(count);
  for (float& v : values) v = rng() % 2 == 0 ? magnitude(rng) : -magnitude(rng);
  return values;
}

std::vector<float> positive_values(size_t count, uint32_t seed) {
  std::vector<float> values = random_values(count, seed);
  for (float& v : values) v = std::fabs(v) + 0.5f;
  return values;
}

size_t count_of(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return static_cast<size_t>(n);
}

// A random initializer; the seed comes from the name so that each model is the same every run.
void random_initializer(ModelBuilder& m, const std::string& name, std::vector<int64_t> dims) {
  const uint32_t seed = static_cast<uint32_t>(std::hash<std::string>{}(name));
  m.initializer(name, dims, random_values(count_of(dims), seed));
}

struct Passed {
  ir::Graph graph;
  std::vector<std::string> log;
};

// A Hopper GPU's target: its planner runs dense heads as one launch.
passes::Target gpu_target() {
  passes::Target t;
  t.dense_head_kernel = true;
  return t;
}

// Loads, binds to `shapes` and runs the passes except `disabled`, for `target`.
Passed prepare(const ModelBuilder& m, const std::vector<ir::Shape>& shapes, const std::vector<std::string>& disabled,
               const passes::Target& target = gpu_target()) {
  const std::string bytes = m.bytes();
  Passed p{onnx_io::load_model_bytes(bytes.data(), bytes.size(), "test.onnx", "", Limits{}), {}};
  passes::bind_shapes(p.graph, shapes);
  p.log = passes::run_passes(p.graph, disabled, target);
  return p;
}

std::vector<std::string> ops_of(const ir::Graph& graph) {
  std::vector<std::string> ops;
  for (const ir::Node& node : graph.nodes) ops.push_back(node.op);
  return ops;
}

// The log lines of one pass, without the "name: " prefix and without "disabled" lines.
std::vector<std::string> lines_of(const Passed& p, const std::string& pass) {
  std::vector<std::string> lines;
  const std::string prefix = pass + ": ";
  for (const std::string& line : p.log) {
    if (line.rfind(prefix, 0) == 0) lines.push_back(line.substr(prefix.size()));
  }
  return lines;
}

// Runs the model with every pass on and every pass off on random inputs of `shapes`; the outputs agree
// within 1e-5 relative (of max(1, |value|), as the op tests compare). Returns the graph with passes on.
Passed check_unchanged(const ModelBuilder& m, const std::vector<ir::Shape>& shapes) {
  Passed on = prepare(m, shapes, {});
  const Passed off = prepare(m, shapes, kAllPasses);
  std::vector<ir::HostTensor> inputs;
  for (size_t i = 0; i < shapes.size(); ++i) {
    inputs.push_back(ir::HostTensor::floats(shapes[i], random_values(count_of(shapes[i]), 1000 + i)));
  }
  const std::vector<ir::HostTensor> with = cpu::run_graph(on.graph, inputs);
  const std::vector<ir::HostTensor> without = cpu::run_graph(off.graph, inputs);
  REQUIRE(with.size() == without.size());
  for (size_t i = 0; i < with.size(); ++i) test::check_close(with[i], without[i].shape(), without[i].float_values());
  return on;
}

void conv(ModelBuilder& m, const std::string& x, const std::string& y, const std::string& name, int64_t in,
          int64_t out, bool bias = true, int64_t pad = 1) {
  random_initializer(m, name + ".w", {out, in, 3, 3});
  if (bias) random_initializer(m, name + ".b", {out});
  auto& node = bias ? m.node("Conv", {x, name + ".w", name + ".b"}, {y}, name)
                    : m.node("Conv", {x, name + ".w"}, {y}, name);
  ModelBuilder::attr_ints(node, "pads", {pad, pad, pad, pad});
}

void batch_norm(ModelBuilder& m, const std::string& x, const std::string& y, const std::string& name, int64_t c) {
  random_initializer(m, name + ".scale", {c});
  random_initializer(m, name + ".bias", {c});
  random_initializer(m, name + ".mean", {c});
  m.initializer(name + ".var", {c}, positive_values(static_cast<size_t>(c), 7));
  m.node("BatchNormalization", {x, name + ".scale", name + ".bias", name + ".mean", name + ".var"}, {y}, name);
}

}  // namespace

// ---- fold_pad ----------------------------------------------------------------------------------------

TEST_CASE("fold_pad folds a Pad of zeros into the Conv and the AveragePool after it") {
  ModelBuilder m;
  m.input("x", {2, 3, 7, 6}).output("y").output("z");
  m.int_initializer("p1", {8}, {0, 0, 1, 2, 0, 0, 2, 1});
  m.node("Pad", {"x", "p1"}, {"px"}, "pad_conv");
  conv(m, "px", "y", "conv", 3, 4);  // pads 1 of its own
  m.int_initializer("p2", {8}, {0, 0, 1, 1, 0, 0, 1, 1});
  m.node("Pad", {"x", "p2"}, {"qx"}, "pad_pool");
  auto& pool = m.node("AveragePool", {"qx"}, {"z"}, "pool");
  ModelBuilder::attr_ints(pool, "kernel_shape", {3, 3});
  ModelBuilder::attr_ints(pool, "strides", {2, 2});
  const Passed p = check_unchanged(m, {{2, 3, 7, 6}});
  REQUIRE(ops_of(p.graph) == std::vector<std::string>{"Conv", "AveragePool"});
  CHECK(p.graph.nodes[0].attrs.get_ints("pads") == std::vector<int64_t>{2, 3, 3, 2});
  CHECK(p.graph.nodes[0].covers == std::vector<std::string>{"pad_conv", "conv"});
  const ir::Node& folded = p.graph.nodes[1];
  CHECK(folded.attrs.get_ints("pads") == std::vector<int64_t>{1, 1, 1, 1});
  CHECK(folded.attrs.get_int("count_include_pad", 0) == 1);
  CHECK(folded.covers == std::vector<std::string>{"pad_pool", "pool"});
  CHECK(lines_of(p, "fold_pad") == std::vector<std::string>{"Pad 'pad_conv' + Conv 'conv' -> Conv padding 2,3,3,2",
                                                            "Pad 'pad_pool' + AveragePool 'pool' -> AveragePool "
                                                            "padding 1,1,1,1"});
}

TEST_CASE("fold_pad leaves other values, channel pads, other modes, a MaxPool, an uncounted pool pad, shared pads") {
  ModelBuilder m;
  m.input("x", {1, 2, 5, 5}).output("a").output("b").output("c").output("d").output("e").output("f");
  m.int_initializer("sp", {8}, {0, 0, 1, 1, 0, 0, 1, 1});
  m.int_initializer("cp", {8}, {0, 1, 1, 1, 0, 0, 1, 1});
  m.initializer("half", {}, {0.5f});
  auto pooled = [&](const std::string& op, const std::string& in, const std::string& out, const std::string& name,
                    int64_t pad, int64_t count_pad) {
    auto& node = m.node(op, {in}, {out}, name);
    ModelBuilder::attr_ints(node, "kernel_shape", {2, 2});
    ModelBuilder::attr_ints(node, "pads", {pad, pad, pad, pad});
    if (op == "AveragePool") ModelBuilder::attr_int(node, "count_include_pad", count_pad);
  };
  m.node("Pad", {"x", "sp", "half"}, {"p1"}, "value_half");
  conv(m, "p1", "a", "conv_a", 2, 2);
  m.node("Pad", {"x", "cp"}, {"p2"}, "channel_pad");
  conv(m, "p2", "b", "conv_b", 3, 2);
  ModelBuilder::attr_string(m.node("Pad", {"x", "sp"}, {"p3"}, "reflect"), "mode", "reflect");
  conv(m, "p3", "c", "conv_c", 2, 2);
  m.node("Pad", {"x", "sp"}, {"p4"}, "before_max");
  pooled("MaxPool", "p4", "d", "max", 0, 0);
  m.node("Pad", {"x", "sp"}, {"p5"}, "before_uncounted");
  pooled("AveragePool", "p5", "e", "uncounted", 1, 0);
  m.node("Pad", {"x", "sp"}, {"p6"}, "shared");
  conv(m, "p6", "f", "conv_f", 2, 2);
  conv(m, "p6", "g", "conv_g", 2, 2);
  m.output("g");
  const Passed p = check_unchanged(m, {{1, 2, 5, 5}});
  CHECK(lines_of(p, "fold_pad").empty());
  const std::vector<std::string> ops = ops_of(p.graph);
  CHECK(std::count(ops.begin(), ops.end(), "Pad") == 6);
}

// ---- fold_batchnorm ----------------------------------------------------------------------------------

TEST_CASE("fold_batchnorm folds BatchNormalization into the conv's weights and bias, with or without a bias") {
  for (bool bias : {true, false}) {
    ModelBuilder m;
    m.input("x", {-1, 3, 6, 6}).output("y");
    conv(m, "x", "c", "conv", 3, 4, bias);
    batch_norm(m, "c", "y", "bn", 4);
    const Passed p = check_unchanged(m, {{2, 3, 6, 6}});
    CHECK(ops_of(p.graph) == std::vector<std::string>{"Conv"});
    CHECK(p.graph.nodes[0].covers == std::vector<std::string>{"conv", "bn"});
    CHECK(lines_of(p, "fold_batchnorm") ==
          std::vector<std::string>{"Conv 'conv' + BatchNormalization 'bn' -> Conv with the batch norm in its weights "
                                   "and bias"});
    // New constants; the file's weights are untouched.
    const ir::Node& folded = p.graph.nodes[0];
    CHECK(p.graph.values[folded.input(1)].name == "bn/folded_weights");
    CHECK(p.graph.values[folded.input(2)].name == "bn/folded_bias");
    CHECK(p.graph.values[p.graph.find_value("conv.w")].constant->float_values() !=
          p.graph.values[folded.input(1)].constant->float_values());
  }
}

TEST_CASE("fold_batchnorm leaves a conv whose output has another reader") {
  ModelBuilder m;
  m.input("x", {1, 3, 6, 6}).output("y").output("c");
  conv(m, "x", "c", "conv", 3, 4);
  batch_norm(m, "c", "y", "bn", 4);
  const Passed p = check_unchanged(m, {{1, 3, 6, 6}});
  CHECK(ops_of(p.graph) == std::vector<std::string>{"Conv", "BatchNormalization"});
  CHECK(lines_of(p, "fold_batchnorm").empty());
}

// ---- fold_bias_add -----------------------------------------------------------------------------------

TEST_CASE("fold_bias_add folds per-channel Add and Mul constants into the conv") {
  for (const std::vector<int64_t>& dims : {std::vector<int64_t>{4, 1, 1}, {1, 4, 1, 1}, {1}}) {
    for (const char* op : {"Add", "Mul"}) {
      CAPTURE(op);
      CAPTURE(dims.size());
      ModelBuilder m;
      m.input("x", {1, 3, 5, 5}).output("y");
      conv(m, "x", "c", "conv", 3, 4);
      random_initializer(m, "k", dims);
      m.node(op, {"c", "k"}, {"y"}, "post");
      const Passed p = check_unchanged(m, {{1, 3, 5, 5}});
      CHECK(ops_of(p.graph) == std::vector<std::string>{"Conv"});
      CHECK(p.graph.nodes[0].covers == std::vector<std::string>{"conv", "post"});
      const std::string what = std::string(op) == "Add" ? "bias" : "weights and bias";
      CHECK(lines_of(p, "fold_bias_add") ==
            std::vector<std::string>{
                fmt::format("Conv 'conv' + {} 'post' of 'k' -> Conv with it in its {}", op, what)});
    }
  }
}

TEST_CASE("fold_bias_add folds the constant on either side, into a conv without a bias") {
  ModelBuilder m;
  m.input("x", {1, 3, 5, 5}).output("y");
  conv(m, "x", "c", "conv", 3, 4, false);
  random_initializer(m, "k", {1, 4, 1, 1});
  m.node("Add", {"k", "c"}, {"y"}, "post");
  const Passed p = check_unchanged(m, {{1, 3, 5, 5}});
  CHECK(ops_of(p.graph) == std::vector<std::string>{"Conv"});
}

TEST_CASE("fold_bias_add leaves other broadcasts, run-time operands and shared outputs") {
  SUBCASE("a [F] constant broadcasts along the width, not the channels") {
    ModelBuilder m;
    m.input("x", {1, 3, 4, 4}).output("y");
    conv(m, "x", "c", "conv", 3, 4);  // output 1x4x4x4: [4] lines up with the width
    random_initializer(m, "k", {4});
    m.node("Add", {"c", "k"}, {"y"}, "post");
    const Passed p = check_unchanged(m, {{1, 3, 4, 4}});
    CHECK(ops_of(p.graph) == std::vector<std::string>{"Conv", "Add"});
  }
  SUBCASE("a per-pixel constant") {
    ModelBuilder m;
    m.input("x", {1, 3, 4, 4}).output("y");
    conv(m, "x", "c", "conv", 3, 4);
    random_initializer(m, "k", {1, 1, 4, 4});
    m.node("Mul", {"c", "k"}, {"y"}, "post");
    const Passed p = check_unchanged(m, {{1, 3, 4, 4}});
    CHECK(ops_of(p.graph) == std::vector<std::string>{"Conv", "Mul"});
  }
  SUBCASE("a run-time operand") {
    ModelBuilder m;
    m.input("x", {1, 3, 4, 4}).input("k", {1, 4, 1, 1}).output("y");
    conv(m, "x", "c", "conv", 3, 4);
    m.node("Add", {"c", "k"}, {"y"}, "post");
    const Passed p = check_unchanged(m, {{1, 3, 4, 4}, {1, 4, 1, 1}});
    CHECK(ops_of(p.graph) == std::vector<std::string>{"Conv", "Add"});
  }
  SUBCASE("a conv output with two readers") {
    ModelBuilder m;
    m.input("x", {1, 3, 4, 4}).output("y").output("z");
    conv(m, "x", "c", "conv", 3, 4);
    random_initializer(m, "k", {1, 4, 1, 1});
    m.node("Add", {"c", "k"}, {"y"}, "post");
    m.node("Neg", {"c"}, {"z"}, "neg");
    const Passed p = check_unchanged(m, {{1, 3, 4, 4}});
    CHECK(ops_of(p.graph) == std::vector<std::string>{"Conv", "Add", "Neg"});
  }
}

TEST_CASE("fold_bias_add turns MatMul + bias Add into a Gemm with C") {
  ModelBuilder m;
  m.input("x", {-1, 6}).output("y");
  random_initializer(m, "w", {6, 5});
  random_initializer(m, "b", {5});
  m.node("MatMul", {"x", "w"}, {"h"}, "fc");
  m.node("Add", {"h", "b"}, {"y"}, "bias");
  const Passed p = check_unchanged(m, {{3, 6}});
  CHECK(ops_of(p.graph) == std::vector<std::string>{"Gemm"});
  CHECK(p.graph.nodes[0].covers == std::vector<std::string>{"fc", "bias"});
  CHECK(lines_of(p, "fold_bias_add") == std::vector<std::string>{"MatMul 'fc' + Add 'bias' -> Gemm with C 'b'"});
}

TEST_CASE("fold_bias_add leaves a batched MatMul and a bias that would widen the output") {
  ModelBuilder m;
  m.input("x", {2, 3, 6}).input("v", {1, 6}).output("y").output("z");
  random_initializer(m, "w", {6, 5});
  random_initializer(m, "b", {5});
  random_initializer(m, "wide", {4, 1});
  m.node("MatMul", {"x", "w"}, {"h"}, "batched");
  m.node("Add", {"h", "b"}, {"y"}, "bias");
  m.node("MatMul", {"v", "w"}, {"g"}, "fc");
  m.node("Add", {"g", "wide"}, {"z"}, "widening");  // [1, 5] + [4, 1] -> [4, 5]
  const Passed p = check_unchanged(m, {{2, 3, 6}, {1, 6}});
  CHECK(ops_of(p.graph) == std::vector<std::string>{"MatMul", "Add", "MatMul", "Add"});
}

// ---- fuse_activation ---------------------------------------------------------------------------------

TEST_CASE("fuse_activation fuses each activation into a conv") {
  struct Case {
    const char* op;
    const char* activation;
    float alpha;
    float beta;
  };
  for (const Case& c : {Case{"Relu", "Relu", 0, 0}, Case{"LeakyRelu", "LeakyRelu", 0.01f, 0},
                        Case{"Sigmoid", "Sigmoid", 0, 0}, Case{"Tanh", "Tanh", 0, 0},
                        Case{"Clip", "Clip", -0.5f, 0.25f}}) {
    CAPTURE(c.op);
    ModelBuilder m(11);  // Clip's min and max are inputs from opset 11 on
    m.input("x", {1, 3, 5, 5}).output("y");
    conv(m, "x", "c", "conv", 3, 4);
    if (std::string(c.op) == "Clip") {
      m.initializer("lo", {}, {-0.5f}).initializer("hi", {}, {0.25f});
      m.node("Clip", {"c", "lo", "hi"}, {"y"}, "act");
    } else {
      m.node(c.op, {"c"}, {"y"}, "act");
    }
    const Passed p = check_unchanged(m, {{1, 3, 5, 5}});
    REQUIRE(ops_of(p.graph) == std::vector<std::string>{"FusedConv"});
    const ir::Node& node = p.graph.nodes[0];
    CHECK(node.covers == std::vector<std::string>{"conv", "act"});
    CHECK(node.attrs.get_string(fused::kActivation, "") == c.activation);
    CHECK(node.attrs.get_float(fused::kConvActAlpha, -1) == doctest::Approx(c.alpha));
    if (std::string(c.op) == "Clip") CHECK(node.attrs.get_float(fused::kConvActBeta, -1) == doctest::Approx(c.beta));
    CHECK(node.input(2) == p.graph.find_value("conv.b"));
    CHECK(lines_of(p, "fuse_activation") ==
          std::vector<std::string>{fmt::format("Conv 'conv' + {} 'act' -> FusedConv", c.op)});
  }
}

TEST_CASE("fuse_activation fuses into Gemm, MatMul and MatMul + bias as FusedGemm") {
  ModelBuilder m;
  m.input("x", {2, 6}).output("y").output("z").output("u");
  random_initializer(m, "w", {5, 6});
  random_initializer(m, "w2", {6, 5});
  random_initializer(m, "b", {5});
  auto& gemm = m.node("Gemm", {"x", "w", "b"}, {"g"}, "gemm");
  ModelBuilder::attr_int(gemm, "transB", 1);
  m.node("Tanh", {"g"}, {"y"}, "tanh");
  m.node("MatMul", {"x", "w2"}, {"h"}, "mm");
  m.node("Relu", {"h"}, {"z"}, "relu");
  m.node("MatMul", {"x", "w2"}, {"k"}, "mm2");
  m.node("Add", {"k", "b"}, {"kb"}, "bias2");
  m.node("LeakyRelu", {"kb"}, {"u"}, "leaky");
  for (bool fold : {true, false}) {
    CAPTURE(fold);
    std::vector<std::string> disabled;
    if (!fold) disabled.push_back("fold_bias_add");
    const Passed p = prepare(m, {{2, 6}}, disabled);
    CHECK(ops_of(p.graph) == std::vector<std::string>{"FusedGemm", "FusedGemm", "FusedGemm"});
    const ir::Node& last = p.graph.nodes[2];
    CHECK(last.covers == std::vector<std::string>{"mm2", "bias2", "leaky"});
    CHECK(last.attrs.get_string(fused::kActivation, "") == "LeakyRelu");
    CHECK(last.attrs.get_float(fused::kGemmActAlpha, 0) == doctest::Approx(0.01f));
    CHECK(last.attrs.get_float("alpha", 0) == 1.0f);  // Gemm's own alpha
    CHECK(p.graph.nodes[0].attrs.get_int("transB", 0) == 1);
    if (!fold) {
      CHECK(lines_of(p, "fuse_activation")[2] == "MatMul 'mm2' + Add 'bias2' + LeakyRelu 'leaky' -> FusedGemm");
    }
  }
  check_unchanged(m, {{2, 6}});
}

TEST_CASE("fuse_activation fuses an activation into ConvTranspose, and leaves one whose output has another reader") {
  ModelBuilder m;
  m.input("x", {1, 4, 5, 5}).output("y").output("z").output("t");
  random_initializer(m, "up.w", {4, 3, 2, 2});  // [C, M/group, k, k]
  random_initializer(m, "up.b", {3});
  auto& up = m.node("ConvTranspose", {"x", "up.w", "up.b"}, {"u"}, "up");
  ModelBuilder::attr_ints(up, "strides", {2, 2});
  m.node("Sigmoid", {"u"}, {"y"}, "mask");
  random_initializer(m, "up2.w", {4, 2, 3, 3});
  auto& up2 = m.node("ConvTranspose", {"x", "up2.w"}, {"t"}, "up2");
  ModelBuilder::attr_ints(up2, "pads", {1, 1, 1, 1});
  m.node("Relu", {"t"}, {"z"}, "relu");  // t is also a graph output: the Relu stays
  const Passed p = check_unchanged(m, {{1, 4, 5, 5}});
  REQUIRE(ops_of(p.graph) == std::vector<std::string>{"FusedConvTranspose", "ConvTranspose", "Relu"});
  const ir::Node& node = p.graph.nodes[0];
  CHECK(node.domain == fused::kDomain);
  CHECK(node.covers == std::vector<std::string>{"up", "mask"});
  CHECK(node.attrs.get_string(fused::kActivation, "") == "Sigmoid");
  CHECK(node.attrs.get_ints("strides") == std::vector<int64_t>{2, 2});
  CHECK(node.input(2) == p.graph.find_value("up.b"));
  CHECK(*p.graph.values[node.outputs[0]].shape == ir::Shape{1, 3, 10, 10});
  CHECK(lines_of(p, "fuse_activation") ==
        std::vector<std::string>{"ConvTranspose 'up' + Sigmoid 'mask' -> FusedConvTranspose"});
  // A model file may not name the fused op.
  ModelBuilder file;
  file.input("x", {1, 4, 5, 5}).output("y");
  random_initializer(file, "w", {4, 3, 2, 2});
  file.node("FusedConvTranspose", {"x", "w"}, {"y"}, "sneaky");
  const std::string bytes = file.bytes();
  CHECK(error_of([&] { onnx_io::load_model_bytes(bytes.data(), bytes.size(), "test.onnx", "", Limits{}); }).first ==
        ErrorCode::Unsupported);
}

TEST_CASE("fuse_activation fuses an activation into a BatchNormalization no conv took, and leaves a shared one") {
  ModelBuilder m;
  m.input("a", {2, 3, 5, 5}).input("b", {2, 3, 5, 5}).output("y").output("z").output("n2");
  m.node("Add", {"a", "b"}, {"s"}, "sum");  // no conv before the batch norms: fold_batchnorm leaves them
  batch_norm(m, "s", "n1", "bn1", 3);
  ModelBuilder::attr_float(m.node("LeakyRelu", {"n1"}, {"y"}, "leaky"), "alpha", 0.2f);
  batch_norm(m, "s", "n2", "bn2", 3);
  m.node("Relu", {"n2"}, {"z"}, "relu");  // n2 is also a graph output: the Relu stays
  const Passed p = check_unchanged(m, {{2, 3, 5, 5}, {2, 3, 5, 5}});
  REQUIRE(ops_of(p.graph) == std::vector<std::string>{"Add", "FusedBatchNormalization", "BatchNormalization", "Relu"});
  const ir::Node& node = p.graph.nodes[1];
  CHECK(node.domain == fused::kDomain);
  CHECK(node.covers == std::vector<std::string>{"bn1", "leaky"});
  CHECK(node.attrs.get_string(fused::kActivation, "") == "LeakyRelu");
  CHECK(node.attrs.get_float(fused::kConvActAlpha, 0.0f) == doctest::Approx(0.2f));
  CHECK(lines_of(p, "fuse_activation") ==
        std::vector<std::string>{"BatchNormalization 'bn1' + LeakyRelu 'leaky' -> FusedBatchNormalization"});
}

TEST_CASE("fuse_activation leaves a conv output with another reader, and a pooled FusedConv") {
  ModelBuilder m;
  m.input("x", {1, 3, 6, 6}).output("y").output("z").output("c");
  conv(m, "x", "c", "conv", 3, 4);
  m.node("Relu", {"c"}, {"y"}, "relu");
  conv(m, "x", "d", "conv2", 3, 4);
  auto& pool = m.node("MaxPool", {"d"}, {"p"}, "pool");
  ModelBuilder::attr_ints(pool, "kernel_shape", {2, 2});
  ModelBuilder::attr_ints(pool, "strides", {2, 2});
  m.node("Relu", {"p"}, {"z"}, "relu2");
  Passed p = prepare(m, {{1, 3, 6, 6}}, {});
  CHECK(ops_of(p.graph) == std::vector<std::string>{"Conv", "Relu", "FusedConv", "Relu"});
  // Run again after fuse_pool: the activation after a pooled FusedConv stays outside it.
  std::vector<std::string> log;
  passes::fuse_activation(p.graph, gpu_target(), log);
  CHECK(log.empty());
  CHECK(ops_of(p.graph) == std::vector<std::string>{"Conv", "Relu", "FusedConv", "Relu"});
  check_unchanged(m, {{1, 3, 6, 6}});
}

// ---- relu_through_concat -----------------------------------------------------------------------------

namespace {

// ShuffleNet's stride-2 unit: t = Relu(conv0(x)); y = Relu(Concat(AveragePool(t), BatchNormalization(conv1(t)))).
void shuffle_unit_tail(ModelBuilder& m, bool shared_branch) {
  m.input("x", {-1, 3, 6, 6}).output("y");
  if (shared_branch) m.output("b1");
  conv(m, "x", "c0", "conv0", 3, 4);
  m.node("Relu", {"c0"}, {"t"}, "relu0");
  auto& pool = m.node("AveragePool", {"t"}, {"a"}, "pool");
  ModelBuilder::attr_ints(pool, "kernel_shape", {3, 3});
  ModelBuilder::attr_ints(pool, "strides", {2, 2});
  ModelBuilder::attr_ints(pool, "pads", {1, 1, 1, 1});
  ModelBuilder::attr_int(pool, "count_include_pad", 1);
  random_initializer(m, "conv1.w", {5, 4, 3, 3});
  auto& c1 = m.node("Conv", {"t", "conv1.w"}, {"c1"}, "conv1");
  ModelBuilder::attr_ints(c1, "pads", {1, 1, 1, 1});
  ModelBuilder::attr_ints(c1, "strides", {2, 2});
  batch_norm(m, "c1", "b1", "bn1", 5);
  ModelBuilder::attr_int(m.node("Concat", {"a", "b1"}, {"cat"}, "cat"), "axis", 1);
  m.node("Relu", {"cat"}, {"y"}, "relu");
}

}  // namespace

TEST_CASE("relu_through_concat moves a Relu after a Concat onto its one signed input, where the conv takes it") {
  ModelBuilder m;
  shuffle_unit_tail(m, false);
  const Passed p = check_unchanged(m, {{2, 3, 6, 6}});
  CHECK(ops_of(p.graph) == std::vector<std::string>{"FusedConv", "AveragePool", "FusedConv", "Concat"});
  CHECK(lines_of(p, "relu_through_concat") == std::vector<std::string>{"Relu 'relu' moved before Concat 'cat' onto 'b1'"});
  const ir::Node& branch = p.graph.nodes[2];
  CHECK(branch.covers == std::vector<std::string>{"conv1", "bn1", "relu"});
  CHECK(branch.attrs.get_string(fused::kActivation, "") == "Relu");
  CHECK(p.graph.nodes[3].outputs[0] == p.graph.find_value("y"));  // the Concat writes the graph output
}

TEST_CASE("relu_through_concat removes a Relu of a pooled Relu, a Clip from 0 and a Concat of them") {
  // y = Relu(MaxPool(Relu(conv(x)))); z = Relu(Concat(Clip(x, 0, 6), Sigmoid(x))) read by a Mul.
  ModelBuilder m;
  m.input("x", {1, 3, 6, 6}).output("y").output("w");
  conv(m, "x", "c", "conv", 3, 4);
  m.node("Relu", {"c"}, {"r"}, "relu0");
  auto& pool = m.node("MaxPool", {"r"}, {"p"}, "pool");
  ModelBuilder::attr_ints(pool, "kernel_shape", {2, 2});
  ModelBuilder::attr_ints(pool, "strides", {2, 2});
  m.node("Relu", {"p"}, {"y"}, "relu1");
  m.initializer("zero", {}, {0.0f}).initializer("six", {}, {6.0f});
  m.node("Clip", {"x", "zero", "six"}, {"k"}, "clip");
  m.node("Sigmoid", {"x"}, {"s"}, "sigmoid");
  ModelBuilder::attr_int(m.node("Concat", {"k", "s"}, {"cat"}, "cat"), "axis", 1);
  m.node("Relu", {"cat"}, {"z"}, "relu2");
  m.node("Mul", {"z", "z"}, {"w"}, "mul");
  const Passed p = check_unchanged(m, {{1, 3, 6, 6}});
  CHECK(ops_of(p.graph) == std::vector<std::string>{"FusedConv", "Clip", "Sigmoid", "Concat", "Mul"});
  CHECK(lines_of(p, "relu_through_concat") ==
        std::vector<std::string>{"Relu 'relu1' removed ('p' is not negative): MaxPool 'pool' writes 'y'",
                                 "Relu 'relu2' removed ('cat' is not negative): its readers read 'cat'"});
  CHECK(p.graph.nodes[0].outputs[0] == p.graph.find_value("y"));  // the pooled conv writes the graph output
  CHECK(p.graph.nodes[0].covers == std::vector<std::string>{"conv", "relu0", "pool", "relu1"});
  CHECK(p.graph.nodes[4].input(0) == p.graph.find_value("cat"));
}

TEST_CASE("relu_through_concat leaves two signed inputs, a shared signed input and a Concat read elsewhere") {
  SUBCASE("the signed input has another reader") {
    ModelBuilder m;
    shuffle_unit_tail(m, true);
    const Passed p = check_unchanged(m, {{1, 3, 6, 6}});
    CHECK(lines_of(p, "relu_through_concat").empty());
    CHECK(ops_of(p.graph).back() == "Relu");
  }
  SUBCASE("two signed inputs") {
    ModelBuilder m;
    m.input("x", {1, 3, 6, 6}).output("y");
    conv(m, "x", "a", "conv_a", 3, 4);
    conv(m, "x", "b", "conv_b", 3, 4);
    ModelBuilder::attr_int(m.node("Concat", {"a", "b"}, {"cat"}, "cat"), "axis", 1);
    m.node("Relu", {"cat"}, {"y"}, "relu");
    const Passed p = check_unchanged(m, {{1, 3, 6, 6}});
    CHECK(lines_of(p, "relu_through_concat").empty());
    CHECK(ops_of(p.graph) == std::vector<std::string>{"Conv", "Conv", "Concat", "Relu"});
  }
  SUBCASE("the Concat's output has another reader") {
    ModelBuilder m;
    m.input("x", {1, 3, 6, 6}).output("y").output("cat");
    m.node("Relu", {"x"}, {"r"}, "relu0");
    conv(m, "x", "b", "conv_b", 3, 3);
    ModelBuilder::attr_int(m.node("Concat", {"r", "b"}, {"cat"}, "cat"), "axis", 1);
    m.node("Relu", {"cat"}, {"y"}, "relu");
    const Passed p = check_unchanged(m, {{1, 3, 6, 6}});
    CHECK(lines_of(p, "relu_through_concat").empty());
  }
}

// ---- fuse_composite_activation -----------------------------------------------------------------------

namespace {

// x -> the activation as exporters write it, in nodes named after `name`; returns the output's name.
std::string composite(ModelBuilder& m, const std::string& kind, const std::string& x, const std::string& name,
                      bool swapped) {
  auto mul = [&](const std::string& a, const std::string& b, const std::string& out, const std::string& node) {
    if (swapped) {
      m.node("Mul", {b, a}, {out}, node);
    } else {
      m.node("Mul", {a, b}, {out}, node);
    }
  };
  const std::string y = name + ".y";
  if (kind == "SiLU") {
    m.node("Sigmoid", {x}, {name + ".s"}, name + ".sigmoid");
    mul(x, name + ".s", y, name + ".mul");
  } else if (kind == "Swish") {
    m.initializer(name + ".beta", {}, {1.702f});
    mul(x, name + ".beta", name + ".bx", name + ".scale");
    m.node("Sigmoid", {name + ".bx"}, {name + ".s"}, name + ".sigmoid");
    mul(x, name + ".s", y, name + ".mul");
  } else if (kind == "HardSwish") {
    auto& h = m.node("HardSigmoid", {x}, {name + ".h"}, name + ".hsig");
    ModelBuilder::attr_float(h, "alpha", 1.0f / 6.0f);
    mul(x, name + ".h", y, name + ".mul");
  } else {  // GELU as PyTorch exports it before opset 20
    m.initializer(name + ".sqrt2", {}, {1.41421356f}).initializer(name + ".one", {}, {1.0f});
    m.initializer(name + ".half", {}, {0.5f});
    m.node("Div", {x, name + ".sqrt2"}, {name + ".d"}, name + ".div");
    m.node("Erf", {name + ".d"}, {name + ".e"}, name + ".erf");
    if (swapped) {
      m.node("Add", {name + ".one", name + ".e"}, {name + ".a"}, name + ".add");
    } else {
      m.node("Add", {name + ".e", name + ".one"}, {name + ".a"}, name + ".add");
    }
    mul(x, name + ".a", name + ".xa", name + ".mul");
    mul(name + ".xa", name + ".half", y, name + ".half_mul");
  }
  return y;
}

}  // namespace

TEST_CASE("fuse_composite_activation: SiLU, Swish, HardSwish and GELU written as several nodes join the conv") {
  struct Case {
    const char* kind;
    const char* activation;
    float alpha;
  };
  for (const Case& c : {Case{"SiLU", "Swish", 1.0f}, Case{"Swish", "Swish", 1.702f}, Case{"HardSwish", "HardSwish", 0.0f},
                        Case{"GELU", "Gelu", 0.0f}}) {
    for (bool swapped : {false, true}) {
      CAPTURE(c.kind);
      CAPTURE(swapped);
      ModelBuilder m(14);
      m.input("x", {2, 3, 6, 6}).output("y");
      conv(m, "x", "c", "conv", 3, 5);
      m.node("Identity", {composite(m, c.kind, "c", "act", swapped)}, {"y"}, "out");
      const Passed p = check_unchanged(m, {{2, 3, 6, 6}});
      REQUIRE(ops_of(p.graph) == std::vector<std::string>{"FusedConv"});
      const ir::Node& node = p.graph.nodes[0];
      CHECK(node.attrs.get_string(fused::kActivation, "") == c.activation);
      if (std::string(c.activation) == "Swish") {
        CHECK(node.attrs.get_float(fused::kConvActAlpha, -1) == doctest::Approx(c.alpha));
      }
      REQUIRE(lines_of(p, "fuse_composite_activation").size() == 1);
      CHECK(lines_of(p, "fuse_composite_activation")[0].find(std::string("-> ") + c.activation) != std::string::npos);
    }
  }
}

TEST_CASE("fuse_composite_activation: a standalone one becomes one node; a shared intermediate stays") {
  ModelBuilder m(14);
  m.input("x", {2, 7}).output("y").output("z").output("s2");
  m.node("Identity", {composite(m, "SiLU", "x", "silu", false)}, {"y"}, "out");
  // The sigmoid's output is also a graph output: the Mul cannot take it.
  m.node("Sigmoid", {"x"}, {"s2"}, "sig2");
  m.node("Mul", {"x", "s2"}, {"z"}, "mul2");
  const Passed p = check_unchanged(m, {{2, 7}});
  CHECK(ops_of(p.graph) == std::vector<std::string>{"Swish", "Sigmoid", "Mul"});
  // HardSigmoid with other parameters is not HardSwish.
  ModelBuilder h(14);
  h.input("x", {4, 5}).output("y");
  h.node("HardSigmoid", {"x"}, {"g"}, "hsig");
  h.node("Mul", {"x", "g"}, {"y"}, "mul");
  CHECK(ops_of(check_unchanged(h, {{4, 5}}).graph) == std::vector<std::string>{"HardSigmoid", "Mul"});
}

TEST_CASE("Swish (opset 24) and Gelu (opset 20) nodes run and fuse like other activations") {
  for (const char* op : {"Swish", "Gelu", "HardSwish", "HardSigmoid"}) {
    CAPTURE(op);
    ModelBuilder m(20);
    m.input("x", {1, 3, 6, 6}).output("y");
    conv(m, "x", "c", "conv", 3, 4);
    auto& act = m.node(op, {"c"}, {"y"}, "act");
    if (std::string(op) == "Swish") ModelBuilder::attr_float(act, "alpha", 0.5f);
    const Passed p = check_unchanged(m, {{1, 3, 6, 6}});
    REQUIRE(ops_of(p.graph) == std::vector<std::string>{"FusedConv"});
    CHECK(p.graph.nodes[0].attrs.get_string(fused::kActivation, "") == op);
  }
  ModelBuilder tanh_gelu(20);
  tanh_gelu.input("x", {3, 4}).output("y");
  auto& g = tanh_gelu.node("Gelu", {"x"}, {"y"}, "gelu");
  ModelBuilder::attr_string(g, "approximate", "tanh");
  const Passed p = prepare(tanh_gelu, {{3, 4}}, {});
  const std::vector<ir::HostTensor> out =
      cpu::run_graph(p.graph, {ir::HostTensor::floats({3, 4}, {-3, -2, -1, -0.5f, 0, 0.25f, 0.5f, 1, 1.5f, 2, 3, 4})});
  const float x = 1.0f;
  CHECK(out[0].f32()[7] == doctest::Approx(0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)))));
}

// ---- fuse_residual -----------------------------------------------------------------------------------

TEST_CASE("fuse_residual takes the Add and the activation after it into the conv") {
  ModelBuilder m;
  m.input("x", {-1, 4, 5, 5}).output("y");
  conv(m, "x", "c1", "conv1", 4, 4);
  m.node("Relu", {"c1"}, {"r1"}, "relu1");
  conv(m, "r1", "c2", "conv2", 4, 4);
  m.node("Add", {"x", "c2"}, {"s"}, "add");
  m.node("Relu", {"s"}, {"y"}, "relu2");
  const Passed p = check_unchanged(m, {{2, 4, 5, 5}});
  REQUIRE(ops_of(p.graph) == std::vector<std::string>{"FusedConv", "FusedConv"});
  const ir::Node& block = p.graph.nodes[1];
  CHECK(block.covers == std::vector<std::string>{"conv2", "add", "relu2"});
  CHECK(block.input(fused::kResidualInput) == p.graph.find_value("x"));
  CHECK(block.attrs.get_string(fused::kActivation, "") == "Relu");
  CHECK(lines_of(p, "fuse_residual") ==
        std::vector<std::string>{"Conv 'conv2' + Add 'add' with residual 'x' + Relu 'relu2' -> FusedConv"});
}

TEST_CASE("fuse_residual: the later conv takes the earlier one's output as residual; no pool joins it") {
  ModelBuilder m;
  m.input("x", {1, 3, 6, 6}).output("y");
  conv(m, "x", "a", "conv_a", 3, 4);
  conv(m, "x", "b", "conv_b", 3, 4);
  m.node("Add", {"a", "b"}, {"s"}, "add");
  auto& pool = m.node("MaxPool", {"s"}, {"y"}, "pool");
  ModelBuilder::attr_ints(pool, "kernel_shape", {2, 2});
  ModelBuilder::attr_ints(pool, "strides", {2, 2});
  const Passed p = check_unchanged(m, {{1, 3, 6, 6}});
  CHECK(ops_of(p.graph) == std::vector<std::string>{"Conv", "FusedConv", "MaxPool"});
  CHECK(p.graph.nodes[1].covers == std::vector<std::string>{"conv_b", "add"});
  CHECK(!fused::has_pool(p.graph.nodes[1]));
  CHECK(lines_of(p, "fuse_pool").empty());
}

TEST_CASE("fuse_residual leaves broadcasting Adds, constant operands and shared conv outputs") {
  ModelBuilder m;
  m.input("x", {1, 3, 4, 4}).input("v", {1, 4, 1, 1}).output("y").output("z").output("w").output("d");
  conv(m, "x", "c", "conv", 3, 4);
  m.node("Add", {"c", "v"}, {"y"}, "broadcast");  // v is no residual of the conv's shape
  conv(m, "x", "e", "conv_e", 3, 4);
  random_initializer(m, "full", {1, 4, 4, 4});
  m.node("Add", {"e", "full"}, {"z"}, "constant");
  conv(m, "x", "d", "conv_d", 3, 4);
  m.node("Neg", {"d"}, {"x2"}, "neg");
  m.node("Add", {"d", "x2"}, {"w"}, "shared");  // the conv's output has two readers
  const Passed p = check_unchanged(m, {{1, 3, 4, 4}, {1, 4, 1, 1}});
  CHECK(lines_of(p, "fuse_residual").empty());
  CHECK(ops_of(p.graph) == std::vector<std::string>{"Conv", "Add", "Conv", "Add", "Conv", "Neg", "Add"});
}

// ---- fuse_pool ---------------------------------------------------------------------------------------

TEST_CASE("fuse_pool fuses every kind of window into conv + activation") {
  struct Case {
    const char* what;
    const char* op;
    std::vector<int64_t> kernel, strides, pads, dilations;
    int64_t ceil_mode;
    int64_t count_include_pad;
  };
  const std::vector<Case> cases = {
      {"max 2x2/2", "MaxPool", {2, 2}, {2, 2}, {0, 0, 0, 0}, {}, 0, 0},
      {"max 3x3/2 overlapping, padded, ceil", "MaxPool", {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, 1, 0},
      {"max 2x3/1x2 asymmetric pads", "MaxPool", {2, 3}, {1, 2}, {0, 1, 1, 0}, {}, 0, 0},
      {"max dilated", "MaxPool", {2, 2}, {1, 1}, {0, 0, 0, 0}, {2, 2}, 0, 0},
      {"average 3x3/2 padded", "AveragePool", {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, 0, 0},
      {"average counting pads, ceil", "AveragePool", {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, 1, 1},
      {"global average", "GlobalAveragePool", {}, {}, {}, {}, 0, 0},
      {"global max", "GlobalMaxPool", {}, {}, {}, {}, 0, 0},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    ModelBuilder m;
    m.input("x", {-1, 3, 7, 7}).output("y");
    conv(m, "x", "c", "conv", 3, 4);
    m.node("Relu", {"c"}, {"r"}, "relu");
    auto& pool = m.node(c.op, {"r"}, {"y"}, "pool");
    if (!c.kernel.empty()) {
      ModelBuilder::attr_ints(pool, "kernel_shape", c.kernel);
      ModelBuilder::attr_ints(pool, "strides", c.strides);
      ModelBuilder::attr_ints(pool, "pads", c.pads);
      if (!c.dilations.empty()) ModelBuilder::attr_ints(pool, "dilations", c.dilations);
      ModelBuilder::attr_int(pool, "ceil_mode", c.ceil_mode);
      if (std::string(c.op) == "AveragePool") ModelBuilder::attr_int(pool, "count_include_pad", c.count_include_pad);
    }
    const Passed p = check_unchanged(m, {{2, 3, 7, 7}});
    REQUIRE(ops_of(p.graph) == std::vector<std::string>{"FusedConv"});
    const ir::Node& node = p.graph.nodes[0];
    CHECK(node.covers == std::vector<std::string>{"conv", "relu", "pool"});
    CHECK(node.attrs.get_string(fused::kActivation, "") == "Relu");
    const bool max = std::string(c.op).find("Max") != std::string::npos;
    CHECK(node.attrs.get_string(fused::kPool, "") == (max ? "MaxPool" : "AveragePool"));
    if (!c.kernel.empty()) {
      CHECK(node.attrs.get_ints(fused::kPoolKernelShape) == c.kernel);
      CHECK(node.attrs.get_ints(fused::kPoolPads) == c.pads);
      CHECK(node.attrs.get_int(fused::kPoolCeilMode, -1) == c.ceil_mode);
    } else {
      CHECK(node.attrs.get_ints(fused::kPoolKernelShape) == std::vector<int64_t>{7, 7});
    }
    CHECK(lines_of(p, "fuse_pool") == std::vector<std::string>{fmt::format("FusedConv 'conv' + {} 'pool' -> FusedConv",
                                                                           c.op)});
  }
}

TEST_CASE("fuse_pool fuses into a plain conv, 1-D too, and leaves a conv output with another reader") {
  ModelBuilder m;
  m.input("x", {1, 2, 9}).output("y").output("z").output("c2");
  random_initializer(m, "w1", {3, 2, 3});
  m.node("Conv", {"x", "w1"}, {"c"}, "conv1d");
  auto& pool = m.node("MaxPool", {"c"}, {"y"}, "pool1d");
  ModelBuilder::attr_ints(pool, "kernel_shape", {2});
  ModelBuilder::attr_ints(pool, "strides", {2});
  random_initializer(m, "w2", {3, 2, 3});
  m.node("Conv", {"x", "w2"}, {"c2"}, "conv_shared");
  auto& pool2 = m.node("AveragePool", {"c2"}, {"z"}, "pool_shared");
  ModelBuilder::attr_ints(pool2, "kernel_shape", {2});
  const Passed p = check_unchanged(m, {{1, 2, 9}});
  CHECK(ops_of(p.graph) == std::vector<std::string>{"FusedConv", "Conv", "AveragePool"});
  CHECK(p.graph.nodes[0].attrs.get_string(fused::kActivation, "").empty());
}

TEST_CASE("fuse_pool leaves a global average pool that starts a dense head to the planner up to batch 64") {
  // x -> conv -> relu -> GlobalAveragePool -> Flatten -> Gemm: the tail of a classifier.
  auto classifier = [](const char* pool_op, bool trans_a = false) {
    ModelBuilder m;
    m.input("x", {-1, 3, 6, 6}).output("y");
    conv(m, "x", "c", "conv", 3, 4);
    m.node("Relu", {"c"}, {"r"}, "relu");
    m.node(pool_op, {"r"}, {"p"}, "gap");
    auto& flat = m.node("Flatten", {"p"}, {"f"}, "flatten");
    ModelBuilder::attr_int(flat, "axis", 1);
    std::string features = "f";
    if (trans_a) {  // the features as Gemm's A transposed: [C, batch]
      ModelBuilder::attr_ints(m.node("Transpose", {"f"}, {"ft"}, "transpose"), "perm", {1, 0});
      features = "ft";
    }
    random_initializer(m, "fc.w", {5, 4});
    auto& gemm = m.node("Gemm", {features, "fc.w"}, {"y"}, "fc");
    ModelBuilder::attr_int(gemm, "transB", 1);
    if (trans_a) ModelBuilder::attr_int(gemm, "transA", 1);
    return m;
  };
  // Where the target has no dense head kernel (the CPU backend, GPUs before compute capability 9.0), and where
  // the planner would not take the head (Gemm reads the features transposed), the pool joins the convolution.
  const Passed cpu = prepare(classifier("GlobalAveragePool"), {{1, 3, 6, 6}}, {}, passes::Target{});
  CHECK(ops_of(cpu.graph) == std::vector<std::string>{"FusedConv", "Flatten", "Gemm"});
  const Passed trans_a = check_unchanged(classifier("GlobalAveragePool", true), {{1, 3, 6, 6}});
  CHECK(ops_of(trans_a.graph) == std::vector<std::string>{"FusedConv", "Flatten", "Transpose", "Gemm"});
  for (int64_t batch : {int64_t(1), passes::kDenseHeadMaxBatch}) {
    CAPTURE(batch);
    const Passed p = check_unchanged(classifier("GlobalAveragePool"), {{batch, 3, 6, 6}});
    CHECK(ops_of(p.graph) == std::vector<std::string>{"FusedConv", "GlobalAveragePool", "Flatten", "Gemm"});
    CHECK(lines_of(p, "fuse_pool").empty());
    const auto head = passes::match_dense_chain(p.graph, 1);
    REQUIRE(head.has_value());
    CHECK(head->pool == 1);
  }
  {  // A 1-D map likewise: [batch, C, L] pooled over L.
    ModelBuilder m;
    m.input("x", {-1, 2, 9}).output("y");
    random_initializer(m, "w1", {4, 2, 3});
    m.node("Conv", {"x", "w1"}, {"c"}, "conv1d");
    m.node("GlobalAveragePool", {"c"}, {"p"}, "gap");
    auto& flat = m.node("Flatten", {"p"}, {"f"}, "flatten");
    ModelBuilder::attr_int(flat, "axis", 1);
    random_initializer(m, "fc.w", {4, 3});
    m.node("Gemm", {"f", "fc.w"}, {"y"}, "fc");
    const Passed p = check_unchanged(m, {{3, 2, 9}});
    CHECK(ops_of(p.graph) == std::vector<std::string>{"Conv", "GlobalAveragePool", "Flatten", "Gemm"});
    const auto head = passes::match_dense_chain(p.graph, 1);
    REQUIRE(head.has_value());
    CHECK(head->layers == std::vector<int>{3});
  }
  // Beyond the dense head kernel's batches, and for a global max pool, the pool joins the convolution.
  const Passed large = check_unchanged(classifier("GlobalAveragePool"), {{passes::kDenseHeadMaxBatch + 1, 3, 6, 6}});
  CHECK(ops_of(large.graph) == std::vector<std::string>{"FusedConv", "Flatten", "Gemm"});
  const Passed max = check_unchanged(classifier("GlobalMaxPool"), {{1, 3, 6, 6}});
  CHECK(ops_of(max.graph) == std::vector<std::string>{"FusedConv", "Flatten", "Gemm"});
}

// ---- eliminate_identity ------------------------------------------------------------------------------

TEST_CASE("eliminate_identity removes Identity and Dropout so that the fusions see through them") {
  ModelBuilder m(12);
  m.input("x", {1, 3, 6, 6}).output("y");
  conv(m, "x", "c", "conv", 3, 4);
  m.node("Dropout", {"c"}, {"d"}, "drop");
  m.node("Relu", {"d"}, {"r"}, "relu");
  m.node("Identity", {"r"}, {"y"}, "id");
  const Passed p = check_unchanged(m, {{1, 3, 6, 6}});
  REQUIRE(ops_of(p.graph) == std::vector<std::string>{"FusedConv"});
  // The graph output keeps its name: the fused node writes it.
  CHECK(p.graph.values[p.graph.nodes[0].outputs[0]].name == "y");
  CHECK(p.graph.nodes[0].covers == std::vector<std::string>{"conv", "drop", "relu", "id"});
  CHECK(lines_of(p, "eliminate_identity") ==
        std::vector<std::string>{"Dropout 'drop' removed: its readers read 'c'",
                                 "Identity 'id' removed: Relu 'relu' writes 'y'"});
}

TEST_CASE("eliminate_identity collapses view chains and keeps an Identity from input to output") {
  ModelBuilder m;
  m.input("x", {2, 3, 4}).output("y").output("z");
  m.node("Identity", {"x"}, {"z"}, "pass_through");
  m.node("Relu", {"x"}, {"r"}, "relu");
  auto& flat = m.node("Flatten", {"r"}, {"f"}, "flatten");
  ModelBuilder::attr_int(flat, "axis", 1);
  m.int_initializer("shape", {2}, {4, 6});
  m.node("Reshape", {"f", "shape"}, {"y"}, "reshape");
  const Passed p = check_unchanged(m, {{2, 3, 4}});
  CHECK(ops_of(p.graph) == std::vector<std::string>{"Identity", "Relu", "Reshape"});
  CHECK(p.graph.nodes[2].covers == std::vector<std::string>{"flatten", "reshape"});
  CHECK(p.graph.shape_of(p.graph.nodes[2].outputs[0]) == ir::Shape{4, 6});
  CHECK(lines_of(p, "eliminate_identity") ==
        std::vector<std::string>{"Flatten 'flatten' + Reshape 'reshape' -> one Reshape"});
}

TEST_CASE("eliminate_identity removes a Pad of zeros, so the AveragePool after it fuses; other Pads stay") {
  ModelBuilder m(13);
  m.input("x", {1, 3, 8, 8}).output("y").output("z");
  conv(m, "x", "c", "conv", 3, 4);
  m.node("Tanh", {"c"}, {"t"}, "tanh");
  m.int_initializer("zeros", {8}, {0, 0, 0, 0, 0, 0, 0, 0});
  m.node("Pad", {"t", "zeros"}, {"tp"}, "pad");  // what PyTorch writes before an AvgPool2d
  auto& pool = m.node("AveragePool", {"tp"}, {"y"}, "pool");
  ModelBuilder::attr_ints(pool, "kernel_shape", {2, 2});
  ModelBuilder::attr_ints(pool, "strides", {2, 2});
  m.int_initializer("shift", {8}, {0, 0, 1, 0, 0, 0, 0, 0});  // a row of zeros on top
  m.node("Pad", {"x", "shift"}, {"z"}, "shift_pad");
  const Passed p = check_unchanged(m, {{1, 3, 8, 8}});
  CHECK(ops_of(p.graph) == std::vector<std::string>{"FusedConv", "Pad"});
  CHECK(lines_of(p, "eliminate_identity") == std::vector<std::string>{"Pad 'pad' removed: its readers read 't'"});
}

// ---- the pipeline ------------------------------------------------------------------------------------

TEST_CASE("a LeNet-class model becomes two fused conv blocks and fused fully connected layers") {
  ModelBuilder m;
  m.input("x", {-1, 1, 12, 12}).output("y");
  conv(m, "x", "c1", "conv1", 1, 4, false, 0);  // 10x10
  batch_norm(m, "c1", "b1", "bn1", 4);
  m.node("Relu", {"b1"}, {"r1"}, "relu1");
  auto& pool1 = m.node("MaxPool", {"r1"}, {"p1"}, "pool1");  // 5x5
  ModelBuilder::attr_ints(pool1, "kernel_shape", {2, 2});
  ModelBuilder::attr_ints(pool1, "strides", {2, 2});
  conv(m, "p1", "c2", "conv2", 4, 6, false, 1);
  random_initializer(m, "bias2", {6, 1, 1});
  m.node("Add", {"c2", "bias2"}, {"a2"}, "add2");
  m.node("Relu", {"a2"}, {"r2"}, "relu2");
  auto& pool2 = m.node("MaxPool", {"r2"}, {"p2"}, "pool2");  // 3x3 with ceil_mode
  ModelBuilder::attr_ints(pool2, "kernel_shape", {2, 2});
  ModelBuilder::attr_ints(pool2, "strides", {2, 2});
  ModelBuilder::attr_int(pool2, "ceil_mode", 1);
  auto& flat = m.node("Flatten", {"p2"}, {"f"}, "flatten");
  ModelBuilder::attr_int(flat, "axis", 1);
  random_initializer(m, "fc1.w", {54, 10});
  random_initializer(m, "fc1.b", {10});
  m.node("MatMul", {"f", "fc1.w"}, {"h"}, "fc1");
  m.node("Add", {"h", "fc1.b"}, {"hb"}, "fc1_bias");
  m.node("Relu", {"hb"}, {"hr"}, "relu3");
  random_initializer(m, "fc2.w", {10, 10});
  m.node("Gemm", {"hr", "fc2.w"}, {"y"}, "fc2");
  const Passed p = check_unchanged(m, {{3, 1, 12, 12}});
  CHECK(ops_of(p.graph) == std::vector<std::string>{"FusedConv", "FusedConv", "Flatten", "FusedGemm", "Gemm"});
  CHECK(p.graph.nodes[0].covers == std::vector<std::string>{"conv1", "bn1", "relu1", "pool1"});
  CHECK(p.graph.nodes[1].covers == std::vector<std::string>{"conv2", "add2", "relu2", "pool2"});
  CHECK(p.graph.nodes[3].covers == std::vector<std::string>{"fc1", "fc1_bias", "relu3"});
}

TEST_CASE("the GPU planner's chain matcher finds conv, conv, views, Gemm and says why elsewhere") {
  // The fused LeNet-class graph: FusedConv (1 channel), FusedConv, Flatten, FusedGemm, Gemm.
  auto lenet = [](bool conv2_is_output, int64_t channels) {
    ModelBuilder m;
    m.input("x", {-1, channels, 12, 12}).output("y");
    if (conv2_is_output) m.output("r2");
    conv(m, "x", "c1", "conv1", channels, 4, true, 0);
    m.node("Relu", {"c1"}, {"r1"}, "relu1");
    conv(m, "r1", "c2", "conv2", 4, 6, true, 1);
    m.node("Relu", {"c2"}, {"r2"}, "relu2");
    auto& flat = m.node("Flatten", {"r2"}, {"f"}, "flatten");
    ModelBuilder::attr_int(flat, "axis", 1);
    random_initializer(m, "fc.w", {600, 10});
    m.node("Gemm", {"f", "fc.w"}, {"y"}, "fc");
    return m;
  };
  const Passed p = prepare(lenet(false, 1), {{2, 1, 12, 12}}, {});
  REQUIRE(ops_of(p.graph) == std::vector<std::string>{"FusedConv", "FusedConv", "Flatten", "Gemm"});
  const auto m = passes::match_conv_chain(p.graph, 0);
  REQUIRE(m.has_value());
  CHECK(m->conv_a == 0);
  CHECK(m->conv_b == 1);
  CHECK(m->views == std::vector<int>{2});
  CHECK(m->dense == 3);
  CHECK_FALSE(passes::match_conv_chain(p.graph, 1).has_value());  // starts at a 4-channel conv reading a conv
  std::string why;
  CHECK_FALSE(passes::match_conv_chain(p.graph, 3, &why).has_value());  // not a convolution: no reason given
  CHECK(why.empty());

  const Passed three = prepare(lenet(false, 3), {{2, 3, 12, 12}}, {});
  CHECK_FALSE(passes::match_conv_chain(three.graph, 0, &why).has_value());
  CHECK(why == "first convolution has more than one input channel");

  const Passed shared = prepare(lenet(true, 1), {{2, 1, 12, 12}}, {});
  CHECK_FALSE(passes::match_conv_chain(shared.graph, 0, &why).has_value());
  CHECK(why == "the second convolution's output has other readers or is a graph output");
}

TEST_CASE("the GPU planner's chain matcher takes up to two dense layers after the first; a dense head up to three") {
  // conv, conv, Flatten, Gemm, then `dense` more Gemms (Relu after each but the last), the n-th intermediate
  // a graph output when `exposed` == n.
  auto lenet = [](int dense, int exposed) {
    ModelBuilder m;
    m.input("x", {-1, 1, 12, 12}).output("y");
    conv(m, "x", "c1", "conv1", 1, 4, true, 0);
    conv(m, "c1", "c2", "conv2", 4, 6, true, 1);
    auto& flat = m.node("Flatten", {"c2"}, {"f"}, "flatten");
    ModelBuilder::attr_int(flat, "axis", 1);
    random_initializer(m, "fc.w", {600, 12});
    std::string value = "h0";
    m.node("Gemm", {"f", "fc.w"}, {dense == 0 ? "y" : value}, "fc");
    for (int i = 1; i <= dense; ++i) {
      const std::string w = "fc" + std::to_string(i) + ".w";
      random_initializer(m, w, {i == 1 ? 12 : 9, 9});
      if (exposed == i - 1 && i > 1) m.output(value);
      const std::string relu = "r" + std::to_string(i);
      m.node("Relu", {value}, {relu}, "relu" + std::to_string(i));
      const std::string out = i == dense ? "y" : "h" + std::to_string(i);
      m.node("Gemm", {relu, w}, {out}, "fc" + std::to_string(i));
      value = out;
    }
    return m;
  };
  // fc, FusedGemm x 3 (the Relus fuse into the Gemms before them): the first two after fc are taken.
  const Passed p = prepare(lenet(3, -1), {{2, 1, 12, 12}}, {});
  REQUIRE(ops_of(p.graph) == std::vector<std::string>{"Conv", "Conv", "Flatten", "FusedGemm", "FusedGemm", "FusedGemm", "Gemm"});
  auto m = passes::match_conv_chain(p.graph, 0);
  REQUIRE(m.has_value());
  CHECK(m->dense == 3);
  CHECK(m->tail == std::vector<int>{4, 5});
  // The same Gemms as a dense head (the dense chain kernel): at most three, at least two.
  const auto head = passes::match_dense_chain(p.graph, 3);
  REQUIRE(head.has_value());
  CHECK(head->layers == std::vector<int>{3, 4, 5});
  CHECK(passes::match_dense_chain(p.graph, 5)->layers == std::vector<int>{5, 6});
  CHECK_FALSE(passes::match_dense_chain(p.graph, 6).has_value());  // the last Gemm alone
  CHECK_FALSE(passes::match_dense_chain(p.graph, 1).has_value());  // not a Gemm
  // An intermediate that is a graph output ends the tail before its reader.
  const Passed exposed = prepare(lenet(3, 1), {{2, 1, 12, 12}}, {});
  m = passes::match_conv_chain(exposed.graph, 0);
  REQUIRE(m.has_value());
  CHECK(m->tail == std::vector<int>{4});
  CHECK(passes::match_dense_chain(exposed.graph, 3)->layers == std::vector<int>{3, 4});
  CHECK(passes::match_dense_chain(exposed.graph, 6)->layers == std::vector<int>{6, 7});
  const Passed none = prepare(lenet(0, -1), {{2, 1, 12, 12}}, {});
  m = passes::match_conv_chain(none.graph, 0);
  REQUIRE(m.has_value());
  CHECK(m->tail.empty());
}

TEST_CASE("the GPU planner's dense-head matcher takes a global average pool, views and Gemms") {
  auto head = [](bool pooled_is_output) {
    ModelBuilder m;
    m.input("x", {-1, 4, 6, 6}).output("y");
    if (pooled_is_output) m.output("p");
    m.node("GlobalAveragePool", {"x"}, {"p"}, "gap");
    auto& flat = m.node("Flatten", {"p"}, {"f"}, "flatten");
    ModelBuilder::attr_int(flat, "axis", 1);
    random_initializer(m, "fc.w", {4, 5});
    m.node("Gemm", {"f", "fc.w"}, {"y"}, "fc");
    return m;
  };
  const Passed p = prepare(head(false), {{2, 4, 6, 6}}, {});
  REQUIRE(ops_of(p.graph) == std::vector<std::string>{"GlobalAveragePool", "Flatten", "Gemm"});
  const auto m = passes::match_dense_chain(p.graph, 0);
  REQUIRE(m.has_value());
  CHECK(m->pool == 0);
  CHECK(m->views == std::vector<int>{1});
  CHECK(m->layers == std::vector<int>{2});
  CHECK_FALSE(passes::match_dense_chain(p.graph, 2).has_value());  // one Gemm without the pool: nothing to fuse
  const Passed exposed = prepare(head(true), {{2, 4, 6, 6}}, {});
  CHECK_FALSE(passes::match_dense_chain(exposed.graph, 0).has_value());  // the pooled values are a graph output
}

TEST_CASE("the GPU planner's squeeze-excitation matcher: pool, two 1x1 convs with their activations, Mul") {
  // x -> 3x3 conv -> Relu -> a; y = a * HardSigmoid(fc2(Relu(fc1(GlobalAveragePool(a))))) (MobileNet v3's gate).
  struct Variant {
    bool gate_first = false, pooled_is_output = false, fc1_3x3 = false, mul_other = false;
  };
  auto gate = [](const Variant& v) {
    ModelBuilder m;
    m.input("x", {-1, 8, 5, 5}).output("y");
    if (v.pooled_is_output) m.output("p");
    conv(m, "x", "c", "conv", 8, 8);
    m.node("Relu", {"c"}, {"a"}, "relu");
    m.node("GlobalAveragePool", {"a"}, {"p"}, "gap");
    random_initializer(m, "fc1.w", {4, 8, v.fc1_3x3 ? 3 : 1, v.fc1_3x3 ? 3 : 1});
    random_initializer(m, "fc1.b", {4});
    auto& fc1 = m.node("Conv", {"p", "fc1.w", "fc1.b"}, {"h"}, "fc1");
    if (v.fc1_3x3) ModelBuilder::attr_ints(fc1, "pads", {1, 1, 1, 1});
    m.node("Relu", {"h"}, {"hr"}, "fc1_relu");
    random_initializer(m, "fc2.w", {8, 4, 1, 1});
    random_initializer(m, "fc2.b", {8});
    m.node("Conv", {"hr", "fc2.w", "fc2.b"}, {"g"}, "fc2");
    m.node("HardSigmoid", {"g"}, {"s"}, "gate");
    if (v.mul_other) {
      m.node("Mul", {"x", "s"}, {"y"}, "scale");
    } else if (v.gate_first) {
      m.node("Mul", {"s", "a"}, {"y"}, "scale");
    } else {
      m.node("Mul", {"a", "s"}, {"y"}, "scale");
    }
    return m;
  };
  for (bool gate_first : {false, true}) {
    Variant v;
    v.gate_first = gate_first;
    const Passed p = check_unchanged(gate(v), {{2, 8, 5, 5}});
    REQUIRE(ops_of(p.graph) == std::vector<std::string>{"FusedConv", "GlobalAveragePool", "FusedConv", "FusedConv", "Mul"});
    const auto m = passes::match_squeeze_excite(p.graph, 1);
    REQUIRE(m.has_value());
    CHECK((std::vector<int>{m->pool, m->fc1, m->fc2, m->mul}) == std::vector<int>{1, 2, 3, 4});
    CHECK(m->x == p.graph.nodes[0].outputs[0]);
    CHECK_FALSE(passes::match_squeeze_excite(p.graph, 0).has_value());  // not a pool
  }
  Variant exposed, wide, other;
  exposed.pooled_is_output = true;
  wide.fc1_3x3 = true;
  other.mul_other = true;
  CHECK_FALSE(passes::match_squeeze_excite(prepare(gate(exposed), {{2, 8, 5, 5}}, {}).graph, 1).has_value());
  CHECK_FALSE(passes::match_squeeze_excite(prepare(gate(wide), {{2, 8, 5, 5}}, {}).graph, 1).has_value());
  CHECK_FALSE(passes::match_squeeze_excite(prepare(gate(other), {{2, 8, 5, 5}}, {}).graph, 1).has_value());
}

TEST_CASE("the GPU planner's dense-head matcher takes a 1x1 convolution read only by the head's pool") {
  // x -> conv (1x1 or 3x3, 8 -> 16) -> Clip -> GlobalAveragePool -> Flatten -> Gemm (16 -> 5).
  struct Variant {
    bool k3 = false, conv_is_output = false;
  };
  auto head = [](const Variant& v) {
    ModelBuilder m;
    m.input("x", {-1, 8, 3, 3}).output("y");
    if (v.conv_is_output) m.output("a");
    const int64_t k = v.k3 ? 3 : 1;
    random_initializer(m, "conv.w", {16, 8, k, k});
    random_initializer(m, "conv.b", {16});
    auto& c = m.node("Conv", {"x", "conv.w", "conv.b"}, {"c"}, "conv");
    if (v.k3) ModelBuilder::attr_ints(c, "pads", {1, 1, 1, 1});
    m.node("Relu", {"c"}, {"a"}, "relu");
    m.node("GlobalAveragePool", {"a"}, {"p"}, "gap");
    auto& flat = m.node("Flatten", {"p"}, {"f"}, "flatten");
    ModelBuilder::attr_int(flat, "axis", 1);
    random_initializer(m, "fc.w", {5, 16});
    auto& gemm = m.node("Gemm", {"f", "fc.w"}, {"y"}, "fc");
    ModelBuilder::attr_int(gemm, "transB", 1);
    return m;
  };
  const Passed p = check_unchanged(head({}), {{1, 8, 3, 3}});
  REQUIRE(ops_of(p.graph) == std::vector<std::string>{"FusedConv", "GlobalAveragePool", "Flatten", "Gemm"});
  const auto m = passes::match_dense_chain(p.graph, 0);
  REQUIRE(m.has_value());
  CHECK(m->conv == 0);
  CHECK(m->pool == 1);
  CHECK(m->views == std::vector<int>{2});
  CHECK(m->layers == std::vector<int>{3});
  CHECK(passes::match_dense_chain(p.graph, 1)->conv == -1);  // from the pool: the head without the convolution
  // Not a 1x1 convolution; its output also a graph output (so fuse_pool's pool stays, but the convolution must
  // write it).
  Variant k3, exposed;
  k3.k3 = true;
  exposed.conv_is_output = true;
  const Passed wide = check_unchanged(head(k3), {{1, 8, 3, 3}});
  REQUIRE(ops_of(wide.graph) == std::vector<std::string>{"FusedConv", "GlobalAveragePool", "Flatten", "Gemm"});
  CHECK_FALSE(passes::match_dense_chain(wide.graph, 0).has_value());
  const Passed out = check_unchanged(head(exposed), {{1, 8, 3, 3}});
  REQUIRE(out.graph.nodes[0].op == "FusedConv");
  CHECK_FALSE(passes::match_dense_chain(out.graph, 0).has_value());
}

TEST_CASE("the GPU planner's depthwise + pointwise matcher: a depthwise conv read only by a 1x1 conv") {
  // x -> [z = 3x3 conv(x)] -> 3x3 depthwise (group 8) -> Relu -> 1x1 conv (8 -> 16) [+ z] -> Relu -> y.
  struct Variant {
    bool mid_is_output = false, pw_3x3 = false, not_depthwise = false, residual = false;
  };
  auto pair = [](const Variant& v) {
    ModelBuilder m;
    m.input("x", {-1, 8, 6, 6}).output("y");
    if (v.mid_is_output) m.output("d");
    if (v.residual) conv(m, "x", "z", "side", 8, 16);
    random_initializer(m, "dw.w", {8, v.not_depthwise ? 8 : 1, 3, 3});
    random_initializer(m, "dw.b", {8});
    auto& dw = m.node("Conv", {"x", "dw.w", "dw.b"}, {"d"}, "dw");
    ModelBuilder::attr_ints(dw, "pads", {1, 1, 1, 1});
    if (!v.not_depthwise) ModelBuilder::attr_int(dw, "group", 8);
    m.node("Relu", {"d"}, {"dr"}, "dw_relu");
    const int64_t k = v.pw_3x3 ? 3 : 1;
    random_initializer(m, "pw.w", {16, 8, k, k});
    auto& pw = m.node("Conv", {"dr", "pw.w"}, {v.residual ? "p" : "pr"}, "pw");
    if (v.pw_3x3) ModelBuilder::attr_ints(pw, "pads", {1, 1, 1, 1});
    if (v.residual) m.node("Add", {"p", "z"}, {"pr"}, "add");
    m.node("Relu", {"pr"}, {"y"}, "pw_relu");
    return m;
  };
  {
    const Passed p = check_unchanged(pair(Variant{}), {{2, 8, 6, 6}});
    REQUIRE(ops_of(p.graph) == std::vector<std::string>{"FusedConv", "FusedConv"});
    const auto m = passes::match_dw_pw(p.graph, 0);
    REQUIRE(m.has_value());
    CHECK(m->dw == 0);
    CHECK(m->pw == 1);
    CHECK_FALSE(passes::match_dw_pw(p.graph, 1).has_value());  // a 1x1 conv is not depthwise
  }
  Variant residual;
  residual.residual = true;
  const Passed r = check_unchanged(pair(residual), {{2, 8, 6, 6}});
  REQUIRE(ops_of(r.graph) == std::vector<std::string>{"Conv", "FusedConv", "FusedConv"});
  CHECK(r.graph.nodes[2].has_input(ir::fused::kResidualInput));
  const auto m = passes::match_dw_pw(r.graph, 1);
  REQUIRE(m.has_value());
  CHECK(m->pw == 2);
  Variant exposed, wide, dense;
  exposed.mid_is_output = true;
  wide.pw_3x3 = true;
  dense.not_depthwise = true;
  CHECK_FALSE(passes::match_dw_pw(prepare(pair(exposed), {{2, 8, 6, 6}}, {}).graph, 0).has_value());
  CHECK_FALSE(passes::match_dw_pw(prepare(pair(wide), {{2, 8, 6, 6}}, {}).graph, 0).has_value());
  CHECK_FALSE(passes::match_dw_pw(prepare(pair(dense), {{2, 8, 6, 6}}, {}).graph, 0).has_value());
  // The residual's producer after the depthwise conv (a valid order too): the pair, run where the depthwise conv
  // is, would read it before it is written.
  ir::Graph late = r.graph;
  std::swap(late.nodes[0], late.nodes[1]);
  late.relink();
  CHECK_FALSE(passes::match_dw_pw(late, 0).has_value());
}

TEST_CASE("the GPU planner's shuffle matcher: a channel shuffle read only by a depthwise convolution") {
  // x [2, 6, 5, 5] -> Relu -> t -> Reshape [2, 3, 2, 5, 5] (or [2, 3, 2, 25]) -> Transpose -> Reshape [2, 6, 5, 5]
  // -> depthwise 3x3 conv -> y.
  struct Variant {
    bool rank4 = false, other_perm = false, grouped_conv = false, other_reader = false;
  };
  auto model = [](const Variant& v) {
    ModelBuilder m;
    m.input("x", {2, 6, 5, 5}).output("y");
    m.node("Relu", {"x"}, {"t"}, "t");
    m.int_initializer("split", {v.rank4 ? 4 : 5},
                      v.rank4 ? std::vector<int64_t>{2, 3, 2, 25} : std::vector<int64_t>{2, 3, 2, 5, 5});
    m.int_initializer("joined", {4}, {2, 6, 5, 5});
    m.node("Reshape", {"t", "split"}, {"s"}, "split");
    std::vector<int64_t> perm = v.rank4 ? std::vector<int64_t>{0, 2, 1, 3} : std::vector<int64_t>{0, 2, 1, 3, 4};
    if (v.other_perm) perm = {0, 2, 1, 4, 3};
    ModelBuilder::attr_ints(m.node("Transpose", {"s"}, {"p"}, "shuffle"), "perm", perm);
    m.node("Reshape", {"p", "joined"}, {"u"}, "join");
    const int64_t group = v.grouped_conv ? 3 : 6;
    random_initializer(m, "dw.w", {6, 6 / group, 3, 3});
    auto& dw = m.node("Conv", {"u", "dw.w"}, {"y"}, "dw");
    ModelBuilder::attr_ints(dw, "pads", {1, 1, 1, 1});
    ModelBuilder::attr_int(dw, "group", group);
    if (v.other_reader) {
      m.output("z");
      m.node("Relu", {"p"}, {"z"}, "z");
    }
    return m;
  };
  for (bool rank4 : {false, true}) {
    Variant v;
    v.rank4 = rank4;
    const Passed p = check_unchanged(model(v), {{2, 6, 5, 5}});
    REQUIRE(ops_of(p.graph) == std::vector<std::string>{"Relu", "Reshape", "Transpose", "Reshape", "Conv"});
    const auto m = passes::match_shuffled_depthwise(p.graph, 2);
    REQUIRE(m.has_value());
    CHECK(m->transpose == 2);
    CHECK(m->dw == 4);
    CHECK(m->views == std::vector<int>{3});
    CHECK(m->groups == 3);
    CHECK_FALSE(passes::match_shuffled_depthwise(p.graph, 4).has_value());  // not a Transpose
  }
  Variant other_perm, grouped, read_twice;
  other_perm.other_perm = true;
  grouped.grouped_conv = true;
  read_twice.other_reader = true;
  for (const Variant& v : {other_perm, grouped, read_twice}) {
    const Passed q = prepare(model(v), {{2, 6, 5, 5}}, {});
    REQUIRE(q.graph.nodes.size() >= 3);
    REQUIRE(q.graph.nodes[2].op == "Transpose");
    CHECK_FALSE(passes::match_shuffled_depthwise(q.graph, 2).has_value());
  }
}

TEST_CASE("the GPU planner's shuffled unit matcher: a shuffle, a depthwise and a grouped 1x1 convolution") {
  // x [2, 6, 5, 5] -> Relu -> Reshape [2, 3, 2, 5, 5] -> Transpose -> Reshape [2, 6, 5, 5] -> depthwise 3x3 -> 1x1 of
  // 3 groups (or 3x3) -> + x -> Relu -> y; the depthwise output also a graph output, or not.
  auto model = [](bool pw_3x3, bool exposed) {
    ModelBuilder m;
    m.input("x", {2, 6, 5, 5}).output("y");
    m.node("Relu", {"x"}, {"t"}, "t");
    m.int_initializer("split", {5}, {2, 3, 2, 5, 5});
    m.int_initializer("joined", {4}, {2, 6, 5, 5});
    m.node("Reshape", {"t", "split"}, {"s"}, "split");
    ModelBuilder::attr_ints(m.node("Transpose", {"s"}, {"p"}, "shuffle"), "perm", {0, 2, 1, 3, 4});
    m.node("Reshape", {"p", "joined"}, {"u"}, "join");
    random_initializer(m, "dw.w", {6, 1, 3, 3});
    auto& dw = m.node("Conv", {"u", "dw.w"}, {"d"}, "dw");
    ModelBuilder::attr_ints(dw, "pads", {1, 1, 1, 1});
    ModelBuilder::attr_int(dw, "group", 6);
    random_initializer(m, "pw.w", {6, 2, pw_3x3 ? 3 : 1, pw_3x3 ? 3 : 1});
    auto& pw = m.node("Conv", {"d", "pw.w"}, {"e"}, "pw");
    if (pw_3x3) ModelBuilder::attr_ints(pw, "pads", {1, 1, 1, 1});
    ModelBuilder::attr_int(pw, "group", 3);
    m.node("Add", {"e", "x"}, {"r"}, "add");
    m.node("Relu", {"r"}, {"y"}, "relu");
    if (exposed) m.output("d");
    return m;
  };
  auto transpose_of = [](const ir::Graph& g) {
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      if (g.nodes[i].op == "Transpose") return static_cast<int>(i);
    }
    return -1;
  };
  const Passed p = check_unchanged(model(false, false), {{2, 6, 5, 5}});
  const int tr = transpose_of(p.graph);
  REQUIRE(tr >= 0);
  const auto m = passes::match_shuffled_dw_pw(p.graph, tr);
  REQUIRE(m.has_value());
  CHECK(m->shuffle.transpose == tr);
  CHECK(m->shuffle.groups == 3);
  CHECK(m->pair.dw == m->shuffle.dw);
  const ir::Node& pw = p.graph.nodes[static_cast<size_t>(m->pair.pw)];
  CHECK(pw.attrs.get_int("group", 1) == 3);
  CHECK(pw.has_input(ir::fused::kResidualInput));  // the Add, fused into the pointwise convolution
  CHECK_FALSE(passes::match_shuffled_dw_pw(p.graph, m->pair.dw).has_value());  // not a Transpose
  for (const auto& [pw_3x3, exposed] : {std::pair{true, false}, std::pair{false, true}}) {
    const Passed q = prepare(model(pw_3x3, exposed), {{2, 6, 5, 5}}, {});
    const int t = transpose_of(q.graph);
    REQUIRE(t >= 0);
    CHECK_FALSE(passes::match_shuffled_dw_pw(q.graph, t).has_value());
  }
}

TEST_CASE("the GPU planner's pre-activation matcher: a BatchNormalization read only by a convolution") {
  // x [2, 4, 6, 6] -> BatchNormalization -> Relu -> 3x3 conv -> y [, the activation also a graph output].
  auto model = [](bool exposed) {
    ModelBuilder m;
    m.input("x", {2, 4, 6, 6}).output("y");
    batch_norm(m, "x", "n", "bn", 4);
    m.node("Relu", {"n"}, {"a"}, "relu");
    conv(m, "a", "y", "conv", 4, 5);
    if (exposed) m.output("a");
    return m;
  };
  const Passed p = check_unchanged(model(false), {{2, 4, 6, 6}});
  REQUIRE(ops_of(p.graph) == std::vector<std::string>{ir::fused::kFusedBatchNorm, "Conv"});
  const auto m = passes::match_affine_conv(p.graph, 0);
  REQUIRE(m.has_value());
  CHECK(m->affine == 0);
  CHECK(m->conv == 1);
  CHECK_FALSE(passes::match_affine_conv(p.graph, 1).has_value());  // not a BatchNormalization
  const Passed q = prepare(model(true), {{2, 4, 6, 6}}, {});
  REQUIRE(q.graph.nodes.size() == 2);
  CHECK_FALSE(passes::match_affine_conv(q.graph, 0).has_value());  // its output is the graph's too
}

TEST_CASE("the GPU planner's dense layer matcher: a BatchNormalization, a 1x1 and a padded 3x3 convolution") {
  // x [2, 4, 6, 6] -> BatchNormalization -> Relu -> 1x1 conv (8) -> Relu -> 3x3 conv (3, padding `pad`) -> y
  // [, the hidden activation also a graph output].
  auto model = [](int64_t pad, bool exposed) {
    ModelBuilder m;
    m.input("x", {2, 4, 6, 6}).output("y");
    batch_norm(m, "x", "n", "bn", 4);
    m.node("Relu", {"n"}, {"a"}, "relu");
    random_initializer(m, "pw.w", {8, 4, 1, 1});
    m.node("Conv", {"a", "pw.w"}, {"h"}, "pw");
    m.node("Relu", {"h"}, {"r"}, "relu2");
    conv(m, "r", "y", "conv", 8, 3, false, pad);
    if (exposed) m.output("r");
    return m;
  };
  const Passed p = check_unchanged(model(1, false), {{2, 4, 6, 6}});
  REQUIRE(ops_of(p.graph) == std::vector<std::string>{ir::fused::kFusedBatchNorm, ir::fused::kFusedConv, "Conv"});
  const auto m = passes::match_dense_layer(p.graph, 0);
  REQUIRE(m.has_value());
  CHECK(m->affine == 0);
  CHECK(m->pw == 1);
  CHECK(m->conv == 2);
  CHECK_FALSE(passes::match_dense_layer(p.graph, 1).has_value());  // not a BatchNormalization
  // A 3x3 without padding (a 4x4 map), and the hidden activation a graph output too.
  CHECK_FALSE(passes::match_dense_layer(prepare(model(0, false), {{2, 4, 6, 6}}, {}).graph, 0).has_value());
  CHECK_FALSE(passes::match_dense_layer(prepare(model(1, true), {{2, 4, 6, 6}}, {}).graph, 0).has_value());
  // DenseNet-BC of the zoo: its eighteen bottleneck layers (not the transitions' 1x1 + pool).
  ir::Graph g = onnx_io::load_model_file(std::string(CNNRT_SOURCE_DIR) + "/models/zoo/densenet_bc/model.onnx", Limits{});
  passes::bind_shapes(g, {{1, 3, 32, 32}});
  passes::run_passes(g, {}, gpu_target());
  int layers = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) layers += passes::match_dense_layer(g, static_cast<int>(i)).has_value();
  CHECK(layers == 18);
}

TEST_CASE("the GPU planner's sibling-convolution matcher: convolutions of one input joined by one channel Concat") {
  // x -> Relu -> t; a = 3x3 conv(t), b = 3x3 conv(t) [, c = 3x3 conv(t) read by another node too]; y = Concat(b, a).
  struct Variant {
    int64_t axis = 1;
    bool other_reader = false, other_input = false;
  };
  auto model = [](const Variant& v) {
    ModelBuilder m;
    m.input("x", {-1, 4, 6, 6}).output("y");
    m.node("Relu", {"x"}, {"t"}, "t");
    conv(m, "t", "a", "a", 4, 3);
    conv(m, v.other_input ? "x" : "t", "b", "b", 4, v.axis == 1 ? 5 : 3);  // (along H: equal channels)
    ModelBuilder::attr_int(m.node("Concat", {"b", "a"}, {"y"}, "cat"), "axis", v.axis);
    if (v.other_reader) {
      m.output("z");
      m.node("Relu", {"a"}, {"z"}, "z");
    }
    return m;
  };
  const Passed p = check_unchanged(model(Variant{}), {{2, 4, 6, 6}});
  REQUIRE(ops_of(p.graph) == std::vector<std::string>{"Relu", "Conv", "Conv", "Concat"});
  const auto m = passes::match_sibling_convs(p.graph, 1);
  REQUIRE(m.has_value());
  CHECK(m->convs == std::vector<int>{2, 1});  // the Concat's order
  CHECK(m->concat == 3);
  CHECK_FALSE(passes::match_sibling_convs(p.graph, 2).has_value());  // not the first of them in graph order
  CHECK_FALSE(passes::match_sibling_convs(p.graph, 0).has_value());  // not a convolution
  Variant other_axis, read_twice, two_inputs;
  other_axis.axis = 2;
  read_twice.other_reader = true;
  two_inputs.other_input = true;
  for (const Variant& v : {other_axis, read_twice, two_inputs}) {
    const Passed q = prepare(model(v), {{2, 4, 6, 6}}, {});
    REQUIRE(q.graph.nodes.size() >= 3);
    REQUIRE(q.graph.nodes[1].op == "Conv");  // the first convolution, as in the graph above
    CHECK_FALSE(passes::match_sibling_convs(q.graph, 1).has_value());
  }
}

TEST_CASE("the GPU planner's convolution + 1x1 matcher: a convolution or siblings read only by a 1x1 convolution") {
  // x -> 3x3 conv a -> Relu -> 1x1 conv p (-> Relu) -> y; siblings: 3x3 b and 3x3 c of x -> Concat -> 1x1 q -> z.
  struct Variant {
    bool a_output = false;   // a's activation is a graph output too
    int64_t p_stride = 1;    // the 1x1 layer's stride (2: not over the same map)
    int64_t p_kernel = 1;    // its kernel (3: not a 1x1 layer)
  };
  auto model = [](const Variant& v) {
    ModelBuilder m;
    m.input("x", {-1, 4, 6, 6}).output("y").output("z");
    conv(m, "x", "a", "a", 4, 8);
    m.node("Relu", {"a"}, {"ra"}, "ra");
    if (v.a_output) {
      m.output("w");
      m.node("Sigmoid", {"ra"}, {"w"}, "w");
    }
    random_initializer(m, "p.w", {5, 8, v.p_kernel, v.p_kernel});
    ModelBuilder::attr_ints(m.node("Conv", {"ra", "p.w"}, {"y"}, "p"), "strides", {v.p_stride, v.p_stride});
    conv(m, "x", "b", "b", 4, 3);
    conv(m, "x", "c", "c", 4, 2);
    ModelBuilder::attr_int(m.node("Concat", {"b", "c"}, {"bc"}, "cat"), "axis", 1);
    random_initializer(m, "q.w", {6, 5, 1, 1});
    m.node("Conv", {"bc", "q.w"}, {"z"}, "q");
    return m;
  };
  const Passed p = check_unchanged(model(Variant{}), {{2, 4, 6, 6}});
  REQUIRE(ops_of(p.graph) == std::vector<std::string>{ir::fused::kFusedConv, "Conv", "Conv", "Conv", "Concat", "Conv"});
  const auto single = passes::match_conv_pointwise(p.graph, 0);
  REQUIRE(single.has_value());
  CHECK(single->convs == std::vector<int>{0});
  CHECK(single->concat == -1);
  CHECK(single->pw == 1);
  CHECK(single->nodes() == std::vector<int>{0, 1});
  const auto siblings = passes::match_conv_pointwise(p.graph, 2);
  REQUIRE(siblings.has_value());
  CHECK(siblings->convs == std::vector<int>{2, 3});
  CHECK(siblings->concat == 4);
  CHECK(siblings->pw == 5);
  CHECK(siblings->nodes() == std::vector<int>{2, 3, 4, 5});
  CHECK_FALSE(passes::match_conv_pointwise(p.graph, 1).has_value());  // the 1x1 layer's output is a graph output
  CHECK_FALSE(passes::match_conv_pointwise(p.graph, 3).has_value());  // not the first sibling
  Variant read_twice, strided, wide;
  read_twice.a_output = true;
  strided.p_stride = 2;
  wide.p_kernel = 3;
  for (const Variant& v : {read_twice, strided, wide}) {
    const Passed q = prepare(model(v), {{2, 4, 6, 6}}, {});
    REQUIRE(q.graph.nodes[0].op == ir::fused::kFusedConv);
    CHECK_FALSE(passes::match_conv_pointwise(q.graph, 0).has_value());
  }
  // SqueezeNet of the zoo: five fire modules' expand layers read only by the next squeeze layer (the other three
  // go to a max pool or to the classifier).
  ir::Graph g = onnx_io::load_model_file(std::string(CNNRT_SOURCE_DIR) + "/models/zoo/squeezenet/model.onnx", Limits{});
  passes::bind_shapes(g, {{1, 3, 224, 224}});
  passes::run_passes(g, {}, gpu_target());
  int pairs = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const auto pair = passes::match_conv_pointwise(g, static_cast<int>(i));
    pairs += pair.has_value() && pair->concat >= 0;
  }
  CHECK(pairs == 5);
}

namespace {

// x[1,3,6,6] -> conv -> relu -> 2x2/2 max pool -> y: the smallest graph every fusing pass touches.
ModelBuilder conv_relu_pool() {
  ModelBuilder m;
  m.input("x", {1, 3, 6, 6}).output("y");
  conv(m, "x", "c", "conv", 3, 4);
  m.node("Relu", {"c"}, {"r"}, "relu");
  auto& pool = m.node("MaxPool", {"r"}, {"y"}, "pool");
  ModelBuilder::attr_ints(pool, "kernel_shape", {2, 2});
  ModelBuilder::attr_ints(pool, "strides", {2, 2});
  return m;
}

}  // namespace

TEST_CASE("passes are disabled by name; an unknown name is a Usage error listing the passes") {
  ModelBuilder m = conv_relu_pool();

  const Passed without_pool = prepare(m, {{1, 3, 6, 6}}, {"fuse_pool"});
  CHECK(ops_of(without_pool.graph) == std::vector<std::string>{"FusedConv", "MaxPool"});
  CHECK(std::find(without_pool.log.begin(), without_pool.log.end(), "fuse_pool: disabled") != without_pool.log.end());
  const Passed without_activation = prepare(m, {{1, 3, 6, 6}}, {"fuse_activation"});
  CHECK(ops_of(without_activation.graph) == std::vector<std::string>{"Conv", "Relu", "MaxPool"});
  const Passed all = prepare(m, {{1, 3, 6, 6}}, {});
  CHECK(ops_of(all.graph) == std::vector<std::string>{"FusedConv"});

  std::vector<std::string> names;
  for (const passes::PassInfo& info : passes::all_passes()) names.emplace_back(info.name);
  CHECK(names == kAllPasses);
  auto [code, message] = error_of([&] { prepare(m, {{1, 3, 6, 6}}, {"fuse_everything"}); });
  CHECK(code == ErrorCode::Usage);
  CHECK(message == "unknown pass 'fuse_everything' (passes: eliminate_identity, fold_pad, fold_batchnorm, fold_bias_add, "
                   "relu_through_concat, fuse_composite_activation, fuse_activation, fuse_residual, fuse_pool)");
}

TEST_CASE("fused ops: inference checks what the passes wrote; model files may not use them") {
  ModelBuilder m = conv_relu_pool();
  Passed p = prepare(m, {{1, 3, 6, 6}}, {});
  ir::Node& node = p.graph.nodes.at(0);
  const ir::OpInfo* info = ir::find_op(fused::kFusedConv);
  REQUIRE(info != nullptr);
  info->infer(node, p.graph, p.graph.opset);
  CHECK(p.graph.shape_of(node.outputs[0]) == ir::Shape{1, 4, 3, 3});
  node.inputs.push_back(p.graph.find_value("c"));  // a residual (of the conv output's shape) with a pool
  CHECK(error_of([&] { info->infer(node, p.graph, p.graph.opset); }).second ==
        "a residual and a pool cannot be fused together");
  node.inputs.pop_back();
  node.attrs.set(fused::kActivation, std::string("Softplus"));
  CHECK(error_of([&] { info->infer(node, p.graph, p.graph.opset); }).second ==
        "activation 'Softplus' cannot be fused (Relu, LeakyRelu, Clip, Sigmoid, Tanh, HardSigmoid, HardSwish, "
        "Swish, Gelu can)");

  const auto names = ir::supported_ops();
  CHECK(std::find(names.begin(), names.end(), fused::kFusedConv) == names.end());
  ModelBuilder file;
  file.input("x", {1, 3, 6, 6}).output("y");
  random_initializer(file, "w", {4, 3, 3, 3});
  file.node("FusedConv", {"x", "w"}, {"y"}, "sneaky");
  const std::string bytes = file.bytes();
  CHECK(error_of([&] { onnx_io::load_model_bytes(bytes.data(), bytes.size(), "test.onnx", "", Limits{}); }).first ==
        ErrorCode::Unsupported);
}

TEST_CASE("through the public API: Options::disabled_passes, the plan's pass log and fused steps' names") {
  ModelBuilder m;
  m.input("x", {-1, 3, 6, 6}).output("y");
  conv(m, "x", "c", "conv", 3, 4);
  m.node("Relu", {"c"}, {"r"}, "relu");
  auto& pool = m.node("MaxPool", {"r"}, {"y"}, "pool");
  ModelBuilder::attr_ints(pool, "kernel_shape", {2, 2});
  ModelBuilder::attr_ints(pool, "strides", {2, 2});
  const std::string bytes = m.bytes();
  Options options;
  options.device = Device::Cpu;
  const std::string all = Model::load_from_memory(bytes.data(), bytes.size(), options).describe_plan(2);
  CHECK(all.find("fuse_pool: FusedConv 'conv' + MaxPool 'pool' -> FusedConv") != std::string::npos);
  CHECK(all.find(" conv+relu+pool ") != std::string::npos);  // the one step names all three ONNX nodes
  options.disabled_passes = {"fuse_pool"};
  const std::string some = Model::load_from_memory(bytes.data(), bytes.size(), options).describe_plan(2);
  CHECK(some.find("fuse_pool: disabled") != std::string::npos);
  CHECK(some.find(" conv+relu ") != std::string::npos);
  options.disabled_passes = {"no_such_pass"};
  CHECK(error_of([&] { Model::load_from_memory(bytes.data(), bytes.size(), options).describe_plan(2); }).first ==
        ErrorCode::Usage);
}
