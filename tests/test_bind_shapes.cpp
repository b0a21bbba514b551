// passes::bind_shapes: input shapes against declared dims, node errors with the node label, dead-node
// removal, and graph outputs that are constants or inputs.
#include "op_test_util.hpp"

using namespace cnnrt;
using namespace cnnrt::ir;
using namespace cnnrt::test;

namespace {

GraphBuilder batch_model() {
  GraphBuilder builder;
  builder.input("x", {-1, 3}, {"N", ""}).input("z", {-1, 3}, {"N", ""});
  builder.node("Add", {"x", "z"}, {"y"}, {}, "add").output("y");
  return builder;
}

}  // namespace

TEST_CASE("symbolic dims take the given sizes; fixed dims must match") {
  Graph graph = batch_model().graph;
  passes::bind_shapes(graph, {{5, 3}, {5, 3}});
  CHECK(*graph.values[graph.outputs[0]].shape == Shape{5, 3});

  auto [code, message] = error_of([] {
    Graph g = batch_model().graph;
    passes::bind_shapes(g, {{5, 4}, {5, 4}});
  });
  CHECK(code == ErrorCode::InvalidInput);
  CHECK(message == "input 'x' dim 1 is declared as 3 but given as 4");

  CHECK(error_of([] {
          Graph g = batch_model().graph;
          passes::bind_shapes(g, {{5, 3}, {6, 3}});
        }).second == "input 'z' dim 0 ('N') is given as 6, but 'x' has 'N' = 5");
  CHECK(error_of([] {
          Graph g = batch_model().graph;
          passes::bind_shapes(g, {{5, 3, 1}, {5, 3}});
        }).second == "input 'x' is declared with rank 2 (-1x3) but given shape 5x3x1");
  CHECK(error_of([] {
          Graph g = batch_model().graph;
          passes::bind_shapes(g, {{5, 3}});
        }).first == ErrorCode::InvalidInput);
}

TEST_CASE("errors from a node carry its label; unknown ops are Unsupported") {
  GraphBuilder builder;
  builder.input("x", {2, 3}).input("z", {4});
  builder.node("Add", {"x", "z"}, {"y"}, {}, "/layer1/Add").output("y");
  auto [code, message] = error_of([&] { passes::bind_shapes(builder.graph, {{2, 3}, {4}}); });
  CHECK(code == ErrorCode::InvalidModel);
  CHECK(message == "Add node '/layer1/Add' (#0): shapes 2x3 and 4 do not broadcast (axis 1: 3 vs 4)");

  GraphBuilder unknown;
  unknown.input("x", {2}).node("GridSample", {"x"}, {"y"}).output("y");
  auto [code2, message2] = error_of([&] { passes::bind_shapes(unknown.graph, {{2}}); });
  CHECK(code2 == ErrorCode::Unsupported);
  CHECK(message2 == "GridSample node #0: op GridSample (domain '') is not supported");

  GraphBuilder dangling;
  dangling.input("x", {2}).node("Add", {"x", "ghost"}, {"y"}).output("y");
  CHECK(error_of([&] { passes::bind_shapes(dangling.graph, {{2}}); }).second ==
        "Add node #0: input 'ghost' is not produced by any earlier node, model input or initializer");

  GraphBuilder arity;
  arity.input("x", {2}).node("Relu", {"x", "x"}, {"y"}).output("y");
  CHECK(error_of([&] { passes::bind_shapes(arity.graph, {{2}}); }).second == "Relu node #0: 2 inputs, expected 1 to 1");
}

TEST_CASE("dead nodes go; constant and pass-through outputs stay") {
  GraphBuilder builder;
  builder.input("x", {2})
      .node("Relu", {"x"}, {"unused"})
      .node("Neg", {"x"}, {"y"})
      .node("Shape", {"x"}, {"shape"})
      .output("y")
      .output("shape")
      .output("x");
  Graph graph = builder.graph;
  passes::bind_shapes(graph, {{2}});
  REQUIRE(graph.nodes.size() == 1);
  CHECK(graph.nodes[0].op == "Neg");
  const std::vector<HostTensor> out = cpu::run_graph(graph, {HostTensor::floats({2}, {1, -2})});
  check_close(out[0], {2}, {-1, 2});
  check_ints(out[1], {1}, {2});
  check_close(out[2], {2}, {1, -2});
}

TEST_CASE("a Conv whose weights are computed from constants folds them first") {
  // w = Transpose(w0) is folded, so Conv still sees a constant weight.
  GraphBuilder builder;
  builder.input("x", {1, 1, 2, 2})
      .constant("w0", HostTensor::floats({1, 1, 2, 1}, {1, 2}))
      .node("Transpose", {"w0"}, {"w"}, attrs({{"perm", ints{0, 1, 3, 2}}}))
      .node("Conv", {"x", "w"}, {"y"})
      .output("y");
  Graph graph = builder.graph;
  passes::bind_shapes(graph, {{1, 1, 2, 2}});
  REQUIRE(graph.nodes.size() == 1);
  check_close(cpu::run_graph(graph, {ramp({1, 1, 2, 2})}).at(0), {1, 1, 2, 1}, {2, 8});
}
