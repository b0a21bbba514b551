// Gemm, MatMul and data movement (Transpose, Concat, Slice, Gather, Pad, Expand): shapes, canonical
// attributes, values and errors.
#include <limits>

#include "ir/ops.hpp"
#include "op_test_util.hpp"

using namespace cnnrt;
using namespace cnnrt::ir;
using namespace cnnrt::test;

namespace {

OneNode with_input(const std::string& op, HostTensor x, Attributes attributes = {}) {
  OneNode node(op, std::move(attributes));
  node.runtime = {{"x", std::move(x)}};
  node.order = {"x"};
  return node;
}

}  // namespace

TEST_CASE("Gemm with transA, transB, alpha, beta and C broadcast from [N]") {
  OneNode gemm("Gemm", attrs({{"transA", int64_t{1}}, {"transB", int64_t{1}}, {"alpha", 0.5f}, {"beta", 2.0f}}));
  gemm.runtime = {{"a", ramp({3, 2})}};
  gemm.constants = {{"b", ramp({4, 3})}, {"c", HostTensor::floats({4}, {1, 2, 3, 4})}};
  gemm.order = {"a", "b", "c"};
  check_close(gemm.run(), {2, 4}, {7, 18, 29, 40, 8.5f, 24, 39.5f, 55});

  OneNode plain("Gemm");
  plain.runtime = {{"a", ramp({1, 2})}};
  plain.constants = {{"b", ramp({2, 2})}};
  plain.order = {"a", "b"};
  const Attributes canonical = plain.bound().nodes.at(0).attrs;
  CHECK(canonical.get_float("alpha", 0) == 1.0f);
  CHECK(canonical.get_float("beta", 0) == 1.0f);
  CHECK(canonical.get_int("transA", -1) == 0);
  CHECK(canonical.get_int("transB", -1) == 0);
  check_close(plain.run(), {1, 2}, {2, 3});

  plain.constants[0].second = ramp({3, 2});
  auto [code, message] = error_of([&] { plain.bound(); });
  CHECK(code == ErrorCode::InvalidModel);
  CHECK(message.find("A 1x2 (transA=0) and B 3x2 (transB=0) disagree on K (2 vs 3)") != std::string::npos);
}

TEST_CASE("MatMul promotes 1-D operands and broadcasts batch dims") {
  OneNode vector_matrix("MatMul");
  vector_matrix.runtime = {{"a", ramp({3})}, {"b", ramp({3, 2})}};
  vector_matrix.order = {"a", "b"};
  check_close(vector_matrix.run(), {2}, {10, 13});

  OneNode matrix_vector("MatMul");
  matrix_vector.runtime = {{"a", ramp({2, 3})}, {"b", ramp({3})}};
  matrix_vector.order = {"a", "b"};
  check_close(matrix_vector.run(), {2}, {5, 14});

  OneNode batched("MatMul");
  batched.runtime = {{"a", ramp({2, 1, 2, 3})}, {"b", ramp({3, 3, 2})}};
  batched.order = {"a", "b"};
  check_close(batched.run(), {2, 3, 2, 2},
              {10, 13, 28, 40, 28, 31, 100, 112, 46, 49, 172, 184, 46, 67, 64, 94, 172, 193, 244, 274, 298, 319, 424,
               454});

  batched.runtime[1].second = ramp({3, 2, 2});
  CHECK(error_of([&] { batched.bound(); }).second.find("disagree on K (3 vs 2)") != std::string::npos);
}

TEST_CASE("Transpose: default reverses, perm must be a permutation") {
  check_close(with_input("Transpose", ramp({2, 3})).run(), {3, 2}, {0, 3, 1, 4, 2, 5});
  const OneNode transpose = with_input("Transpose", ramp({2, 3, 2}), attrs({{"perm", ints{1, 0, 2}}}));
  check_close(transpose.run(), {3, 2, 2}, {0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11});
  CHECK(with_input("Transpose", ramp({2, 3})).bound().nodes.at(0).attrs.get_ints("perm") == ints{1, 0});

  auto [code, message] = error_of([] { with_input("Transpose", ramp({2, 3}), attrs({{"perm", ints{0, 0}}})).bound(); });
  CHECK(code == ErrorCode::InvalidModel);
  CHECK(message.find("perm [0, 0] is not a permutation of the 2 axes of 2x3") != std::string::npos);
}

TEST_CASE("Concat along a negative axis; mismatched inputs name both shapes") {
  OneNode concat("Concat", attrs({{"axis", int64_t{-1}}}));
  concat.runtime = {{"a", ramp({2, 1})}, {"b", ramp({2, 2}, 10)}};
  concat.order = {"a", "b"};
  check_close(concat.run(), {2, 3}, {0, 10, 11, 1, 12, 13});
  CHECK(concat.bound().nodes.at(0).attrs.get_int("axis", -1) == 1);

  concat.runtime[1].second = ramp({3, 2});
  CHECK(error_of([&] { concat.bound(); }).second.find("inputs 2x1 and 3x2 differ outside the concat axis 1") !=
        std::string::npos);
}

TEST_CASE("Slice with negative steps and out-of-range ends") {
  OneNode slice("Slice");
  slice.runtime = {{"x", ramp({3, 4})}};
  slice.constants = {{"starts", HostTensor::ints({2}, {-1, 3})},
                     {"ends", HostTensor::ints({2}, {std::numeric_limits<int64_t>::min(), -5})},
                     {"axes", HostTensor::ints({2}, {0, -1})},
                     {"steps", HostTensor::ints({2}, {-1, -2})}};
  slice.order = {"x", "starts", "ends", "axes", "steps"};
  // numpy x[::-1, 3::-2]
  check_close(slice.run(), {3, 2}, {11, 9, 7, 5, 3, 1});
  const Node canonical = slice.bound().nodes.at(0);
  CHECK(canonical.inputs.size() == 1);
  CHECK(canonical.attrs.get_ints("starts") == ints{2, 3});
  CHECK(canonical.attrs.get_ints("steps") == ints{-1, -2});
}

TEST_CASE("Slice before opset 10 reads attributes; step 0 is invalid") {
  OneNode slice = with_input("Slice", ramp({3, 4}),
                             attrs({{"starts", ints{1}}, {"ends", ints{std::numeric_limits<int64_t>::max()}},
                                    {"axes", ints{1}}}));
  slice.opset = 9;
  check_close(slice.run(), {3, 3}, {1, 2, 3, 5, 6, 7, 9, 10, 11});

  OneNode zero_step("Slice");
  zero_step.runtime = {{"x", ramp({3})}};
  zero_step.constants = {{"s", HostTensor::ints({1}, {0})}, {"e", HostTensor::ints({1}, {3})},
                         {"st", HostTensor::ints({1}, {0})}};
  zero_step.order = {"x", "s", "e", "", "st"};
  CHECK(error_of([&] { zero_step.bound(); }).second.find("step 0 on axis 0") != std::string::npos);
}

TEST_CASE("Gather with negative indices on axis 0 and 1; out-of-range indices are invalid") {
  OneNode gather("Gather");
  gather.runtime = {{"x", ramp({3, 2})}};
  gather.constants = {{"i", HostTensor::ints({1, 2}, {-1, 0})}};
  gather.order = {"x", "i"};
  check_close(gather.run(), {1, 2, 2}, {4, 5, 0, 1});

  gather.attributes.set("axis", int64_t{-1});
  gather.constants[0].second = HostTensor::ints({}, {-1});
  check_close(gather.run(), {3}, {1, 3, 5});
  CHECK(gather.bound().nodes.at(0).inputs.size() == 2);  // indices stay an input

  gather.constants[0].second = HostTensor::ints({1}, {2});
  auto [code, message] = error_of([&] { gather.bound(); });
  CHECK(code == ErrorCode::InvalidModel);
  CHECK(message.find("index 2 in 'i' is out of range for axis 1 of size 2 (data 3x2)") != std::string::npos);
}

TEST_CASE("Pad: constant, edge and reflect; attribute form before opset 11; axes input at 18") {
  auto pad = [](const std::string& mode, ints pads, float value = 0) {
    OneNode node("Pad", attrs({{"mode", mode}}));
    node.runtime = {{"x", HostTensor::floats({3}, {1, 2, 3})}};
    node.constants = {{"pads", HostTensor::ints({2}, std::move(pads))}, {"v", HostTensor::floats({}, {value})}};
    node.order = {"x", "pads", "v"};
    return node;
  };
  check_close(pad("constant", {1, 0}, 9).run(), {4}, {9, 1, 2, 3});
  check_close(pad("edge", {2, 2}).run(), {7}, {1, 1, 1, 2, 3, 3, 3});
  check_close(pad("reflect", {2, 2}).run(), {7}, {3, 2, 1, 2, 3, 2, 1});
  const Node canonical = pad("constant", {1, 0}, 9).bound().nodes.at(0);
  CHECK(canonical.inputs.size() == 1);
  CHECK(canonical.attrs.get_ints("pads") == ints{1, 0});
  CHECK(canonical.attrs.get_float("value", 0) == 9.0f);

  // The ONNX spec's reflect example, in the opset 2 attribute form.
  OneNode old_pad = with_input("Pad", HostTensor::floats({3, 2}, {1.0f, 1.2f, 2.3f, 3.4f, 4.5f, 5.7f}),
                               attrs({{"mode", std::string("reflect")}, {"pads", ints{0, 2, 0, 0}}}));
  old_pad.opset = 2;
  check_close(old_pad.run(), {3, 4}, {1.0f, 1.2f, 1.0f, 1.2f, 2.3f, 3.4f, 2.3f, 3.4f, 4.5f, 5.7f, 4.5f, 5.7f});

  OneNode axes_pad("Pad");
  axes_pad.opset = 18;
  axes_pad.runtime = {{"x", ramp({2, 2})}};
  axes_pad.constants = {{"pads", HostTensor::ints({2}, {0, 1})}, {"axes", HostTensor::ints({1}, {-1})}};
  axes_pad.order = {"x", "pads", "", "axes"};
  check_close(axes_pad.run(), {2, 3}, {0, 1, 0, 2, 3, 0});
  CHECK(axes_pad.bound().nodes.at(0).attrs.get_ints("pads") == ints{0, 0, 0, 1});

  OneNode wrap = pad("wrap", {1, 1});
  std::vector<std::string> problems;
  const Graph graph = wrap.graph();
  find_op("Pad")->check(graph.nodes[0], graph, 19, problems);
  CHECK(problems == std::vector<std::string>{"mode 'wrap' is not supported (constant, edge, reflect are)"});
  // Pads longer than the axis keep reflecting (numpy): period 2 * (3 - 1) = 4.
  check_close(pad("reflect", {4, 3}).run(), {10}, {1, 2, 3, 2, 1, 2, 3, 2, 1, 2});
}

TEST_CASE("Expand broadcasts both ways from a constant shape") {
  OneNode expand("Expand");
  expand.runtime = {{"x", HostTensor::floats({3, 1}, {1, 2, 3})}};
  expand.constants = {{"shape", HostTensor::ints({3}, {2, 1, 2})}};
  expand.order = {"x", "shape"};
  check_close(expand.run(), {2, 3, 2}, {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3});
  CHECK(expand.bound().nodes.at(0).inputs.size() == 1);
}
