// Inputs through the public API on the CPU backend: every wrong shape, batch, count or pointer is a clear
// cnnrt::Error naming the input, never a crash or a silently wrong answer.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "cnnrt/cnnrt.hpp"
#include "model_builder.hpp"

using namespace cnnrt;
using cnnrt::testing::ModelBuilder;

namespace {

Model load(const ModelBuilder& m) {
  Options o;
  o.device = Device::Cpu;
  const std::string bytes = m.bytes();
  return Model::load_from_memory(bytes.data(), bytes.size(), o, "tiny.onnx");
}

// The error a call throws; fails the test when it does not throw.
template <class F>
Error error_of(F&& call) {
  try {
    call();
  } catch (const Error& e) {
    return e;
  }
  FAIL("the call succeeded, but it should have been refused");
  return Error(ErrorCode::Internal, "unreachable");
}

bool contains(const Error& e, const std::string& text) { return std::string(e.what()).find(text) != std::string::npos; }

Tensor filled(std::vector<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return Tensor{std::move(shape), std::vector<float>(static_cast<size_t>(n), 0.5f)};
}

}  // namespace

TEST_CASE("Context::run with host tensors refuses wrong inputs clearly") {
  const Model model = load(testing::tiny_conv_model());  // x [N,1,5,5]
  Context ctx(model);
  CHECK(ctx.run({filled({3, 1, 5, 5})})[0].shape == std::vector<int64_t>{3, 2, 5, 5});

  SUBCASE("wrong number of inputs") {
    const Error e = error_of([&] { ctx.run({}); });
    CHECK(e.code() == ErrorCode::InvalidInput);
    CHECK(contains(e, "takes 1 input, got 0"));
  }
  SUBCASE("wrong rank") {
    const Error e = error_of([&] { ctx.run({filled({1, 5, 5})}); });
    CHECK(e.code() == ErrorCode::InvalidInput);
    CHECK(contains(e, "input 'x' is declared with rank 4"));
  }
  SUBCASE("a fixed dimension of the wrong size") {
    const Error e = error_of([&] { ctx.run({filled({1, 1, 5, 6})}); });
    CHECK(e.code() == ErrorCode::InvalidInput);
    CHECK(contains(e, "input 'x' dim 3 is declared as 5 but given as 6"));
  }
  SUBCASE("data that does not fill the shape") {
    const Error e = error_of([&] { ctx.run({Tensor{{1, 1, 5, 5}, std::vector<float>(24)}}); });
    CHECK(e.code() == ErrorCode::InvalidInput);
    CHECK(contains(e, "shape 1x1x5x5 needs 25 values, the tensor holds 24"));
  }
  SUBCASE("a negative dimension") {
    const Error e = error_of([&] { ctx.run({Tensor{{-1, 1, 5, 5}, {}}}); });
    CHECK(e.code() == ErrorCode::InvalidInput);
    CHECK(contains(e, "negative dimension"));
  }
  SUBCASE("a shape whose element count overflows int64") {
    const Error e = error_of([&] { ctx.run({Tensor{{int64_t(1) << 40, 1, int64_t(1) << 20, 1 << 10}, {}}}); });
    CHECK(e.code() == ErrorCode::InvalidInput);
    CHECK(contains(e, "more elements than int64 can count"));
  }
}

TEST_CASE("a model with a fixed batch refuses other batch sizes") {
  ModelBuilder m;
  m.input("x", {2, 4}).output("y");
  m.node("Relu", {"x"}, {"y"});
  const Model model = load(m);
  Context ctx(model);
  Error e = error_of([&] { ctx.run({filled({3, 4})}); });
  CHECK(e.code() == ErrorCode::InvalidInput);
  CHECK(contains(e, "input 'x' dim 0 is declared as 2 but given as 3"));
  std::vector<float> in(12), out(12);
  const float* ins[] = {in.data()};
  float* outs[] = {out.data()};
  e = error_of([&] { ctx.run(ins, outs, 3); });
  CHECK(e.code() == ErrorCode::InvalidInput);
  CHECK(contains(e, "fixed batch dimension of 2; it cannot run batch 3"));
  e = error_of([&] { model.output_shapes(3); });
  CHECK(e.code() == ErrorCode::InvalidInput);
}

TEST_CASE("Context::run with caller buffers refuses null pointers and impossible batches") {
  const Model model = load(testing::tiny_conv_model());
  Context ctx(model);
  std::vector<float> in(2 * 25, 1.0f), out(2 * 50);
  const float* ins[] = {in.data()};
  float* outs[] = {out.data()};
  ctx.run(ins, outs, 2);
  CHECK(out[0] == doctest::Approx(out[25 * 2]));  // both batch items are the same image

  Error e = error_of([&] { ctx.run(nullptr, outs, 1); });
  CHECK(e.code() == ErrorCode::Usage);
  CHECK(contains(e, "null buffer array"));
  e = error_of([&] { ctx.run(ins, nullptr, 1); });
  CHECK(e.code() == ErrorCode::Usage);
  const float* null_in[] = {nullptr};
  e = error_of([&] { ctx.run(null_in, outs, 1); });
  CHECK(e.code() == ErrorCode::Usage);
  CHECK(contains(e, "input 0 ('x') is null"));
  float* null_out[] = {nullptr};
  e = error_of([&] { ctx.run(ins, null_out, 1); });
  CHECK(e.code() == ErrorCode::Usage);
  CHECK(contains(e, "output 0 ('y') is null"));
  e = error_of([&] { ctx.run(ins, outs, -1); });
  CHECK(e.code() == ErrorCode::Usage);
  CHECK(contains(e, "batch -1"));
}

TEST_CASE("device buffers and streams are refused on the CPU backend") {
  const Model model = load(testing::tiny_conv_model());
  Context ctx(model);
  std::vector<float> in(25), out(50);
  const float* ins[] = {in.data()};
  float* outs[] = {out.data()};
  // A host pointer given as device memory: on the CPU backend every enqueue is refused before it is read.
  Error e = error_of([&] { ctx.enqueue(ins, outs, 1); });
  CHECK(e.code() == ErrorCode::Usage);
  CHECK(contains(e, "runs on the CPU; use Context::run"));
  e = error_of([&] { ctx.set_stream(nullptr); });
  CHECK(e.code() == ErrorCode::Usage);
}

TEST_CASE("load_from_memory with a null pointer") {
  Options o;
  o.device = Device::Cpu;
  Error e = error_of([&] { Model::load_from_memory(nullptr, 10, o); });
  CHECK(e.code() == ErrorCode::Usage);
  CHECK(contains(e, "data is null"));
  e = error_of([&] { Model::load_from_memory(nullptr, 0, o, "none.onnx"); });
  CHECK(e.code() == ErrorCode::InvalidModel);
  CHECK(contains(e, "'none.onnx' is empty"));
}

TEST_CASE("dims with neither a size nor a name are independent of each other") {
  ModelBuilder m;
  m.input("x", {1, 4}).output("y");
  auto* shape = m.proto().mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
  shape->mutable_dim(0)->clear_dim_value();
  shape->mutable_dim(1)->clear_dim_value();
  m.node("Relu", {"x"}, {"y"});
  const Model model = load(m);
  Context ctx(model);
  CHECK(ctx.run({filled({2, 3})})[0].shape == std::vector<int64_t>{2, 3});
  const Error e = error_of([&] { ctx.run({filled({2, 3, 1})}); });
  CHECK(e.code() == ErrorCode::InvalidInput);
  CHECK(contains(e, "declared with rank 2"));
}

// ---- explicit input shapes: symbolic dimensions other than the batch ---------------------------------

TEST_CASE("explicit input shapes bind a fully convolutional model's symbolic H and W") {
  const Model model = load(testing::fully_convolutional_denoiser());  // image [N, 1, H, W]
  CHECK(model.inputs()[0].dim_names == std::vector<std::string>{"N", "", "H", "W"});
  CHECK(model.output_shapes({{2, 1, 31, 33}}) == std::vector<Shape>{{2, 1, 31, 33}});
  const std::string plan = model.describe_plan({{1, 1, 7, 1000}});
  CHECK(plan.find("input  image: 1x1x7x1000") != std::string::npos);
  CHECK(plan.find("output denoised: 1x1x7x1000") != std::string::npos);

  // Caller buffers with explicit shapes give what host tensors give.
  Context ctx(model);
  const Tensor image = filled({1, 1, 9, 5});
  const std::vector<Tensor> want = ctx.run({image});
  std::vector<float> out(45, -7.0f);
  const float* ins[] = {image.data.data()};
  float* outs[] = {out.data()};
  ctx.run(ins, outs, {{1, 1, 9, 5}});
  CHECK(out == want[0].data);

  // A batch alone cannot shape it; the error says how.
  const Error e = error_of([&] { model.output_shapes(1); });
  CHECK(e.code() == ErrorCode::Usage);
  CHECK(contains(e, "dimension 2 ('H') is symbolic"));
  CHECK(contains(e, "--shape image="));
  CHECK(error_of([&] { ctx.run(ins, outs, 1); }).code() == ErrorCode::Usage);
}

TEST_CASE("explicit input shapes are refused clearly: count, rank, fixed dims, sizes, one size per symbol") {
  const Model model = load(testing::fully_convolutional_denoiser());
  Context ctx(model);
  std::vector<float> buffer(64);
  const float* ins[] = {buffer.data()};
  float* outs[] = {buffer.data()};
  struct Case {
    std::vector<Shape> shapes;
    std::string message;
  };
  const Case cases[] = {
      {{}, "'tiny.onnx' takes 1 input, got 0 shapes"},
      {{{1, 1, 8, 8}, {1, 1, 8, 8}}, "takes 1 input, got 2 shapes"},
      {{{1, 1, 8}}, "input 'image' has rank 4 (N x 1 x H x W), got shape 1x1x8 of rank 3"},
      {{{1, 3, 8, 8}}, "input 'image' dimension 1 is fixed at 1, got 3"},
      {{{1, 1, 0, 8}}, "input 'image' dimension 2 ('H') must be at least 1, got 0"},
      {{{1, 1, 8, -4}}, "input 'image' dimension 3 ('W') must be at least 1, got -4"},
      {{{0, 1, 8, 8}}, "input 'image' dimension 0 ('N') must be at least 1, got 0"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.message);
    for (int call = 0; call < 3; ++call) {
      const Error e = call == 0   ? error_of([&] { model.output_shapes(c.shapes); })
                      : call == 1 ? error_of([&] { model.describe_plan(c.shapes); })
                                  : error_of([&] { ctx.run(ins, outs, c.shapes); });
      CHECK(e.code() == ErrorCode::InvalidInput);
      CHECK(contains(e, c.message));
    }
  }
  // Device buffers need the GPU backend, whatever the shapes.
  CHECK(error_of([&] { ctx.enqueue(ins, outs, {{1, 1, 8, 8}}); }).code() == ErrorCode::Usage);
  // Null buffers are a caller's bug, as with a batch size.
  CHECK(contains(error_of([&] { ctx.run(nullptr, outs, {{1, 1, 8, 8}}); }), "null buffer array"));
}

TEST_CASE("one symbol shared by two inputs must get one size") {
  ModelBuilder m;
  m.input("a", {-1, 2, -1}, {"N", "", "L"}).input("b", {-1, 2, -1}, {"N", "", "L"}).output("y");
  m.node("Add", {"a", "b"}, {"y"}, "add");
  const Model model = load(m);
  CHECK(model.output_shapes({{3, 2, 5}, {3, 2, 5}}) == std::vector<Shape>{{3, 2, 5}});
  const Error e = error_of([&] { model.output_shapes({{3, 2, 5}, {3, 2, 6}}); });
  CHECK(e.code() == ErrorCode::InvalidInput);
  CHECK(contains(e, "input 'b' dimension 2 ('L') is given as 6, but 'a' has 'L' = 5"));
}

TEST_CASE("Options::input_shapes prepares plans at load, and a bad entry fails the load naming it") {
  const ModelBuilder m = testing::fully_convolutional_denoiser();
  const std::string bytes = m.bytes();
  Options o;
  o.device = Device::Cpu;
  o.input_shapes = {{{1, 1, 16, 16}}, {{2, 1, 8, 12}}};
  const Model model = Model::load_from_memory(bytes.data(), bytes.size(), o, "tiny.onnx");
  CHECK(model.output_shapes({{2, 1, 8, 12}}) == std::vector<Shape>{{2, 1, 8, 12}});
  o.input_shapes.push_back({{1, 1, 16}});
  const Error e = error_of([&] { Model::load_from_memory(bytes.data(), bytes.size(), o, "tiny.onnx"); });
  CHECK(e.code() == ErrorCode::InvalidInput);
  CHECK(contains(e, "Options::input_shapes[2]: "));
  CHECK(contains(e, "input 'image' has rank 4"));
}

TEST_CASE("Options::gpu_index: -1 or a device number; ignored on the CPU; a device that is not there is refused") {
  const std::string bytes = testing::tiny_conv_model().bytes();
  Options o;
  o.device = Device::Cpu;
  o.gpu_index = -2;
  Error e = error_of([&] { Model::load_from_memory(bytes.data(), bytes.size(), o, "tiny.onnx"); });
  CHECK(e.code() == ErrorCode::Usage);
  CHECK(contains(e, "Options::gpu_index is -2"));

  o.gpu_index = 3;  // the CPU backend has no devices to pick from
  CHECK(Model::load_from_memory(bytes.data(), bytes.size(), o, "tiny.onnx").device() == Device::Cpu);

  // No machine has a thousand GPUs: without CUDA or a GPU, and with one, this is DeviceUnavailable.
  o.device = Device::Gpu;
  o.gpu_index = 1000;
  e = error_of([&] { Model::load_from_memory(bytes.data(), bytes.size(), o, "tiny.onnx"); });
  CHECK(e.code() == ErrorCode::DeviceUnavailable);
}
