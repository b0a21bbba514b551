// Small graphs for the op, bind and CPU tests: build a graph by value names, bind it, run it, compare.
//
//   GraphBuilder b(13);
//   b.input("x", {1, 1, 5, 5}).constant("w", HostTensor::floats({1, 1, 3, 3}, ones))
//    .node("Conv", {"x", "w"}, {"y"}, attrs({{"pads", ints{1, 1, 1, 1}}})).output("y");
//   HostTensor y = bind_and_run(b.graph, {ramp}).at(0);
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "cpu/executor.hpp"
#include "ir/graph.hpp"
#include "passes/bind_shapes.hpp"

namespace cnnrt::test {

using ints = std::vector<int64_t>;
using floats = std::vector<float>;

inline ir::Attributes attrs(std::initializer_list<std::pair<const char*, ir::AttrValue>> values) {
  ir::Attributes result;
  for (const auto& [name, value] : values) result.set(name, value);
  return result;
}

class GraphBuilder {
 public:
  explicit GraphBuilder(int64_t opset = 13) {
    graph.opset = opset;
    graph.model_name = "<test>";
  }

  // A float32 run-time input. Declared dims < 0 are unknown; dim_params names symbolic dims ("" = fixed).
  GraphBuilder& input(const std::string& name, ir::Shape declared, std::vector<std::string> dim_params = {}) {
    const int id = value(name);
    graph.values[id].dtype = ir::DType::Float32;
    graph.values[id].shape = std::move(declared);
    graph.values[id].dim_params = std::move(dim_params);
    graph.inputs.push_back(id);
    return *this;
  }

  GraphBuilder& constant(const std::string& name, ir::HostTensor tensor) {
    const int id = value(name);
    graph.values[id].dtype = tensor.dtype();
    graph.values[id].shape = tensor.shape();
    graph.values[id].constant = std::make_shared<const ir::HostTensor>(std::move(tensor));
    return *this;
  }

  // Input or output names "" are omitted optional slots.
  GraphBuilder& node(const std::string& op, const std::vector<std::string>& inputs,
                     const std::vector<std::string>& outputs, ir::Attributes attributes = {},
                     const std::string& name = "") {
    ir::Node node;
    node.op = op;
    node.name = name;
    node.onnx_index = static_cast<int>(graph.nodes.size());
    for (const std::string& in : inputs) node.inputs.push_back(in.empty() ? ir::kNoValue : value(in));
    for (const std::string& out : outputs) node.outputs.push_back(out.empty() ? ir::kNoValue : value(out));
    node.attrs = std::move(attributes);
    graph.nodes.push_back(std::move(node));
    return *this;
  }

  GraphBuilder& output(const std::string& name) {
    graph.outputs.push_back(value(name));
    return *this;
  }

  ir::Graph graph;

 private:
  int value(const std::string& name) {
    const int found = graph.find_value(name);
    if (found >= 0) return found;
    ir::Value created;
    created.name = name;
    return graph.add_value(std::move(created));
  }
};

inline std::vector<ir::HostTensor> bind_and_run(ir::Graph graph, const std::vector<ir::HostTensor>& inputs) {
  std::vector<ir::Shape> shapes;
  for (const ir::HostTensor& input : inputs) shapes.push_back(input.shape());
  passes::bind_shapes(graph, shapes);
  return cpu::run_graph(graph, inputs);
}

// One node reading run-time inputs `x0, x1, ...` (in the order of `runtime`) and constants, writing "y".
// Slots in `order` name either; "" leaves an optional slot empty.
struct OneNode {
  explicit OneNode(std::string op_type, ir::Attributes node_attributes = {})
      : op(std::move(op_type)), attributes(std::move(node_attributes)) {}

  std::string op;
  ir::Attributes attributes;
  int64_t opset = 13;
  std::vector<std::pair<std::string, ir::HostTensor>> runtime;    // graph inputs
  std::vector<std::pair<std::string, ir::HostTensor>> constants;  // initializers
  std::vector<std::string> order;                                 // the node's input slots
  std::vector<std::string> outputs{"y"};

  ir::Graph graph() const {
    GraphBuilder builder(opset);
    for (const auto& [name, tensor] : runtime) builder.input(name, tensor.shape());
    for (const auto& [name, tensor] : constants) builder.constant(name, tensor);
    builder.node(op, order, outputs, attributes, "n");
    builder.output(outputs.front());
    return builder.graph;
  }
  // The graph after binding: canonical node (graph.nodes[0]) or folded constants.
  ir::Graph bound() const {
    ir::Graph g = graph();
    std::vector<ir::Shape> shapes;
    for (const auto& entry : runtime) shapes.push_back(entry.second.shape());
    passes::bind_shapes(g, shapes);
    return g;
  }
  // The constant the node folded into (all its inputs constant, or a shape-only op).
  ir::HostTensor folded() const {
    const ir::Graph g = bound();
    CHECK(g.nodes.empty());
    const ir::Value& out = g.values[g.outputs.at(0)];
    REQUIRE(out.is_constant());
    return *out.constant;
  }
  ir::HostTensor run() const {
    std::vector<ir::HostTensor> inputs;
    for (const auto& entry : runtime) inputs.push_back(entry.second);
    return bind_and_run(graph(), inputs).at(0);
  }
};

// 0, 1, 2, ... in the given shape.
inline ir::HostTensor ramp(ir::Shape shape, float start = 0.0f, float step = 1.0f) {
  std::vector<float> values(static_cast<size_t>(ir::numel(shape)));
  for (size_t i = 0; i < values.size(); ++i) values[i] = start + step * static_cast<float>(i);
  return ir::HostTensor::floats(std::move(shape), std::move(values));
}

inline void check_close(const ir::HostTensor& got, const ir::Shape& shape, const std::vector<float>& expected,
                        float tolerance = 1e-5f) {
  REQUIRE(got.dtype() == ir::DType::Float32);
  CHECK(ir::shape_str(got.shape()) == ir::shape_str(shape));
  REQUIRE(got.float_values().size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const float scale = std::max(1.0f, std::fabs(expected[i]));
    if (std::isinf(expected[i])) {
      CHECK_MESSAGE(got.float_values()[i] == expected[i], "element ", i);
    } else {
      CHECK_MESSAGE(std::fabs(got.float_values()[i] - expected[i]) <= tolerance * scale, "element ", i, ": got ",
                    got.float_values()[i], ", expected ", expected[i]);
    }
  }
}

inline void check_ints(const ir::HostTensor& got, const ir::Shape& shape, const std::vector<int64_t>& expected) {
  REQUIRE(got.dtype() == ir::DType::Int64);
  CHECK(ir::shape_str(got.shape()) == ir::shape_str(shape));
  CHECK(fmt::format("{}", fmt::join(got.int_values(), ", ")) == fmt::format("{}", fmt::join(expected, ", ")));
}

// The error code of `fn`'s cnnrt::Error (fails the test when it does not throw one).
template <class Fn>
std::pair<ErrorCode, std::string> error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return {e.code(), e.what()};
  }
  FAIL("expected a cnnrt::Error");
  return {ErrorCode::Internal, ""};
}

}  // namespace cnnrt::test
