// Fold-only ops and shape chains: they must vanish at bind time, leaving constants; with a run-time input
// they are Unsupported naming the value. Also the op table itself.
#include <algorithm>

#include "cpu/ops.hpp"
#include "ir/ops.hpp"
#include "op_test_util.hpp"

using namespace cnnrt;
using namespace cnnrt::ir;
using namespace cnnrt::test;

TEST_CASE("the op table lists every op of docs/ops.md, sorted, each with a CPU kernel unless shape-only") {
  const std::vector<std::string> documented = {
      "Identity", "Dropout", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Cast", "Relu", "Sigmoid", "Tanh", "Abs",
      "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Floor", "Ceil", "Softsign", "Softplus", "Erf", "HardSwish",
      "LeakyRelu", "Elu", "Selu", "HardSigmoid", "Swish", "Gelu", "Clip", "Add", "Sub", "Mul", "Div", "Pow", "PRelu", "Max", "Min",
      "Sum", "Mean", "BatchNormalization", "Conv", "ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool",
      "GlobalMaxPool", "InstanceNormalization", "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "Softmax",
      "LogSoftmax", "Gemm", "MatMul", "Transpose", "DepthToSpace", "SpaceToDepth", "Concat", "Split", "Slice",
      "Gather", "Pad", "Expand", "Shape", "Size", "ConstantOfShape", "Range", "Equal", "Less", "Greater", "Where",
      "Not", "Resize", "Upsample"};
  for (const std::string& op : documented) {
    const OpInfo* info = find_op(op);
    REQUIRE_MESSAGE(info != nullptr, op);
    CHECK((info->check != nullptr));
    CHECK((info->infer != nullptr));
    const std::string runs_as = op == "Upsample" ? "Resize" : op;  // infer rewrites Upsample into Resize
    CHECK_MESSAGE((info->shape_only || cpu::find_kernel(runs_as) != nullptr), op);
  }
  const auto names = ir::supported_ops();
  CHECK(names.size() == documented.size());
  CHECK(std::is_sorted(names.begin(), names.end()));
  CHECK(find_op("Constant") == nullptr);  // the loader turns it into a constant value
  CHECK(find_op("GridSample") == nullptr);
}

TEST_CASE("the flatten shape chain (Shape, Gather, Unsqueeze, Concat) folds; only Reshape runs") {
  GraphBuilder builder;
  builder.input("x", {-1, 3, 2, 2}, {"N", "", "", ""})
      .constant("zero", HostTensor::ints({}, {0}))
      .constant("axes", HostTensor::ints({1}, {0}))
      .constant("minus_one", HostTensor::ints({1}, {-1}))
      .node("Shape", {"x"}, {"shape"})
      .node("Gather", {"shape", "zero"}, {"batch"})
      .node("Unsqueeze", {"batch", "axes"}, {"batch_1d"})
      .node("Concat", {"batch_1d", "minus_one"}, {"target"}, attrs({{"axis", int64_t{0}}}))
      .node("Reshape", {"x", "target"}, {"y"})
      .output("y");
  Graph graph = builder.graph;
  passes::bind_shapes(graph, {{2, 3, 2, 2}});
  REQUIRE(graph.nodes.size() == 1);
  CHECK(graph.nodes[0].op == "Reshape");
  check_ints(*graph.values[graph.find_value("target")].constant, {2}, {2, -1});
  CHECK(*graph.values[graph.outputs[0]].shape == Shape{2, 12});
  check_close(cpu::run_graph(graph, {ramp({2, 3, 2, 2})}).at(0), {2, 12}, ramp({24}).float_values());
}

TEST_CASE("Shape start/end (opset 15) and Size fold from shapes alone") {
  OneNode shape("Shape", attrs({{"start", int64_t{1}}, {"end", int64_t{-1}}}));
  shape.opset = 15;
  shape.runtime = {{"x", ramp({2, 3, 4, 5})}};
  shape.order = {"x"};
  check_ints(shape.folded(), {2}, {3, 4});
  shape.attributes.set("start", int64_t{-100});  // clamped
  check_ints(shape.folded(), {3}, {2, 3, 4});

  OneNode size("Size");
  size.runtime = {{"x", ramp({2, 3, 4, 5})}};
  size.order = {"x"};
  check_ints(size.folded(), {}, {120});
  // A constant graph output comes out of the executor like any other.
  check_ints(size.run(), {}, {120});
}

TEST_CASE("ConstantOfShape and Range fold") {
  OneNode fill("ConstantOfShape", attrs({{"value", HostTensor::ints({1}, {7})}}));
  fill.constants = {{"shape", HostTensor::ints({2}, {2, 3})}};
  fill.order = {"shape"};
  check_ints(fill.folded(), {2, 3}, {7, 7, 7, 7, 7, 7});
  OneNode zeros("ConstantOfShape");
  zeros.constants = {{"shape", HostTensor::ints({1}, {2})}};
  zeros.order = {"shape"};
  check_close(zeros.folded(), {2}, {0, 0});

  OneNode range("Range");
  range.constants = {{"s", HostTensor::floats({}, {1})}, {"l", HostTensor::floats({}, {2})},
                     {"d", HostTensor::floats({}, {0.3f})}};
  range.order = {"s", "l", "d"};
  check_close(range.folded(), {4}, {1, 1.3f, 1.6f, 1.9f});
  range.constants = {{"s", HostTensor::ints({}, {10})}, {"l", HostTensor::ints({}, {4})},
                     {"d", HostTensor::ints({}, {-3})}};
  check_ints(range.folded(), {2}, {10, 7});
  range.constants[2].second = HostTensor::ints({}, {0});
  CHECK(error_of([&] { range.bound(); }).second.find("delta is 0") != std::string::npos);

  OneNode huge("ConstantOfShape");
  huge.constants = {{"shape", HostTensor::ints({2}, {1 << 20, 1 << 20})}};
  huge.order = {"shape"};
  CHECK(error_of([&] { huge.bound(); }).first == ErrorCode::LimitExceeded);
}

TEST_CASE("Equal, Less, Greater, Not and Where fold with int64 booleans") {
  GraphBuilder builder;
  builder.constant("a", HostTensor::ints({3}, {1, 2, 3}))
      .constant("b", HostTensor::ints({3}, {1, 0, 5}))
      .node("Equal", {"a", "b"}, {"eq"})
      .node("Less", {"a", "b"}, {"lt"})
      .node("Greater", {"a", "b"}, {"gt"})
      .node("Not", {"eq"}, {"ne"})
      .node("Where", {"ne", "b", "a"}, {"picked"})
      .output("eq").output("lt").output("gt").output("picked");
  const std::vector<HostTensor> out = bind_and_run(builder.graph, {});
  check_ints(out[0], {3}, {1, 0, 0});
  check_ints(out[1], {3}, {0, 0, 1});
  check_ints(out[2], {3}, {0, 1, 0});
  check_ints(out[3], {3}, {1, 0, 5});  // b where a != b
}

TEST_CASE("fold-only ops and int64 inputs at run time are Unsupported, naming the value") {
  OneNode equal("Equal");
  equal.runtime = {{"x", ramp({3})}};
  equal.constants = {{"c", ramp({3})}};
  equal.order = {"x", "c"};
  auto [code, message] = error_of([&] { equal.bound(); });
  CHECK(code == ErrorCode::Unsupported);
  CHECK(message == "Equal node 'n' (#0): Equal needs constant inputs, but 'x' is computed at run time");

  GraphBuilder builder;
  builder.input("ids", {3}).node("Identity", {"ids"}, {"y"}).output("y");
  builder.graph.values[builder.graph.find_value("ids")].dtype = DType::Int64;
  auto [code2, message2] = error_of([&] { passes::bind_shapes(builder.graph, {{3}}); });
  CHECK(code2 == ErrorCode::Unsupported);
  CHECK(message2 == "input 'ids' has type int64; cnnrt takes float32 inputs");
}

TEST_CASE("check reports fold-only ops fed by model inputs") {
  GraphBuilder builder;
  builder.input("x", {3}).constant("c", ramp({3})).node("Less", {"x", "c"}, {"y"}).output("y");
  std::vector<std::string> problems;
  find_op("Less")->check(builder.graph.nodes[0], builder.graph, 13, problems);
  CHECK(problems == std::vector<std::string>{"Less needs constant inputs, but 'x' is a model input"});
}
