// Opsets 18 to 21 as PyTorch's dynamo exporter writes them. Debian's torch, onnx and libonnx-testdata stop at
// opset 17, so these models are built by hand: one small CNN written twice with the same weights, once the
// opset 13 way and once the opset 18+ way (Reduce* axes and Pad axes as inputs, Split's num_outputs, Shape
// start/end, MatMul + Add for the classifier, BatchNormalization's training_mode, AveragePool's dilations),
// run on the CPU backend through the public API; the outputs must agree. Single-op models pin down the
// semantics that changed (Split-18's smaller last chunk), and the refusals: opset 22, ops cnnrt does not run.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "cnnrt/cnnrt.hpp"
#include "opset_models.hpp"

using namespace cnnrt;
using namespace cnnrt::testing;

namespace {

Options cpu_options() {
  Options options;
  options.device = Device::Cpu;
  return options;
}

std::vector<Tensor> run_cpu(const std::string& bytes, const std::string& name, const Tensor& input) {
  const Model model = Model::load_from_memory(bytes.data(), bytes.size(), cpu_options(), name);
  Context context(model);
  return context.run({input});
}

Error load_error(const std::string& bytes) {
  try {
    Model::load_from_memory(bytes.data(), bytes.size(), cpu_options(), "model.onnx");
  } catch (const Error& e) {
    return e;
  }
  FAIL("the model loaded, but it should have been refused");
  return Error(ErrorCode::Internal, "");
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("a small CNN in its opset 18, 19, 20 and 21 forms computes what its opset 13 form does") {
  Tensor x;
  x.shape = {2, kInChannels, kSide, kSide};
  x.data = random_values(static_cast<size_t>(2 * kInChannels * kSide * kSide), 42, -1.0f, 1.0f);
  for (float& v : x.data) {
    if (v == 0.0f) v = 0.25f;  // non-zero inputs
  }
  const std::vector<Tensor> reference = run_cpu(small_cnn(13), "cnn_opset13.onnx", x);
  REQUIRE(reference.size() == 2);
  REQUIRE(reference[0].shape == std::vector<int64_t>{2, kClasses});
  REQUIRE(reference[1].shape == std::vector<int64_t>{2, kChannels, 4, 4});
  double row_sum = 0;
  for (int64_t c = 0; c < kClasses; ++c) row_sum += reference[0].data[c];
  CHECK(row_sum == doctest::Approx(1.0).epsilon(1e-5));

  for (int64_t opset : {18, 19, 20, 21}) {
    CAPTURE(opset);
    const std::vector<Tensor> got = run_cpu(small_cnn(opset), "cnn_opset" + std::to_string(opset) + ".onnx", x);
    REQUIRE(got.size() == reference.size());
    for (size_t k = 0; k < got.size(); ++k) {
      CAPTURE(k);
      REQUIRE(got[k].shape == reference[k].shape);
      // Gemm and MatMul + Add may round differently in the last bit; everything else is the same arithmetic.
      for (size_t i = 0; i < got[k].data.size(); ++i) {
        CHECK(got[k].data[i] == doctest::Approx(reference[k].data[i]).epsilon(1e-5));
      }
    }
  }
}

TEST_CASE("Split: num_outputs (opset 18) makes the last chunk smaller; sizes and even parts before 18") {
  Tensor x;
  x.shape = {2, 10};
  for (int i = 0; i < 20; ++i) x.data.push_back(static_cast<float>(i + 1));
  // 10 into 3: chunks of ceil(10 / 3) = 4, the last one 2.
  const std::vector<Tensor> uneven = run_cpu(split_model(18, 3, true), "split18.onnx", x);
  REQUIRE(uneven.size() == 3);
  CHECK(uneven[0].shape == std::vector<int64_t>{2, 4});
  CHECK(uneven[1].shape == std::vector<int64_t>{2, 4});
  CHECK(uneven[2].shape == std::vector<int64_t>{2, 2});
  CHECK(uneven[0].data == std::vector<float>{1, 2, 3, 4, 11, 12, 13, 14});
  CHECK(uneven[1].data == std::vector<float>{5, 6, 7, 8, 15, 16, 17, 18});
  CHECK(uneven[2].data == std::vector<float>{9, 10, 19, 20});

  // Even parts: num_outputs at 21, no sizes at all at 13.
  for (int64_t opset : {13, 21}) {
    const std::vector<Tensor> even = run_cpu(split_model(opset, 2, opset >= 18), "split_even.onnx", x);
    REQUIRE(even.size() == 2);
    CHECK(even[0].data == std::vector<float>{1, 2, 3, 4, 5, 11, 12, 13, 14, 15});
    CHECK(even[1].data == std::vector<float>{6, 7, 8, 9, 10, 16, 17, 18, 19, 20});
  }

  // Before 18 an uneven axis needs the sizes; num_outputs must match the outputs.
  Error e = load_error(split_model(13, 3, false));
  CHECK(e.code() == ErrorCode::InvalidModel);
  CHECK(contains(e.what(), "does not split evenly into 3 outputs"));
  ModelBuilder mismatch(18);
  mismatch.input("x", {2, 10}).output("y0").output("y1");
  auto& split = mismatch.node("Split", {"x"}, {"y0", "y1"}, "split");
  ModelBuilder::attr_int(split, "axis", 1);
  ModelBuilder::attr_int(split, "num_outputs", 3);
  e = load_error(mismatch.bytes());
  CHECK(e.code() == ErrorCode::InvalidModel);
  CHECK(contains(e.what(), "num_outputs is 3 but the node has 2 outputs"));
}

TEST_CASE("ReduceMean (18) with an empty axes input: all axes, or none with noop_with_empty_axes") {
  Tensor x;
  x.shape = {1, 2, 2};
  x.data = {1, 2, 3, 6};
  for (int64_t noop : {0, 1}) {
    ModelBuilder m(18);
    m.input("x", {1, 2, 2}).output("y");
    m.int_initializer("no_axes", {0}, {});
    auto& mean = m.node("ReduceMean", {"x", "no_axes"}, {"y"}, "mean");
    ModelBuilder::attr_int(mean, "keepdims", 0);
    ModelBuilder::attr_int(mean, "noop_with_empty_axes", noop);
    const std::vector<Tensor> y = run_cpu(m.bytes(), "reduce18.onnx", x);
    REQUIRE(y.size() == 1);
    if (noop != 0) {
      CHECK(y[0].shape == std::vector<int64_t>{1, 2, 2});
      CHECK(y[0].data == x.data);
    } else {
      CHECK(y[0].shape.empty());
      CHECK(y[0].data == std::vector<float>{3});
    }
  }
}

TEST_CASE("opset 22 is refused, naming the opset and the range cnnrt reads") {
  ModelBuilder m(22);
  m.proto().set_ir_version(10);
  m.input("x", {1, 4}).output("y");
  m.node("Relu", {"x"}, {"y"}, "relu");
  const Error e = load_error(m.bytes());
  CHECK(e.code() == ErrorCode::Unsupported);
  CHECK(contains(e.what(), "opset 22"));
  CHECK(contains(e.what(), "opsets 6 to 21"));
}

TEST_CASE("what opsets 18 to 21 added that cnnrt does not run is Unsupported, naming node, op and opset") {
  SUBCASE("ops dynamo may write: LayerNormalization (17), GroupNormalization, Mish (18); Gelu (20) runs") {
    ModelBuilder m(20);
    m.proto().set_ir_version(9);
    m.input("x", {1, 4, 2, 2}).output("y");
    m.initializer("gn_scale", {4}, {1, 1, 1, 1}).initializer("gn_bias", {4}, {0, 0, 0, 0});
    m.initializer("ln_scale", {2}, {1, 1}).initializer("ln_bias", {2}, {0, 0});
    auto& gn = m.node("GroupNormalization", {"x", "gn_scale", "gn_bias"}, {"a"}, "/gn/GroupNorm");
    ModelBuilder::attr_int(gn, "num_groups", 2);
    m.node("Mish", {"a"}, {"b"}, "/act/Mish");
    m.node("Gelu", {"b"}, {"c"}, "/act/Gelu");
    auto& ln = m.node("LayerNormalization", {"c", "ln_scale", "ln_bias"}, {"y"}, "/ln/LayerNorm");
    ModelBuilder::attr_int(ln, "axis", -1);
    const Error e = load_error(m.bytes());
    CHECK(e.code() == ErrorCode::Unsupported);
    const std::string msg = e.what();
    CHECK(contains(msg, "3 things"));
    CHECK(contains(msg, "GroupNormalization node '/gn/GroupNorm' (#0): op GroupNormalization (opset 20)"));
    CHECK(contains(msg, "Mish node '/act/Mish' (#1): op Mish (opset 20)"));
    CHECK_FALSE(contains(msg, "Gelu"));
    CHECK(contains(msg, "LayerNormalization node '/ln/LayerNorm' (#3): op LayerNormalization (opset 20)"));
  }
  SUBCASE("AveragePool dilations (19) other than 1") {
    ModelBuilder m(19);
    m.input("x", {1, 1, 6, 6}).output("y");
    auto& pool = m.node("AveragePool", {"x"}, {"y"}, "/pool");
    ModelBuilder::attr_ints(pool, "kernel_shape", {2, 2});
    ModelBuilder::attr_ints(pool, "dilations", {2, 2});
    const Error e = load_error(m.bytes());
    CHECK(e.code() == ErrorCode::Unsupported);
    CHECK(contains(e.what(), "AveragePool node '/pool' (#0)"));
    CHECK(contains(e.what(), "dilations other than 1"));
  }
  SUBCASE("Pad mode 'wrap' (19)") {
    ModelBuilder m(19);
    m.input("x", {1, 1, 4, 4}).output("y");
    m.int_initializer("pads", {4}, {1, 1, 1, 1}).int_initializer("axes", {2}, {2, 3});
    auto& pad = m.node("Pad", {"x", "pads", "", "axes"}, {"y"}, "/pad");
    ModelBuilder::attr_string(pad, "mode", "wrap");
    const Error e = load_error(m.bytes());
    CHECK(e.code() == ErrorCode::Unsupported);
    CHECK(contains(e.what(), "Pad node '/pad' (#0)"));
    CHECK(contains(e.what(), "mode 'wrap' is not supported"));
  }
  SUBCASE("Cast to the float8 (19) and int4 (21) types") {
    for (const auto& [to, name] : {std::pair<int64_t, const char*>{17, "float8e4m3fn"}, {22, "int4"}}) {
      ModelBuilder m(21);
      m.proto().set_ir_version(10);
      m.input("x", {1, 4}).output("y");
      auto& cast = m.node("Cast", {"x"}, {"y"}, "/cast");
      ModelBuilder::attr_int(cast, "to", to);
      ModelBuilder::attr_int(cast, "saturate", 1);  // opset 19: only float8 targets read it
      const Error e = load_error(m.bytes());
      CHECK(e.code() == ErrorCode::Unsupported);
      CHECK(contains(e.what(), "Cast node '/cast' (#0)"));
      CHECK(contains(e.what(), std::string("Cast to ") + name + " is not supported"));
    }
  }
}
