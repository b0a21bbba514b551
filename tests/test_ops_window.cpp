// Conv, pooling, reductions and softmax: shapes, canonical attributes and values against hand-computed
// results (numpy-checked), through bind_shapes and the CPU executor.
#include <limits>

#include "ir/ops.hpp"
#include "op_test_util.hpp"

using namespace cnnrt;
using namespace cnnrt::ir;
using namespace cnnrt::test;

namespace {

HostTensor ones(Shape shape) { return HostTensor::floats(shape, floats(static_cast<size_t>(numel(shape)), 1.0f)); }

std::vector<std::string> check_problems(const Graph& graph) {
  std::vector<std::string> problems;
  const Node& node = graph.nodes.at(0);
  find_op(node.op)->check(node, graph, graph.opset, problems);
  return problems;
}

}  // namespace

TEST_CASE("Conv 3x3, pads 1, bias, on a 5x5 ramp") {
  OneNode conv{"Conv", attrs({{"pads", ints{1, 1, 1, 1}}})};
  conv.runtime = {{"x", ramp({1, 1, 5, 5})}};
  conv.constants = {{"w", ones({1, 1, 3, 3})}, {"b", HostTensor::floats({1}, {1.0f})}};
  conv.order = {"x", "w", "b"};
  // Each output is the sum of the 3x3 neighbourhood inside the image, plus the bias 1.
  check_close(conv.run(), {1, 1, 5, 5},
              {13, 22, 28, 34, 25, 34, 55, 64, 73, 52, 64, 100, 109, 118, 82, 94, 145, 154, 163, 112, 73, 112, 118, 124,
               85});
  const Graph bound = conv.bound();
  const Attributes& canonical = bound.nodes.at(0).attrs;
  CHECK(canonical.get_ints("kernel_shape") == ints{3, 3});  // taken from W
  CHECK(canonical.get_ints("strides") == ints{1, 1});
  CHECK(canonical.get_ints("dilations") == ints{1, 1});
  CHECK(canonical.get_ints("pads") == ints{1, 1, 1, 1});
  CHECK(canonical.get_int("group", 0) == 1);
}

TEST_CASE("Conv with stride 2 and dilation 2 reads every other pixel of a 5x5 window") {
  OneNode conv{"Conv", attrs({{"strides", ints{2, 2}}, {"dilations", ints{2, 2}}})};
  conv.runtime = {{"x", ramp({1, 1, 7, 7})}};
  conv.constants = {{"w", ones({1, 1, 3, 3})}};
  conv.order = {"x", "w"};
  // Effective kernel 5: output (7 - 5) / 2 + 1 = 2 per axis.
  check_close(conv.run(), {1, 1, 2, 2}, {144, 162, 270, 288});
}

TEST_CASE("Conv auto_pad SAME_UPPER is resolved into explicit pads and erased") {
  OneNode conv{"Conv", attrs({{"auto_pad", std::string("SAME_UPPER")}, {"strides", ints{2, 2}}})};
  conv.runtime = {{"x", ramp({1, 1, 6, 7})}};
  conv.constants = {{"w", ones({2, 1, 2, 3})}};
  conv.order = {"x", "w"};
  const Graph bound = conv.bound();
  const Attributes& canonical = bound.nodes.at(0).attrs;
  CHECK_FALSE(canonical.has("auto_pad"));
  // Rows: out 3, total pad (3-1)*2+2-6 = 0. Cols: out 4, total (4-1)*2+3-7 = 2 -> 1 + 1.
  CHECK(canonical.get_ints("pads") == ints{0, 1, 0, 1});
  CHECK(*bound.values[bound.outputs[0]].shape == Shape{1, 2, 3, 4});
}

TEST_CASE("Conv 1-D depthwise (group = channels) with asymmetric pads") {
  OneNode conv{"Conv", attrs({{"group", int64_t{2}}, {"pads", ints{1, 0}}})};
  conv.runtime = {{"x", HostTensor::floats({1, 2, 3}, {1, 2, 3, 10, 20, 30})}};
  conv.constants = {{"w", HostTensor::floats({2, 1, 2}, {1, 1, 1, -1})}};
  conv.order = {"x", "w"};
  // Channel 0: [0+1, 1+2, 2+3]; channel 1 (w = [1, -1]): [0-10, 10-20, 20-30].
  check_close(conv.run(), {1, 2, 3}, {1, 3, 5, -10, -10, -10});
}

TEST_CASE("Conv errors name the shapes and the values") {
  OneNode conv{"Conv", attrs({{"group", int64_t{2}}})};
  conv.runtime = {{"x", ramp({1, 3, 4, 4})}};
  conv.constants = {{"w", ones({2, 1, 3, 3})}};
  conv.order = {"x", "w"};
  auto [code, message] = error_of([&] { conv.bound(); });
  CHECK(code == ErrorCode::InvalidModel);
  CHECK(message.find("Conv node 'n' (#0)") == 0);
  CHECK(message.find("2x1x3x3") != std::string::npos);
  CHECK(message.find("1x3x4x4") != std::string::npos);

  OneNode runtime_weight{"Conv"};
  runtime_weight.runtime = {{"x", ramp({1, 1, 4, 4})}, {"w", ones({1, 1, 3, 3})}};
  runtime_weight.order = {"x", "w"};
  CHECK(check_problems(runtime_weight.graph()) ==
        std::vector<std::string>{"the weight comes from the model input 'w'; cnnrt needs it constant"});
  auto [code2, message2] = error_of([&] { runtime_weight.bound(); });
  CHECK(code2 == ErrorCode::Unsupported);
  CHECK(message2.find("'w' which is computed at run time") != std::string::npos);
}

TEST_CASE("3-D convolution and pooling are reported by check and rejected by infer") {
  OneNode conv{"Conv"};
  conv.runtime = {{"x", ramp({1, 1, 3, 3, 3})}};
  conv.constants = {{"w", ones({1, 1, 2, 2, 2})}};
  conv.order = {"x", "w"};
  CHECK(check_problems(conv.graph()) == std::vector<std::string>{"3-D convolution is not supported (1-D and 2-D are)"});
  CHECK(error_of([&] { conv.bound(); }).first == ErrorCode::Unsupported);

  OneNode pool{"MaxPool", attrs({{"kernel_shape", ints{2, 2, 2}}})};
  pool.runtime = {{"x", ramp({1, 1, 3, 3, 3})}};
  pool.order = {"x"};
  CHECK(check_problems(pool.graph()) == std::vector<std::string>{"3-D pooling is not supported (1-D and 2-D are)"});
}

TEST_CASE("MaxPool ceil_mode keeps the partial window (ONNX test_maxpool_2d_ceil)") {
  OneNode pool{"MaxPool", attrs({{"kernel_shape", ints{3, 3}}, {"strides", ints{2, 2}}, {"ceil_mode", int64_t{1}}})};
  pool.runtime = {{"x", ramp({1, 1, 4, 4})}};
  pool.order = {"x"};
  check_close(pool.run(), {1, 1, 2, 2}, {10, 11, 14, 15});
  pool.attributes.set("ceil_mode", int64_t{0});
  check_close(pool.run(), {1, 1, 1, 1}, {10});
}

TEST_CASE("MaxPool with dilation and padding; the Indices output and storage_order are unsupported") {
  OneNode pool{"MaxPool", attrs({{"kernel_shape", ints{2}}, {"dilations", ints{2}}, {"pads", ints{1, 1}}})};
  pool.runtime = {{"x", HostTensor::floats({1, 1, 5}, {3, 1, 4, 1, 5})}};
  pool.order = {"x"};
  // Output i reads input i - 1 and i + 1 (positions in the padding are skipped).
  check_close(pool.run(), {1, 1, 5}, {1, 4, 1, 5, 1});
  CHECK(pool.bound().nodes.at(0).attrs.get_int("ceil_mode", -1) == 0);

  OneNode with_indices = pool;
  with_indices.outputs = {"y", "indices"};
  Graph graph = with_indices.graph();
  graph.outputs.push_back(graph.find_value("indices"));
  graph.nodes[0].attrs.set("storage_order", int64_t{1});
  const auto problems = check_problems(graph);
  REQUIRE(problems.size() == 2);
  CHECK(problems[0].find("storage_order=1") != std::string::npos);
  CHECK(problems[1] == "the Indices output 'indices' is not supported");
}

TEST_CASE("AveragePool count_include_pad, with and without") {
  OneNode pool{"AveragePool", attrs({{"kernel_shape", ints{3, 3}}, {"pads", ints{1, 1, 1, 1}}})};
  pool.runtime = {{"x", ramp({1, 1, 3, 3})}};
  pool.order = {"x"};
  check_close(pool.run(), {1, 1, 3, 3}, {2.0f, 2.5f, 3.0f, 3.5f, 4.0f, 4.5f, 5.0f, 5.5f, 6.0f});
  pool.attributes.set("count_include_pad", int64_t{1});
  check_close(pool.run(), {1, 1, 3, 3},
              {8 / 9.f, 15 / 9.f, 12 / 9.f, 21 / 9.f, 36 / 9.f, 27 / 9.f, 20 / 9.f, 33 / 9.f, 24 / 9.f});
}

TEST_CASE("AveragePool 1-D ceil_mode: the divisor stops at the end padding") {
  OneNode pool{"AveragePool", attrs({{"kernel_shape", ints{3}}, {"strides", ints{2}}, {"pads", ints{1, 1}},
                                     {"ceil_mode", int64_t{1}}, {"count_include_pad", int64_t{1}}})};
  pool.runtime = {{"x", ramp({1, 1, 6})}};
  pool.order = {"x"};
  // Windows start at -1, 1, 3, 5; the last covers 5 (input), 6 (end pad) and 7 (past the padding).
  check_close(pool.run(), {1, 1, 4}, {1 / 3.f, 2.0f, 4.0f, 2.5f});
  pool.attributes.set("count_include_pad", int64_t{0});
  check_close(pool.run(), {1, 1, 4}, {0.5f, 2.0f, 4.0f, 5.0f});
  const Attributes canonical = pool.bound().nodes.at(0).attrs;
  CHECK(canonical.get_int("ceil_mode", -1) == 1);
  CHECK(canonical.get_int("count_include_pad", -1) == 0);
  CHECK_FALSE(canonical.has("dilations"));
}

TEST_CASE("AveragePool dilations are reported as unsupported") {
  OneNode pool{"AveragePool", attrs({{"kernel_shape", ints{2}}, {"dilations", ints{2}}})};
  pool.runtime = {{"x", ramp({1, 1, 6})}};
  pool.order = {"x"};
  CHECK(check_problems(pool.graph()) ==
        std::vector<std::string>{"AveragePool with dilations other than 1 is not supported"});
}

TEST_CASE("GlobalAveragePool and GlobalMaxPool keep N and C") {
  OneNode pool{"GlobalAveragePool"};
  pool.runtime = {{"x", ramp({1, 2, 2, 2})}};
  pool.order = {"x"};
  check_close(pool.run(), {1, 2, 1, 1}, {1.5f, 5.5f});
  pool.op = "GlobalMaxPool";
  check_close(pool.run(), {1, 2, 1, 1}, {3, 7});
}

TEST_CASE("Reduce: axes from the attribute (opset 13) or the input (ReduceSum 13, others 18)") {
  OneNode mean{"ReduceMean", attrs({{"axes", ints{-1}}})};
  mean.runtime = {{"x", ramp({2, 3})}};
  mean.order = {"x"};
  check_close(mean.run(), {2, 1}, {1, 4});
  CHECK(mean.bound().nodes.at(0).attrs.get_ints("axes") == ints{1});

  OneNode sum{"ReduceSum", attrs({{"keepdims", int64_t{0}}})};
  sum.runtime = {{"x", ramp({2, 3})}};
  sum.constants = {{"axes", HostTensor::ints({1}, {0})}};
  sum.order = {"x", "axes"};
  check_close(sum.run(), {3}, {3, 5, 7});
  const Node canonical = sum.bound().nodes.at(0);
  CHECK(canonical.inputs.size() == 1);
  CHECK(canonical.attrs.get_int("keepdims", -1) == 0);

  OneNode max{"ReduceMax"};
  max.opset = 18;
  max.runtime = {{"x", ramp({2, 3})}};
  max.order = {"x"};
  check_close(max.run(), {1, 1}, {5});  // no axes: all of them
  CHECK(max.bound().nodes.at(0).attrs.get_ints("axes") == ints{0, 1});

  max.attributes.set("noop_with_empty_axes", int64_t{1});
  check_close(max.run(), {2, 3}, {0, 1, 2, 3, 4, 5});
  CHECK(max.bound().nodes.at(0).attrs.get_int("noop_with_empty_axes", 0) == 1);

  OneNode min{"ReduceMin", attrs({{"axes", ints{0, 0}}})};
  min.runtime = {{"x", ramp({2, 3})}};
  min.order = {"x"};
  CHECK(error_of([&] { min.bound(); }).second.find("names axis 0 twice") != std::string::npos);
}

TEST_CASE("Softmax opset 11 normalizes over all axes from `axis`; opset 13 over one axis") {
  const HostTensor x = HostTensor::floats({1, 2, 2}, {0, 1, 2, 3});
  OneNode old_softmax{"Softmax"};
  old_softmax.opset = 11;
  old_softmax.runtime = {{"x", x}};
  old_softmax.order = {"x"};
  const double total = 1 + std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  check_close(old_softmax.run(), {1, 2, 2},
              {float(1 / total), float(std::exp(1.0) / total), float(std::exp(2.0) / total),
               float(std::exp(3.0) / total)});
  const Attributes canonical = old_softmax.bound().nodes.at(0).attrs;
  CHECK(canonical.get_int("axis", -1) == 1);
  CHECK(canonical.get_int("coerce_2d", -1) == 1);

  OneNode new_softmax = old_softmax;
  new_softmax.opset = 13;
  new_softmax.attributes.set("axis", int64_t{1});
  const float a = float(1 / (1 + std::exp(2.0)));  // e^0 / (e^0 + e^2): pairs (0, 2) and (1, 3)
  check_close(new_softmax.run(), {1, 2, 2}, {a, a, 1 - a, 1 - a});
  CHECK(new_softmax.bound().nodes.at(0).attrs.get_int("coerce_2d", -1) == 0);

  OneNode default_axis{"LogSoftmax"};  // opset 13: axis -1
  default_axis.runtime = {{"x", HostTensor::floats({2, 2}, {1000, 1001, 0, 0})}};
  default_axis.order = {"x"};
  const float log_sum = float(std::log(1 + std::exp(1.0)));
  check_close(default_axis.run(), {2, 2}, {-log_sum, 1 - log_sum, -float(std::log(2.0)), -float(std::log(2.0))});
  CHECK(default_axis.bound().nodes.at(0).attrs.get_int("axis", -1) == 1);
}

TEST_CASE("hostile window attributes neither hang nor overflow") {
  // A 2^30-wide window with 2^30 padding on a 4-pixel input: two windows, each solved in closed form. The
  // first lies wholly in the padding (-inf, the identity of max); the second covers the input.
  const int64_t huge = int64_t{1} << 30;
  OneNode pool("MaxPool", attrs({{"kernel_shape", ints{huge}}, {"strides", ints{huge}}, {"pads", ints{huge, huge}}}));
  pool.runtime = {{"x", ramp({1, 1, 4})}};
  pool.order = {"x"};
  check_close(pool.run(), {1, 1, 2}, {-INFINITY, 3});

  pool.attributes.set("pads", ints{std::numeric_limits<int64_t>::max(), 0});
  auto [code, message] = error_of([&] { pool.bound(); });
  CHECK(code == ErrorCode::InvalidModel);
  CHECK(message.find("pads value 9223372036854775807 is out of range") != std::string::npos);

  OneNode conv("Conv", attrs({{"group", std::numeric_limits<int64_t>::max()}}));
  conv.runtime = {{"x", ramp({1, 2, 3, 3})}};
  conv.constants = {{"w", ones({1, 2, 1, 1})}};
  conv.order = {"x", "w"};
  CHECK(error_of([&] { conv.bound(); }).first == ErrorCode::InvalidModel);
}
