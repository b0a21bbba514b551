// Elementwise ops: activations, Clip across opsets, broadcasting arithmetic, PRelu, variadic ops and
// BatchNormalization, with values computed by hand (or numpy) and the errors they raise.
#include "ir/ops.hpp"
#include "op_test_util.hpp"

using namespace cnnrt;
using namespace cnnrt::ir;
using namespace cnnrt::test;

namespace {

const HostTensor kSamples = HostTensor::floats({5}, {-2.0f, -0.5f, 0.0f, 0.5f, 2.0f});

HostTensor run_unary(const std::string& op, Attributes attributes = {}) {
  OneNode node(op, std::move(attributes));
  node.runtime = {{"x", kSamples}};
  node.order = {"x"};
  return node.run();
}

OneNode binary(const std::string& op, HostTensor a, HostTensor b) {
  OneNode node(op);
  node.runtime = {{"a", std::move(a)}, {"b", std::move(b)}};
  node.order = {"a", "b"};
  return node;
}

}  // namespace

TEST_CASE("activations on -2, -0.5, 0, 0.5, 2") {
  const Shape shape{5};
  check_close(run_unary("Relu"), shape, {0, 0, 0, 0.5f, 2});
  check_close(run_unary("Sigmoid"), shape, {0.11920292f, 0.37754067f, 0.5f, 0.62245933f, 0.88079708f});
  check_close(run_unary("Tanh"), shape, {std::tanh(-2.0f), std::tanh(-0.5f), 0, std::tanh(0.5f), std::tanh(2.0f)});
  check_close(run_unary("Abs"), shape, {2, 0.5f, 0, 0.5f, 2});
  check_close(run_unary("Neg"), shape, {2, 0.5f, 0, -0.5f, -2});
  check_close(run_unary("Floor"), shape, {-2, -1, 0, 0, 2});
  check_close(run_unary("Ceil"), shape, {-2, 0, 0, 1, 2});
  check_close(run_unary("Softsign"), shape, {-2 / 3.f, -1 / 3.f, 0, 1 / 3.f, 2 / 3.f});
  check_close(run_unary("Softplus"), shape, {0.12692801f, 0.47407698f, 0.69314718f, 0.97407698f, 2.12692801f});
  check_close(run_unary("Erf"), shape, {-0.99532227f, -0.52049988f, 0, 0.52049988f, 0.99532227f});
  check_close(run_unary("HardSwish"), shape, {-1 / 3.f, -0.20833333f, 0, 0.29166667f, 5 / 3.f});
  check_close(run_unary("LeakyRelu"), shape, {-0.02f, -0.005f, 0, 0.5f, 2});
  check_close(run_unary("LeakyRelu", attrs({{"alpha", 0.5f}})), shape, {-1, -0.25f, 0, 0.5f, 2});
  check_close(run_unary("Elu"), shape, {-0.86466472f, -0.39346934f, 0, 0.5f, 2});
  check_close(run_unary("Selu"), shape, {-1.52016647f, -0.69175819f, 0, 0.52535051f, 2.10140204f});
  check_close(run_unary("HardSigmoid"), shape, {0.1f, 0.4f, 0.5f, 0.6f, 0.9f});
  check_close(run_unary("Exp"), shape, {std::exp(-2.0f), std::exp(-0.5f), 1, std::exp(0.5f), std::exp(2.0f)});
  check_close(run_unary("Reciprocal"), shape, {-0.5f, -2, INFINITY, 2, 0.5f});
}

TEST_CASE("activation defaults become explicit attributes") {
  OneNode selu("Selu");
  selu.runtime = {{"x", kSamples}};
  selu.order = {"x"};
  const Attributes canonical = selu.bound().nodes.at(0).attrs;
  CHECK(canonical.get_float("alpha", 0) == doctest::Approx(1.6732632));
  CHECK(canonical.get_float("gamma", 0) == doctest::Approx(1.0507010));
}

TEST_CASE("Clip: attributes before opset 11, optional constant inputs after") {
  OneNode old_clip("Clip", attrs({{"min", -1.0f}}));
  old_clip.opset = 6;
  old_clip.runtime = {{"x", kSamples}};
  old_clip.order = {"x"};
  check_close(old_clip.run(), {5}, {-1, -0.5f, 0, 0.5f, 2});
  const Attributes canonical = old_clip.bound().nodes.at(0).attrs;
  CHECK(canonical.get_float("max", 0) == INFINITY);

  OneNode clip("Clip");
  clip.runtime = {{"x", kSamples}};
  clip.constants = {{"hi", HostTensor::floats({}, {1.0f})}};
  clip.order = {"x", "", "hi"};
  check_close(clip.run(), {5}, {-2, -0.5f, 0, 0.5f, 1});
  const Node node = clip.bound().nodes.at(0);
  CHECK(node.inputs.size() == 1);
  CHECK(node.attrs.get_float("min", 0) == -INFINITY);
  CHECK(node.attrs.get_float("max", 0) == 1.0f);

  OneNode runtime_max("Clip");
  runtime_max.runtime = {{"x", kSamples}, {"m", HostTensor::floats({}, {1.0f})}};
  runtime_max.order = {"x", "", "m"};
  auto [code, message] = error_of([&] { runtime_max.bound(); });
  CHECK(code == ErrorCode::Unsupported);
  CHECK(message == "Clip node 'n' (#0): the max comes from 'm' which is computed at run time; cnnrt needs it constant");
}

TEST_CASE("Add, Sub, Mul, Div broadcast like numpy") {
  check_close(binary("Add", ramp({2, 3}), HostTensor::floats({3}, {10, 20, 30})).run(), {2, 3},
              {10, 21, 32, 13, 24, 35});
  check_close(binary("Mul", HostTensor::floats({2, 1}, {1, 2}), HostTensor::floats({1, 3}, {1, 10, 100})).run(),
              {2, 3}, {1, 10, 100, 2, 20, 200});
  check_close(binary("Sub", HostTensor::floats({}, {1}), ramp({3})).run(), {3}, {1, 0, -1});
  check_close(binary("Div", ramp({2, 2}), HostTensor::floats({2, 1}, {1, 2})).run(), {2, 2}, {0, 1, 1, 1.5f});
  check_close(binary("Pow", ramp({3}), HostTensor::floats({}, {2})).run(), {3}, {0, 1, 4});

  auto [code, message] = error_of([&] { binary("Add", ramp({2, 3}), ramp({4})).bound(); });
  CHECK(code == ErrorCode::InvalidModel);
  CHECK(message.find("shapes 2x3 and 4 do not broadcast") != std::string::npos);
}

TEST_CASE("Pow takes an int64 exponent (opset 12)") {
  OneNode pow("Pow");
  pow.runtime = {{"x", ramp({3}, 1)}};
  pow.constants = {{"e", HostTensor::ints({}, {3})}};
  pow.order = {"x", "e"};
  check_close(pow.run(), {3}, {1, 8, 27});
}

TEST_CASE("int64 arithmetic folds; division truncates and rejects zero") {
  OneNode div("Div");
  div.constants = {{"a", HostTensor::ints({3}, {7, -7, 9})}, {"b", HostTensor::ints({}, {2})}};
  div.order = {"a", "b"};
  check_ints(div.folded(), {3}, {3, -3, 4});

  div.constants[1].second = HostTensor::ints({}, {0});
  auto [code, message] = error_of([&] { div.bound(); });
  CHECK(code == ErrorCode::InvalidModel);
  CHECK(message.find("division of 7 by zero") != std::string::npos);
}

TEST_CASE("PRelu broadcasts the slope to X only") {
  OneNode prelu("PRelu");
  prelu.runtime = {{"x", HostTensor::floats({1, 2, 2}, {-1, 2, -3, 4})}};
  prelu.constants = {{"slope", HostTensor::floats({2, 1}, {0.5f, 0.25f})}};
  prelu.order = {"x", "slope"};
  check_close(prelu.run(), {1, 2, 2}, {-0.5f, 2, -0.75f, 4});

  prelu.constants[0].second = HostTensor::floats({3, 1, 1}, {1, 2, 3});
  CHECK(error_of([&] { prelu.bound(); }).second.find("slope 3x1x1 does not broadcast to the input 1x2x2") !=
        std::string::npos);
}

TEST_CASE("Max, Min, Sum, Mean take any number of broadcast inputs") {
  auto variadic = [](const std::string& op) {
    OneNode node(op);
    node.runtime = {{"a", HostTensor::floats({2, 2}, {1, 5, 3, 0})},
                    {"b", HostTensor::floats({2}, {2, 2})},
                    {"c", HostTensor::floats({}, {4})}};
    node.order = {"a", "b", "c"};
    return node.run();
  };
  check_close(variadic("Max"), {2, 2}, {4, 5, 4, 4});
  check_close(variadic("Min"), {2, 2}, {1, 2, 2, 0});
  check_close(variadic("Sum"), {2, 2}, {7, 11, 9, 6});
  check_close(variadic("Mean"), {2, 2}, {7 / 3.f, 11 / 3.f, 3, 2});

  OneNode single("Sum");
  single.runtime = {{"a", ramp({3})}};
  single.order = {"a"};
  check_close(single.run(), {3}, {0, 1, 2});
}

TEST_CASE("BatchNormalization: values, canonical epsilon, unsupported training") {
  OneNode bn("BatchNormalization", attrs({{"momentum", 0.9f}}));
  bn.runtime = {{"x", HostTensor::floats({1, 2, 2}, {1, 2, 3, 4})}};
  bn.constants = {{"scale", HostTensor::floats({2}, {2, 1})},
                  {"bias", HostTensor::floats({2}, {0, 10})},
                  {"mean", HostTensor::floats({2}, {1, 3})},
                  {"var", HostTensor::floats({2}, {4, 1})}};
  bn.order = {"x", "scale", "bias", "mean", "var"};
  // Channel 0: (x - 1) / sqrt(4 + eps) * 2; channel 1: (x - 3) / sqrt(1 + eps) + 10.
  check_close(bn.run(), {1, 2, 2}, {0, 1, 10, 11}, 1e-4f);
  const Attributes canonical = bn.bound().nodes.at(0).attrs;
  CHECK(canonical.get_float("epsilon", 0) == doctest::Approx(1e-5));
  CHECK_FALSE(canonical.has("momentum"));

  OneNode training = bn;
  training.attributes.set("training_mode", int64_t{1});
  training.opset = 7;
  training.attributes.set("spatial", int64_t{0});
  std::vector<std::string> problems;
  const Graph graph = training.graph();
  find_op("BatchNormalization")->check(graph.nodes[0], graph, 7, problems);
  CHECK(problems == std::vector<std::string>{"spatial=0 is not supported (one scale per channel only)",
                                             "training_mode=1 is not supported (inference only)"});

  OneNode wrong_shape = bn;
  wrong_shape.constants[2].second = HostTensor::floats({3}, {0, 0, 0});
  auto [code, message] = error_of([&] { wrong_shape.bound(); });
  CHECK(code == ErrorCode::InvalidModel);
  CHECK(message.find("mean 'mean' has shape 3, expected 2") != std::string::npos);
}

TEST_CASE("check reports input types cnnrt does not compute with") {
  GraphBuilder builder;
  builder.input("x", {2});
  builder.graph.values[0].dtype = DType::Float16;
  builder.node("Relu", {"x"}, {"y"}).output("y");
  std::vector<std::string> problems;
  find_op("Relu")->check(builder.graph.nodes[0], builder.graph, 13, problems);
  CHECK(problems == std::vector<std::string>{"input 'x' has type float16, which is not supported (float32 and int64 "
                                             "are)"});
}
