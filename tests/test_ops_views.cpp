// Views (Identity, Dropout, Reshape, Flatten, Squeeze, Unsqueeze, Cast): output shapes across opsets,
// canonical attributes, and the errors for inconsistent or run-time shape inputs.
#include <limits>

#include "ir/ops.hpp"
#include "op_test_util.hpp"

using namespace cnnrt;
using namespace cnnrt::ir;
using namespace cnnrt::test;

namespace {

OneNode reshape(Shape input, ints target, Attributes attributes = {}) {
  OneNode node("Reshape", std::move(attributes));
  node.runtime = {{"x", ramp(std::move(input))}};
  const int64_t rank = static_cast<int64_t>(target.size());
  node.constants = {{"shape", HostTensor::ints({rank}, std::move(target))}};
  node.order = {"x", "shape"};
  return node;
}

Shape output_shape(const OneNode& node) {
  const Graph bound = node.bound();
  return *bound.values[bound.outputs.at(0)].shape;
}

std::vector<std::string> check_problems(const OneNode& node) {
  const Graph graph = node.graph();
  std::vector<std::string> problems;
  find_op(node.op)->check(graph.nodes.at(0), graph, node.opset, problems);
  return problems;
}

}  // namespace

TEST_CASE("Reshape: 0 copies a dim, -1 takes the rest, allowzero keeps 0") {
  CHECK(output_shape(reshape({2, 3, 4}, {0, -1})) == Shape{2, 12});
  CHECK(output_shape(reshape({2, 3, 4}, {-1, 0, 2})) == Shape{4, 3, 2});
  check_close(reshape({2, 3}, {3, 2}).run(), {3, 2}, {0, 1, 2, 3, 4, 5});
  CHECK(output_shape(reshape({0, 3}, {0, 3}, attrs({{"allowzero", int64_t{1}}}))) == Shape{0, 3});
  const Node canonical = reshape({2, 3}, {-1}).bound().nodes.at(0);
  CHECK(canonical.inputs.size() == 1);
  CHECK_FALSE(canonical.attrs.has("allowzero"));
}

TEST_CASE("Reshape errors name both shapes; a run-time target is Unsupported naming the value") {
  auto [code, message] = error_of([] { reshape({2, 3}, {4, -1}).bound(); });
  CHECK(code == ErrorCode::InvalidModel);
  CHECK(message == "Reshape node 'n' (#0): cannot reshape 2x3 to [4, -1]: the -1 has no integer size");
  CHECK(error_of([] { reshape({2, 3}, {-1, -1}).bound(); }).second.find("more than one -1") != std::string::npos);
  CHECK(error_of([] { reshape({2, 3}, {5}).bound(); }).second.find("cannot reshape 2x3 (6 elements) to 5 (5 elements)") !=
        std::string::npos);
  CHECK(error_of([] { reshape({2, 3}, {0, 0, 0}).bound(); }).second.find("copies dim 2 (0)") != std::string::npos);

  GraphBuilder builder;
  builder.input("x", {2, 3}).input("t", {2});
  builder.node("Reshape", {"x", "t"}, {"y"}, {}, "r").output("y");
  CHECK(error_of([&] { bind_and_run(builder.graph, {ramp({2, 3}), ramp({2})}); }).second ==
        "Reshape node 'r' (#0): the target shape comes from 't' which is computed at run time; cnnrt needs it "
        "constant");
  OneNode runtime_target("Reshape");
  runtime_target.runtime = {{"x", ramp({2, 3})}, {"t", ramp({2})}};
  runtime_target.order = {"x", "t"};
  CHECK(check_problems(runtime_target) ==
        std::vector<std::string>{"the target shape comes from the model input 't'; cnnrt needs it constant"});
}

TEST_CASE("Reshape opset 1 reads the shape attribute") {
  OneNode old_reshape("Reshape", attrs({{"shape", ints{3, -1}}}));
  old_reshape.opset = 1;
  old_reshape.runtime = {{"x", ramp({2, 3})}};
  old_reshape.order = {"x"};
  CHECK(output_shape(old_reshape) == Shape{3, 2});
  CHECK_FALSE(old_reshape.bound().nodes.at(0).attrs.has("shape"));
}

TEST_CASE("Flatten: axis 0, negative axis, axis = rank") {
  OneNode flatten("Flatten", attrs({{"axis", int64_t{0}}}));
  flatten.runtime = {{"x", ramp({2, 3, 4})}};
  flatten.order = {"x"};
  CHECK(output_shape(flatten) == Shape{1, 24});
  flatten.attributes.set("axis", int64_t{-1});
  CHECK(output_shape(flatten) == Shape{6, 4});
  CHECK(flatten.bound().nodes.at(0).attrs.get_int("axis", -1) == 2);
  flatten.attributes.set("axis", int64_t{3});
  CHECK(output_shape(flatten) == Shape{24, 1});
  flatten.attributes.set("axis", int64_t{4});
  CHECK(error_of([&] { flatten.bound(); }).second.find("axis 4 is out of range for rank 3") != std::string::npos);
}

TEST_CASE("Squeeze: attribute (opset 11), input (opset 13), or every unit dim") {
  OneNode old_squeeze("Squeeze", attrs({{"axes", ints{-1, 0}}}));
  old_squeeze.opset = 11;
  old_squeeze.runtime = {{"x", ramp({1, 3, 1})}};
  old_squeeze.order = {"x"};
  CHECK(output_shape(old_squeeze) == Shape{3});
  CHECK(old_squeeze.bound().nodes.at(0).attrs.get_ints("axes") == ints{0, 2});

  OneNode squeeze("Squeeze");
  squeeze.runtime = {{"x", ramp({1, 3, 1})}};
  squeeze.constants = {{"axes", HostTensor::ints({1}, {2})}};
  squeeze.order = {"x", "axes"};
  CHECK(output_shape(squeeze) == Shape{1, 3});
  const Node canonical = squeeze.bound().nodes.at(0);
  CHECK(canonical.inputs.size() == 1);
  CHECK(canonical.attrs.get_ints("axes") == ints{2});

  OneNode all_units("Squeeze");
  all_units.runtime = {{"x", ramp({1, 3, 1})}};
  all_units.order = {"x"};
  CHECK(output_shape(all_units) == Shape{3});
  CHECK(all_units.bound().nodes.at(0).attrs.get_ints("axes") == ints{0, 2});
  all_units.constants = {{"axes", HostTensor::ints({0}, {})}};
  all_units.order = {"x", "axes"};
  CHECK(output_shape(all_units) == Shape{3});  // an empty axes list means the same

  squeeze.constants[0].second = HostTensor::ints({1}, {1});
  CHECK(error_of([&] { squeeze.bound(); }).second.find("cannot squeeze axis 1 of size 3 (input 1x3x1)") !=
        std::string::npos);
}

TEST_CASE("Unsqueeze: axes count in the output rank, negative ones too") {
  OneNode unsqueeze("Unsqueeze");
  unsqueeze.runtime = {{"x", ramp({3, 4})}};
  unsqueeze.constants = {{"axes", HostTensor::ints({2}, {-1, 0})}};
  unsqueeze.order = {"x", "axes"};
  CHECK(output_shape(unsqueeze) == Shape{1, 3, 4, 1});
  CHECK(unsqueeze.bound().nodes.at(0).attrs.get_ints("axes") == ints{0, 3});

  OneNode old_unsqueeze("Unsqueeze", attrs({{"axes", ints{1}}}));
  old_unsqueeze.opset = 11;
  old_unsqueeze.runtime = {{"x", ramp({3})}};
  old_unsqueeze.order = {"x"};
  CHECK(output_shape(old_unsqueeze) == Shape{3, 1});

  unsqueeze.constants[0].second = HostTensor::ints({1}, {4});
  CHECK(error_of([&] { unsqueeze.bound(); }).first == ErrorCode::InvalidModel);
}

TEST_CASE("Cast: float32 to float32 is a view at run time; constants fold; other run-time casts are unsupported") {
  OneNode view("Cast", attrs({{"to", int64_t(DType::Float32)}}));
  view.runtime = {{"x", ramp({3})}};
  view.order = {"x"};
  check_close(view.run(), {3}, {0, 1, 2});

  OneNode to_int = view;
  to_int.attributes.set("to", int64_t(DType::Int64));
  auto [code, message] = error_of([&] { to_int.bound(); });
  CHECK(code == ErrorCode::Unsupported);
  CHECK(message.find("casting 'x' from float32 to int64 at run time is not supported") != std::string::npos);

  OneNode folded("Cast", attrs({{"to", int64_t(DType::Int64)}}));
  folded.constants = {{"c", HostTensor::floats({4}, {1.9f, -1.9f, NAN, 1e30f})}};
  folded.order = {"c"};
  check_ints(folded.folded(), {4}, {1, -1, 0, std::numeric_limits<int64_t>::max()});
  folded.attributes.set("to", int64_t(DType::Bool));
  check_ints(folded.folded(), {4}, {1, 1, 1, 1});

  OneNode to_half("Cast", attrs({{"to", int64_t(DType::Float16)}}));
  to_half.runtime = {{"x", ramp({3})}};
  to_half.order = {"x"};
  CHECK(check_problems(to_half) == std::vector<std::string>{"Cast to float16 is not supported (float32, int64 and "
                                                            "bool are)"});
}

TEST_CASE("Dropout is an identity in inference; training and a used mask are unsupported") {
  OneNode dropout("Dropout");
  dropout.opset = 12;
  dropout.runtime = {{"x", ramp({3})}};
  dropout.constants = {{"ratio", HostTensor::floats({}, {0.5f})}, {"training", HostTensor::ints({}, {0})}};
  dropout.order = {"x", "ratio", "training"};
  dropout.outputs = {"y", "mask"};  // the mask exists but nothing reads it
  check_close(dropout.run(), {3}, {0, 1, 2});
  const Node canonical = dropout.bound().nodes.at(0);
  CHECK(canonical.inputs.size() == 1);
  CHECK(canonical.outputs.size() == 1);

  OneNode training = dropout;
  training.constants[1].second = HostTensor::ints({}, {1});
  CHECK(check_problems(training) == std::vector<std::string>{"training_mode=1 is not supported (inference only)"});
  CHECK(error_of([&] { training.bound(); }).first == ErrorCode::Unsupported);

  GraphBuilder builder(12);
  builder.input("x", {3}).node("Dropout", {"x"}, {"y", "mask"}, {}, "d").output("y").output("mask");
  std::vector<std::string> problems;
  find_op("Dropout")->check(builder.graph.nodes[0], builder.graph, 12, problems);
  CHECK(problems == std::vector<std::string>{"the mask output 'mask' is not supported"});
}

TEST_CASE("Identity passes values through") {
  OneNode identity("Identity");
  identity.runtime = {{"x", ramp({2, 2})}};
  identity.order = {"x"};
  check_close(identity.run(), {2, 2}, {0, 1, 2, 3});
}
