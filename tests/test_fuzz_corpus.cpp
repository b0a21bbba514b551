// The fuzzer's seed corpus (tests/fuzz/corpus): generated here, and replayed here.
//
// Regenerate the seeds:   CNNRT_WRITE_FUZZ_CORPUS=tests/fuzz/corpus build/cpu/bin/unit_tests -tc='*seed*'
// Every file in the corpus, including crash reproducers added by hand, goes through exactly what the
// fuzzer does with it (tests/fuzz/load_plan_run.hpp); only success or a cnnrt::Error are acceptable.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "model_builder.hpp"
#include "tests/fuzz/load_plan_run.hpp"

using namespace cnnrt;
using cnnrt::testing::ModelBuilder;

namespace {

namespace fs = std::filesystem;

struct Seed {
  std::string file;
  std::string bytes;
  bool valid;  // loads and runs under the fuzzer's limits
};

std::vector<float> ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>(static_cast<int>(i % 11) - 5);
  return v;
}

// x[N,1,8,8] -> Conv 3x3 (4 ch) -> Relu -> MaxPool 2 -> Flatten -> Gemm(10) -> Softmax: a LeNet in little.
std::string tiny_lenet() {
  ModelBuilder m;
  m.input("x", {-1, 1, 8, 8}).output("p");
  m.initializer("w", {4, 1, 3, 3}, ramp(36, 0.1f)).initializer("b", {4}, {0.1f, 0, -0.1f, 0.2f});
  m.initializer("fw", {10, 36}, ramp(360, 0.01f)).initializer("fb", {10}, ramp(10, 0.05f));
  m.node("Conv", {"x", "w", "b"}, {"c"}, "conv");
  m.node("Relu", {"c"}, {"r"}, "relu");
  auto& pool = m.node("MaxPool", {"r"}, {"m"}, "pool");
  ModelBuilder::attr_ints(pool, "kernel_shape", {2, 2});
  ModelBuilder::attr_ints(pool, "strides", {2, 2});
  m.node("Flatten", {"m"}, {"f"}, "flatten");
  auto& gemm = m.node("Gemm", {"f", "fw", "fb"}, {"g"}, "fc");
  ModelBuilder::attr_int(gemm, "transB", 1);
  m.node("Softmax", {"g"}, {"p"}, "softmax");
  return m.bytes();
}

// Shape arithmetic folded at load: Shape -> Gather -> Concat -> Reshape, plus BatchNorm and an AveragePool.
std::string shape_chain() {
  ModelBuilder m;
  m.input("x", {-1, 2, 4, 4}).output("y");
  m.initializer("scale", {2}, {1, 2}).initializer("bias", {2}, {0, 1});
  m.initializer("mean", {2}, {0.5f, 0}).initializer("var", {2}, {1, 4});
  m.int_initializer("zero", {}, {0}).int_initializer("rest", {1}, {-1});
  m.node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"bn"}, "bn");
  auto& avg = m.node("AveragePool", {"bn"}, {"a"}, "avg");
  ModelBuilder::attr_ints(avg, "kernel_shape", {2, 2});
  ModelBuilder::attr_ints(avg, "pads", {0, 0, 1, 1});
  m.node("Shape", {"a"}, {"s"}, "shape");
  m.node("Gather", {"s", "zero"}, {"n"}, "batch");
  m.int_initializer("axis0", {1}, {0});
  m.node("Unsqueeze", {"n", "axis0"}, {"n1"}, "unsq");  // opset 13: axes are an input
  auto& cat = m.node("Concat", {"n1", "rest"}, {"shape2"}, "cat");
  ModelBuilder::attr_int(cat, "axis", 0);
  m.node("Reshape", {"a", "shape2"}, {"y"}, "reshape");
  return m.bytes();
}

// Two inputs, broadcasting elementwise ops, a Constant node, MatMul and Transpose.
std::string two_inputs() {
  ModelBuilder m;
  m.input("a", {2, 3}).input("b", {3}).output("y");
  auto& k = m.node("Constant", {}, {"k"}, "k");
  auto* attr = k.add_attribute();
  attr->set_name("value_float");
  attr->set_type(onnx::AttributeProto::FLOAT);
  attr->set_f(0.5f);
  m.initializer("w", {3, 4}, ramp(12, 0.25f));
  m.node("Add", {"a", "b"}, {"s"}, "add");
  m.node("Mul", {"s", "k"}, {"h"}, "half");
  m.node("MatMul", {"h", "w"}, {"mm"}, "matmul");
  auto& t = m.node("Transpose", {"mm"}, {"y"}, "transpose");
  ModelBuilder::attr_ints(t, "perm", {1, 0});
  return m.bytes();
}

std::vector<Seed> seeds() {
  std::vector<Seed> s;
  s.push_back({"valid_tiny_conv.onnx", testing::tiny_conv_model().bytes(), true});
  s.push_back({"valid_tiny_lenet.onnx", tiny_lenet(), true});
  s.push_back({"valid_shape_chain.onnx", shape_chain(), true});
  s.push_back({"valid_two_inputs.onnx", two_inputs(), true});

  const std::string conv = testing::tiny_conv_model().bytes();
  s.push_back({"broken_truncated.onnx", conv.substr(0, conv.size() / 2), false});
  s.push_back({"broken_lfs_pointer.onnx", "version https://git-lfs.github.com/spec/v1\noid sha256:0\nsize 1\n", false});
  {
    ModelBuilder m;
    m.input("x", {1, 4}).output("y");
    m.node("Add", {"x", "b"}, {"a"}, "first");
    m.node("Relu", {"a"}, {"b"}, "second");
    m.node("Relu", {"a"}, {"y"}, "third");
    s.push_back({"broken_cycle.onnx", m.bytes(), false});
  }
  {
    ModelBuilder m = testing::tiny_conv_model();
    auto* t = m.proto().mutable_graph()->mutable_initializer(0);
    t->clear_dims();
    t->add_dims(1000000000000LL);
    t->clear_float_data();
    s.push_back({"broken_huge_initializer.onnx", m.bytes(), false});
  }
  {
    ModelBuilder m = testing::tiny_conv_model();
    ModelBuilder::attr_string(*m.proto().mutable_graph()->mutable_node(0), "group", "one");
    s.push_back({"broken_attribute_type.onnx", m.bytes(), false});
  }
  {
    ModelBuilder m;
    m.input("x", {1, 1}).output("y");
    m.int_initializer("shape", {2}, {100000, 100000});
    m.node("Expand", {"x", "shape"}, {"y"}, "huge");
    s.push_back({"broken_huge_expand.onnx", m.bytes(), false});
  }
  return s;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

bool run_like_the_fuzzer(const std::string& bytes) {
  return fuzzing::load_plan_run(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

}  // namespace

TEST_CASE("fuzz seed corpus: valid seeds load and run under the fuzzer's limits, broken ones are refused") {
  if (const char* dir = std::getenv("CNNRT_WRITE_FUZZ_CORPUS")) {
    fs::create_directories(dir);
    for (const Seed& seed : seeds()) std::ofstream(fs::path(dir) / seed.file, std::ios::binary) << seed.bytes;
  }
  for (const Seed& seed : seeds()) {
    CAPTURE(seed.file);
    CHECK(run_like_the_fuzzer(seed.bytes) == seed.valid);
  }
}

TEST_CASE("fuzz corpus replay: every committed corpus file loads or is refused with a cnnrt::Error") {
  const fs::path corpus = fs::path(CNNRT_SOURCE_DIR) / "tests" / "fuzz" / "corpus";
  REQUIRE(fs::is_directory(corpus));
  int files = 0;
  for (const auto& entry : fs::directory_iterator(corpus)) {
    if (!entry.is_regular_file()) continue;
    CAPTURE(entry.path().filename().string());
    ++files;
    CHECK_NOTHROW(run_like_the_fuzzer(read_file(entry.path())));
  }
  CHECK(files >= 10);
  // The generated seeds are committed as generated: a change here means regenerating them.
  for (const Seed& seed : seeds()) {
    CAPTURE(seed.file);
    CHECK(read_file(corpus / seed.file) == seed.bytes);
  }
}

// Found by the fuzzer (tests/fuzz/corpus/regression_conv_empty_rows.onnx): a 2-D convolution of an input
// with 0 rows was run as if it had 1 row, reading past an empty buffer. Padding still gives output rows,
// and every tap lies in the padding, so each output is the bias.
TEST_CASE("regression: a padded convolution of an input with 0 rows outputs its bias everywhere") {
  testing::ModelBuilder m;
  m.input("x", {1, 1, 0, 7}).output("y");
  m.initializer("w", {2, 1, 3, 3}, std::vector<float>(18, 0.5f)).initializer("b", {2}, {0.25f, -1.5f});
  auto& conv = m.node("Conv", {"x", "w", "b"}, {"y"}, "conv");
  testing::ModelBuilder::attr_ints(conv, "pads", {2, 1, 1, 1});
  const std::string bytes = m.bytes();
  Options options;
  options.device = Device::Cpu;
  const Model model = Model::load_from_memory(bytes.data(), bytes.size(), options, "empty_rows.onnx");
  const std::vector<Tensor> out = Context(model).run({Tensor{{1, 1, 0, 7}, {}}});
  REQUIRE(out.size() == 1);
  REQUIRE(out[0].shape == std::vector<int64_t>{1, 2, 1, 7});  // rows: 0 + 2 + 1 - 3 + 1
  for (size_t i = 0; i < out[0].data.size(); ++i) CHECK(out[0].data[i] == (i < 7 ? 0.25f : -1.5f));
}
