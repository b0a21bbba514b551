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
      CHECK(std::string(e.what()).find("'test.onnx'") != std::string::npos);
    }
  }
  SUBCASE("truncated at every offset of a valid model") {
    // A cut on a field boundary can leave a smaller model that is still valid; every other cut is refused.
    const std::string bytes = testing::tiny_conv_model().bytes();
    int refused = 0;
    for (size_t cut = 1; cut < bytes.size(); ++cut) {
      try {
        Model::load_from_memory(bytes.data(), cut, cpu_options(), "cut.onnx");
      } catch (const Error& e) {
        ++refused;
        CHECK((e.code() == ErrorCode::InvalidModel || e.code() == ErrorCode::Unsupported));
        CHECK(std::string(e.what()).find("'cut.onnx'") != std::string::npos);
      }
    }
    CHECK(refused > static_cast<int>(bytes.size()) / 2);
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
    CHECK(std::string(e.what()).find("Limits::max_weight_bytes") != std::string::npos);
    CHECK(std::string(e.what()).find("--max-weight-bytes") != std::string::npos);
  }
  SUBCASE("Constant nodes count against the weight limit too") {
    ModelBuilder m;
    m.input("x", {1, 4}).output("y");
    auto& c = m.node("Constant", {}, {"k"}, "k");
    auto* a = c.add_attribute();
    a->set_name("value_floats");
    a->set_type(onnx::AttributeProto::FLOATS);
    for (int i = 0; i < 4; ++i) a->add_floats(1.0f);
    m.node("Add", {"x", "k"}, {"y"}, "add");
    Options o = cpu_options();
    o.limits.max_weight_bytes = 8;
    const Error e = load_error(m.bytes(), o);
    CHECK(e.code() == ErrorCode::LimitExceeded);
    CHECK(std::string(e.what()).find("Limits::max_weight_bytes") != std::string::npos);
    CHECK(std::string(e.what()).find("--max-weight-bytes") != std::string::npos);
  }
  SUBCASE("a Constant's tensor attribute over the weight limit is LimitExceeded, not InvalidModel") {
    ModelBuilder m;
    m.input("x", {1, 4}).output("y");
    auto& c = m.node("Constant", {}, {"k"}, "k");
    auto* a = c.add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
    a->mutable_t()->add_dims(4);
    for (int i = 0; i < 4; ++i) a->mutable_t()->add_float_data(1.0f);
    m.node("Add", {"x", "k"}, {"y"}, "add");
    Options o = cpu_options();
    o.limits.max_weight_bytes = 8;
    const Error e = load_error(m.bytes(), o);
    CHECK(e.code() == ErrorCode::LimitExceeded);
    CHECK(std::string(e.what()).find("Constant node 'k'") != std::string::npos);
    CHECK(std::string(e.what()).find("--max-weight-bytes") != std::string::npos);
  }
  SUBCASE("a zero dimension in an initializer is an empty tensor, checked like any other") {
    ModelBuilder m;
    m.input("x", {1, 4}).output("y");
    m.initializer("empty", {0, 4}, {});
    m.node("Add", {"x", "empty"}, {"y"}, "add");
    // [1,4] + [0,4] broadcasts to [0,4]: valid ONNX, an empty result.
    const std::string bytes = m.bytes();
    const Model model = Model::load_from_memory(bytes.data(), bytes.size(), cpu_options(), "zero.onnx");
    CHECK(model.output_shapes(1) == std::vector<std::vector<int64_t>>{{0, 4}});
    Context ctx(model);
    const std::vector<Tensor> out = ctx.run({Tensor{{1, 4}, {1, 2, 3, 4}}});
    CHECK(out[0].shape == std::vector<int64_t>{0, 4});
    CHECK(out[0].data.empty());
  }
  SUBCASE("a zero dimension declared with data is refused") {
    ModelBuilder m = testing::tiny_conv_model();
    m.proto().mutable_graph()->mutable_initializer(1)->set_dims(0, 0);  // b: dims [0], 2 values
    const Error e = load_error(m.bytes());
    CHECK(e.code() == ErrorCode::InvalidModel);
    CHECK(std::string(e.what()).find("holds 2 values") != std::string::npos);
  }
  SUBCASE("a negative dimension on a graph input") {
    ModelBuilder m;
    m.input("x", {1, 4}).output("y");
    m.proto().mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()
        ->mutable_dim(1)->set_dim_value(-4);
    m.node("Relu", {"x"}, {"y"});
    const Error e = load_error(m.bytes());
    CHECK(e.code() == ErrorCode::InvalidModel);
    CHECK(std::string(e.what()).find("'x' declares a negative dimension -4") != std::string::npos);
  }
  SUBCASE("graph input dims whose product overflows int64") {
    ModelBuilder m;
    m.input("x", {int64_t(1) << 32, int64_t(1) << 32}).output("y");
    m.node("Relu", {"x"}, {"y"});
    const Error e = load_error(m.bytes());
    CHECK(e.code() == ErrorCode::InvalidModel);
    CHECK(std::string(e.what()).find("graph input 'x' declares dims 4294967296x4294967296 whose element count "
                                     "overflows int64") != std::string::npos);
  }
}

TEST_CASE("activation memory is limited on the CPU backend too, before anything is allocated") {
  SUBCASE("a small limit names itself and how to raise it") {
    Options o = cpu_options();
    // At batch 1 the tiny model's conv + relu, fused into one step by the passes, needs one 2x5x5 float
    // tensor: 200 bytes.
    o.limits.max_activation_bytes = 100;
    const Error e = load_error(testing::tiny_conv_model().bytes(), o);
    CHECK(e.code() == ErrorCode::LimitExceeded);
    const std::string msg = e.what();
    CHECK(msg.find("Limits::max_activation_bytes") != std::string::npos);
    CHECK(msg.find("--max-activation-bytes") != std::string::npos);
    CHECK_MESSAGE(msg.find("needs 200 bytes") != std::string::npos, msg);
  }
  SUBCASE("a large batch trips the limit at run time with the same message, and smaller batches still run") {
    const std::string bytes = testing::tiny_conv_model().bytes();
    Options o = cpu_options();
    o.limits.max_activation_bytes = 4000;
    const Model model = Model::load_from_memory(bytes.data(), bytes.size(), o, "tiny.onnx");
    Context ctx(model);
    CHECK(ctx.run({Tensor{{2, 1, 5, 5}, std::vector<float>(50, 1.0f)}})[0].shape ==
          std::vector<int64_t>{2, 2, 5, 5});
    try {
      ctx.run({Tensor{{100, 1, 5, 5}, std::vector<float>(2500, 1.0f)}});
      FAIL("batch 100 ran over the activation limit");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::LimitExceeded);
      CHECK(std::string(e.what()).find("Limits::max_activation_bytes") != std::string::npos);
    }
  }
  SUBCASE("Expand to 10^10 elements under the default limit: refused at load, nothing allocated") {
    ModelBuilder m;
    m.input("x", {1, 1}).output("y");
    m.int_initializer("shape", {2}, {100000, 100000});
    m.node("Expand", {"x", "shape"}, {"y"}, "huge");
    const Error e = load_error(m.bytes());
    CHECK(e.code() == ErrorCode::LimitExceeded);
    CHECK(std::string(e.what()).find("Limits::max_activation_bytes") != std::string::npos);
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
    CHECK(e.code() == ErrorCode::InvalidModel);
    CHECK(std::string(e.what()).find("attribute 'group' has type string, expected int") != std::string::npos);
  }
  SUBCASE("the same graph output listed twice") {
    ModelBuilder m;
    m.input("x", {1, 4}).output("y").output("y");
    m.node("Relu", {"x"}, {"y"});
    const Error e = load_error(m.bytes());
    CHECK(e.code() == ErrorCode::InvalidModel);
    CHECK(std::string(e.what()).find("graph output 'y' is listed twice") != std::string::npos);
  }
  SUBCASE("a node output that is also a graph input") {
    ModelBuilder m;
    m.input("x", {1, 4}).output("y");
    m.node("Relu", {"x"}, {"x"}, "overwrite");
    m.node("Relu", {"x"}, {"y"});
    const Error e = load_error(m.bytes());
    CHECK(e.code() == ErrorCode::InvalidModel);
    CHECK(std::string(e.what()).find("value 'x' is defined twice") != std::string::npos);
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
    const Error e = load_error(testing::tiny_conv_model().bytes(), o);
    CHECK(e.code() == ErrorCode::LimitExceeded);
    CHECK(std::string(e.what()).find("Limits::max_nodes") != std::string::npos);
  }
}

TEST_CASE("a 100,000-node chain loads, plans and runs without deep recursion") {
  // Stored in reverse order so the topological sort has to do all the work; any recursion over the chain
  // (sorting, shape inference, passes, liveness) would overflow the stack here, most visibly under ASan.
  constexpr int kNodes = 100000;
  ModelBuilder m;
  m.input("x", {1, 4}).output("v" + std::to_string(kNodes));
  for (int i = kNodes; i >= 1; --i) {
    auto* n = m.proto().mutable_graph()->add_node();
    n->set_op_type(i % 2 ? "Relu" : "Neg");
    n->add_input(i == 1 ? "x" : "v" + std::to_string(i - 1));
    n->add_output("v" + std::to_string(i));
  }
  const std::string bytes = m.bytes();
  const Model model = Model::load_from_memory(bytes.data(), bytes.size(), cpu_options(), "chain.onnx");
  Context ctx(model);
  // An even number of Relu-then-Neg pairs: relu(x) -> -relu(x) -> relu(-relu(x)) = 0 -> -0 ... ends at 0.
  const std::vector<Tensor> out = ctx.run({Tensor{{1, 4}, {1, -2, 3, -4}}});
  CHECK(out[0].shape == std::vector<int64_t>{1, 4});
  for (float v : out[0].data) CHECK(v == 0.0f);

  Options o = cpu_options();
  o.limits.max_nodes = kNodes - 1;
  const Error e = load_error(bytes, o);
  CHECK(e.code() == ErrorCode::LimitExceeded);
  CHECK(std::string(e.what()).find("100000 nodes, over the limit of 99999 (Limits::max_nodes)") !=
        std::string::npos);
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
  SUBCASE("a symbolic link that leaves the folder is rejected") {
    const fs::path outside = fs::temp_directory_path() / "cnnrt_external_outside.bin";
    fs::copy_file(dir / "bias.bin", outside, fs::copy_options::overwrite_existing);
    fs::remove(dir / "link.bin");
    fs::create_symlink(outside, dir / "link.bin");
    loc->set_value("link.bin");
    std::ofstream(dir / "ext.onnx", std::ios::binary) << m.bytes();
    try {
      Model::load((dir / "ext.onnx").string(), cpu_options());
      FAIL("loaded external data through a link out of the model's folder");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::InvalidModel);
      CHECK(std::string(e.what()).find("outside the model's folder") != std::string::npos);
    }
    fs::remove(outside);
  }
  SUBCASE("an absolute path is rejected") {
    loc->set_value((dir / "bias.bin").string());
    std::ofstream(dir / "ext.onnx", std::ios::binary) << m.bytes();
    try {
      Model::load((dir / "ext.onnx").string(), cpu_options());
      FAIL("loaded external data from an absolute path");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::InvalidModel);
      CHECK(std::string(e.what()).find("must be a relative path") != std::string::npos);
    }
  }
  SUBCASE("a model loaded from memory cannot use external data") {
    loc->set_value("bias.bin");
    CHECK(load_error(m.bytes()).code() == ErrorCode::Unsupported);
  }
  fs::remove_all(dir);
}
