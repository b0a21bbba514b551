// cpu::run_graph: inputs checked against the bound shapes, multi-node graphs whose intermediates are freed
// after their last reader, and the error for an op without a kernel.
#include "op_test_util.hpp"

using namespace cnnrt;
using namespace cnnrt::ir;
using namespace cnnrt::test;

namespace {

// x -> Relu -> a; a -> Neg -> b; c = a + b + a (a read twice, after b); y = c * x.
Graph diamond() {
  GraphBuilder builder;
  builder.input("x", {-1, 2}, {"N", ""})
      .node("Relu", {"x"}, {"a"})
      .node("Neg", {"a"}, {"b"})
      .node("Sum", {"a", "b", "a"}, {"c"})
      .node("Mul", {"c", "x"}, {"y"}, {}, "mul")
      .output("y")
      .output("b");
  Graph graph = builder.graph;
  passes::bind_shapes(graph, {{2, 2}});
  return graph;
}

}  // namespace

TEST_CASE("a multi-node graph computes every output") {
  const Graph graph = diamond();
  const std::vector<HostTensor> out = cpu::run_graph(graph, {HostTensor::floats({2, 2}, {1, -2, 3, -4})});
  REQUIRE(out.size() == 2);
  check_close(out[0], {2, 2}, {1, 0, 9, 0});  // relu(x) * x
  check_close(out[1], {2, 2}, {-1, 0, -3, 0});
  // Running again on the same bound graph gives the same result.
  check_close(cpu::run_graph(graph, {HostTensor::floats({2, 2}, {1, -2, 3, -4})})[0], {2, 2}, {1, 0, 9, 0});
}

TEST_CASE("inputs must match the bound shapes and count") {
  const Graph graph = diamond();
  auto [code, message] = error_of([&] { cpu::run_graph(graph, {ramp({2, 3})}); });
  CHECK(code == ErrorCode::InvalidInput);
  CHECK(message == "input 'x' has shape 2x3, but the model was bound to 2x2");
  CHECK(error_of([&] { cpu::run_graph(graph, {}); }).second == "0 inputs given, the model takes 1");
  CHECK(error_of([&] { cpu::run_graph(graph, {HostTensor::ints({2, 2}, {0, 0, 0, 0})}); }).first ==
        ErrorCode::InvalidInput);
}

TEST_CASE("a node without a CPU kernel is an Internal error naming it") {
  Graph graph = diamond();
  graph.nodes.back().op = "FusedThing";
  auto [code, message] = error_of([&] { cpu::run_graph(graph, {ramp({2, 2})}); });
  CHECK(code == ErrorCode::Internal);
  CHECK(message == "FusedThing node 'mul' (#3): the CPU backend has no kernel for FusedThing");
}
