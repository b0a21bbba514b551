// The ONNX loader: valid models load; every kind of broken model gets its own clear error and code.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "cnnrt/cnnrt.hpp"
#include "model_builder.hpp"

using namespace cnnrt;
using cnnrt::testing::ModelBuilder;

namespace {

Options cpu_options() {
  Options o;
  o.device = Device::Cpu;
  return o;
}

// Loads bytes and returns the error (code + message); fails the test if loading succeeds.
Error load_error(const std::string& bytes, Options options = cpu_options()) {
  try {
    Model::load_from_memory(bytes.data(), bytes.size(), options, "test.onnx");
  } catch (const Error& e) {
    return e;
  }
  FAIL("the model loaded, but it should have been refused");
  return Error(ErrorCode::Internal, "unreachable");
}

}  // namespace

TEST_CASE("a valid model loads and reports its inputs, outputs and symbolic batch") {
  const std::string bytes = testing::tiny_conv_model().bytes();
  const Model model = Model::load_from_memory(bytes.data(), bytes.size(), cpu_options(), "tiny.onnx");
  REQUIRE(model.inputs().size() == 1);
  CHECK(model.inputs()[0].name == "x");
  CHECK(model.inputs()[0].shape == std::vector<int64_t>{-1, 1, 5, 5});
  CHECK(model.inputs()[0].dim_names[0] == "N");
  CHECK(model.output_shapes(3) == std::vector<std::vector<int64_t>>{{3, 2, 5, 5}});
  CHECK(model.device() == Device::Cpu);
}

TEST_CASE("files that are not models say so") {
  SUBCASE("empty") {
    const Error e = load_error("");
    CHECK(e.code() == ErrorCode::InvalidModel);
    CHECK(std::string(e.what()).find("empty") != std::string::npos);
  }
  SUBCASE("git LFS pointer") {
    const Error e = load_error("version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 12345\n");
    CHECK(e.code() == ErrorCode::InvalidModel);
    CHECK(std::string(e.what()).find("Git LFS pointer") != std::string::npos);
  }
  SUBCASE("random bytes, many seeds: never a crash, always InvalidModel") {
    std::mt19937 rng(1);
    for (int trial = 0; trial < 300; ++trial) {
      std::string bytes(1 + rng() % 2000, '\0');
      for (char& c : bytes) c = static_cast<char>(rng());
      const Error e = load_error(bytes);
      CHECK(e.code() == ErrorCode::InvalidModel);
    }
  }
  SUBCASE("truncated at every tenth offset of a valid model") {
    const std::string bytes = testing::tiny_conv_model().bytes();
    for (size_t cut = 1; cut < bytes.size(); cut += 10) {
      try {
        Model::load_from_memory(bytes.data(), cut, cpu_options(), "cut.onnx");
      } catch (const Error& e) {
        CHECK((e.code() == ErrorCode::InvalidModel || e.code() == ErrorCode::Unsupported));
      }
    }
  }
  SUBCASE("missing file is an I/O error naming the path") {
    try {
      Model::load("/nonexistent/model.onnx", cpu_options());
      FAIL("loaded a missing file");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::Io);
      CHECK(std::string(e.what()).find("/nonexistent/model.onnx") != std::string::npos);
    }
  }
}

TEST_CASE("tensor data must agree with its dims") {
  SUBCASE("negative dim") {
    ModelBuilder m = testing::tiny_conv_model();
    m.proto().mutable_graph()->mutable_initializer(0)->set_dims(0, -2);
    const Error e = load_error(m.bytes());
    CHECK(e.code() == ErrorCode::InvalidModel);
    CHECK(std::string(e.what()).find("negative dimension") != std::string::npos);
  }
  SUBCASE("dims whose product overflows int64") {
    ModelBuilder m = testing::tiny_conv_model();
    auto* t = m.proto().mutable_graph()->mutable_initializer(0);
    t->clear_dims();
    for (int i = 0; i < 4; ++i) t->add_dims(int64_t(1) << 20);
    const Error e = load_error(m.bytes());
    CHECK(e.code() == ErrorCode::InvalidModel);
    CHECK(std::string(e.what()).find("overflows") != std::string::npos);
  }
  SUBCASE("10^12 elements declared, no data: refused before any allocation") {
    ModelBuilder m = testing::tiny_conv_model();
    auto* t = m.proto().mutable_graph()->mutable_initializer(0);
    t->clear_dims();
    t->add_dims(1000000000000LL);
    t->clear_float_data();
    const Error e = load_error(m.bytes());
    CHECK(e.code() == ErrorCode::InvalidModel);
    CHECK(std::string(e.what()).find("holds 0 values") != std::string::npos);
  }
  SUBCASE("raw_data shorter than the dims say") {
    ModelBuilder m = testing::tiny_conv_model();
    auto* t = m.proto().mutable_graph()->mutable_initializer(1);  // b: 2 floats
    t->clear_float_data();
    t->set_raw_data(std::string(7, '\0'));
    const Error e = load_error(m.bytes());
    CHECK(e.code() == ErrorCode::InvalidModel);
    CHECK(std::string(e.what()).find("holds 7 bytes") != std::string::npos);
  }
  SUBCASE("raw_data longer than the dims say") {
    ModelBuilder m = testing::tiny_conv_model();
    auto* t = m.proto().mutable_graph()->mutable_initializer(1);
    t->clear_float_data();
    t->set_raw_data(std::string(12, '\0'));
    CHECK(load_error(m.bytes()).code() == ErrorCode::InvalidModel);
  }
  SUBCASE("weights over the weight limit") {
    Options o = cpu_options();
    o.limits.max_weight_bytes = 16;
    const Error e = load_error(testing::tiny_conv_model().bytes(), o);
    CHECK(e.code() == ErrorCode::LimitExceeded);
    CHECK(std::string(e.what()).find("max_weight_bytes") != std::string::npos);
  }
}

TEST_CASE("graph structure errors") {
  SUBCASE("a node reads a tensor nothing produces") {
    ModelBuilder m;
    m.input("x", {1, 4}).output("y");
    m.node("Add", {"x", "ghost"}, {"y"}, "add");
    const Error e = load_error(m.bytes());
    CHECK(e.code() == ErrorCode::InvalidModel);
    CHECK(std::string(e.what()).find("'ghost'") != std::string::npos);
  }
  SUBCASE("a cycle") {
    ModelBuilder m;
    m.input("x", {1, 4}).output("y");
    m.node("Add", {"x", "b"}, {"a"}, "first");
    m.node("Relu", {"a"}, {"b"}, "second");
    m.node("Relu", {"a"}, {"y"}, "third");
    const Error e = load_error(m.bytes());
    CHECK(e.code() == ErrorCode::InvalidModel);
    CHECK(std::string(e.what()).find("cycle") != std::string::npos);
  }
  SUBCASE("two nodes write the same name") {
    ModelBuilder m;
    m.input("x", {1, 4}).output("y");
    m.node("Relu", {"x"}, {"y"}, "one");
    m.node("Sigmoid", {"x"}, {"y"}, "two");
    const Error e = load_error(m.bytes());
    CHECK(e.code() == ErrorCode::InvalidModel);
    CHECK(std::string(e.what()).find("defined twice") != std::string::npos);
  }
  SUBCASE("an attribute of the wrong type") {
    ModelBuilder m = testing::tiny_conv_model();
    auto* conv = m.proto().mutable_graph()->mutable_node(0);
    ModelBuilder::attr_string(*conv, "group", "one");
    const Error e = load_error(m.bytes());
    CHECK(std::string(e.what()).find("group") != std::string::npos);
  }
  SUBCASE("a graph output nothing produces") {
    ModelBuilder m;
    m.input("x", {1, 4}).output("y").output("nowhere");
    m.node("Relu", {"x"}, {"y"});
    CHECK(load_error(m.bytes()).code() == ErrorCode::InvalidModel);
  }
  SUBCASE("node count over the limit") {
    Options o = cpu_options();
    o.limits.max_nodes = 1;
    CHECK(load_error(testing::tiny_conv_model().bytes(), o).code() == ErrorCode::LimitExceeded);
  }
}

TEST_CASE("unsupported ops are listed all at once, with op, opset, node name and index") {
  ModelBuilder m(13);
  m.input("x", {1, 1, 4, 4}).output("y");
  m.node("Relu", {"x"}, {"a"}, "fine");
  m.node("GridSample", {"a"}, {"b"}, "warp");
  m.node("NonMaxSuppression", {"b"}, {"y"}, "nms");
  const Error e = load_error(m.bytes());
  CHECK(e.code() == ErrorCode::Unsupported);
  const std::string msg = e.what();
  CHECK(msg.find("2 things") != std::string::npos);
  CHECK(msg.find("GridSample node 'warp' (#1)") != std::string::npos);
  CHECK(msg.find("NonMaxSuppression node 'nms' (#2)") != std::string::npos);
  CHECK(msg.find("opset 13") != std::string::npos);
}

TEST_CASE("opsets outside 6..21 and foreign domains are refused clearly") {
  ModelBuilder old(5);
  old.input("x", {1, 4}).output("y");
  old.node("Relu", {"x"}, {"y"});
  Error e = load_error(old.bytes());
  CHECK(e.code() == ErrorCode::Unsupported);
  CHECK(std::string(e.what()).find("opset 5") != std::string::npos);

  ModelBuilder ms;
  ms.input("x", {1, 4}).output("y");
  ms.node("FusedGemm", {"x"}, {"y"}, "g").set_domain("com.microsoft");
  e = load_error(ms.bytes());
  CHECK(e.code() == ErrorCode::Unsupported);
  CHECK(std::string(e.what()).find("com.microsoft") != std::string::npos);
}

TEST_CASE("external data stays inside the model's folder") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "cnnrt_external_test";
  fs::create_directories(dir);
  ModelBuilder m = testing::tiny_conv_model();
  auto* b = m.proto().mutable_graph()->mutable_initializer(1);
  b->clear_float_data();
  b->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* loc = b->add_external_data();
  loc->set_key("location");
  {
    const float bias[2] = {0.5f, -0.25f};
    std::ofstream(dir / "bias.bin", std::ios::binary).write(reinterpret_cast<const char*>(bias), sizeof bias);
  }
  SUBCASE("a relative path next to the model works") {
    loc->set_value("bias.bin");
    std::ofstream(dir / "ext.onnx", std::ios::binary) << m.bytes();
    const Model model = Model::load((dir / "ext.onnx").string(), cpu_options());
    CHECK(model.output_shapes(1)[0] == std::vector<int64_t>{1, 2, 5, 5});
  }
  SUBCASE("'..' is rejected") {
    loc->set_value("../bias.bin");
    std::ofstream(dir / "ext.onnx", std::ios::binary) << m.bytes();
    try {
      Model::load((dir / "ext.onnx").string(), cpu_options());
      FAIL("loaded external data outside the model's folder");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::InvalidModel);
      CHECK(std::string(e.what()).find("..") != std::string::npos);
    }
  }
  SUBCASE("an absolute path is rejected") {
    loc->set_value((dir / "bias.bin").string());
    std::ofstream(dir / "ext.onnx", std::ios::binary) << m.bytes();
    CHECK_THROWS_AS(Model::load((dir / "ext.onnx").string(), cpu_options()), Error);
  }
  SUBCASE("a model loaded from memory cannot use external data") {
    loc->set_value("bias.bin");
    CHECK(load_error(m.bytes()).code() == ErrorCode::Unsupported);
  }
  fs::remove_all(dir);
}
