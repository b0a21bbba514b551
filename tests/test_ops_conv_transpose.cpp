// ConvTranspose, DepthToSpace, SpaceToDepth and InstanceNormalization: shapes, canonical attributes and
// values (ConvTranspose against PyTorch's conv_transpose2d/1d, the rearrangements against the Reshape +
// Transpose they are defined by, InstanceNormalization against the formula), through bind_shapes and the CPU
// executor. The ONNX node tests of these ops run in test_conformance.cpp.
#include <cmath>

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

// The canonical attributes and output shape of a ConvTranspose of x over weights w with `attributes`.
struct Bound {
  Attributes attrs;
  Shape out;
};
Bound bind_conv_transpose(Shape x, Shape w, Attributes attributes) {
  OneNode node{"ConvTranspose", std::move(attributes)};
  node.runtime = {{"x", ones(x)}};
  node.constants = {{"w", ones(w)}};
  node.order = {"x", "w"};
  const Graph g = node.bound();
  return {g.nodes.at(0).attrs, *g.values[g.outputs.at(0)].shape};
}

}  // namespace

TEST_CASE("ConvTranspose 3x3 on a 3x3 ramp spreads each pixel over its window (ONNX test_convtranspose)") {
  OneNode up{"ConvTranspose"};
  up.runtime = {{"x", ramp({1, 1, 3, 3})}};
  up.constants = {{"w", ones({1, 2, 3, 3})}};
  up.order = {"x", "w"};
  const std::vector<float> plane = {0, 1,  3,  3,  2,  3,  8,  15, 12, 7,  9,  21, 36,
                                    27, 15, 9, 20, 33, 24, 13, 6,  13, 21, 15, 8};
  std::vector<float> both = plane;
  both.insert(both.end(), plane.begin(), plane.end());
  check_close(up.run(), {1, 2, 5, 5}, both);
  const Graph bound = up.bound();
  const Attributes& canonical = bound.nodes.at(0).attrs;
  CHECK(canonical.get_ints("kernel_shape") == ints{3, 3});
  CHECK(canonical.get_ints("strides") == ints{1, 1});
  CHECK(canonical.get_ints("dilations") == ints{1, 1});
  CHECK(canonical.get_ints("pads") == ints{0, 0, 0, 0});
  CHECK(canonical.get_int("group", 0) == 1);
}

TEST_CASE("ConvTranspose with groups, stride 2, pads 1, output_padding 1 and a bias matches PyTorch") {
  // torch.nn.functional.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1, groups=2)
  OneNode up{"ConvTranspose", attrs({{"strides", ints{2, 2}},
                                     {"pads", ints{1, 1, 1, 1}},
                                     {"output_padding", ints{1, 1}},
                                     {"group", int64_t{2}}})};
  up.runtime = {{"x", ramp({1, 4, 2, 3}, 0.0f, 0.1f)}};
  up.constants = {{"w", ramp({4, 1, 2, 2}, -1.75f, 0.25f)}, {"b", HostTensor::floats({2}, {0.5f, -1.0f})}};
  up.order = {"x", "w", "b"};
  check_close(up.run(), {1, 2, 3, 5},
              {0.5f, 0.2f,  0.4f, 0.05f, 0.3f, -0.4f, -0.95f, -0.6f, -1.2f, -0.8f, 0.2f, -0.25f, 0.1f,  -0.4f, 0.0f,
               3.8f, 3.3f,  4.1f, 3.55f, 4.4f, 2.9f,  2.15f,  3.1f,  2.3f,  3.3f,  4.7f, 4.05f,  5.0f,  4.3f,  5.3f});
  // output_padding is folded into the end pads: the output is 2 * (2 - 1) + 2 - 1 - 0 = 3 rows.
  const Graph bound = up.bound();
  const Attributes& canonical = bound.nodes.at(0).attrs;
  CHECK(canonical.get_ints("pads") == ints{1, 1, 0, 0});
  CHECK_FALSE(canonical.has("output_padding"));
  CHECK(canonical.get_int("group", 0) == 2);
}

TEST_CASE("ConvTranspose 1-D with dilation and weights computed at run time matches PyTorch") {
  // torch.nn.functional.conv_transpose1d(x, w, stride=3, padding=1, output_padding=2, dilation=2)
  OneNode up{"ConvTranspose", attrs({{"strides", ints{3}},
                                     {"pads", ints{1, 1}},
                                     {"output_padding", ints{2}},
                                     {"dilations", ints{2}}})};
  up.runtime = {{"x", HostTensor::floats({1, 2, 3}, {1, 2, 3, -1, 0.5f, 2})},
                {"w", HostTensor::floats({2, 1, 2}, {1, -1, 2, 0.5f})}};
  up.order = {"x", "w"};
  check_close(up.run(), {1, 1, 9}, {0, -1.5f, 3, 0, -1.75f, 7, 0, -2, 0});
  CHECK(check_problems(up.graph()).empty());  // run-time weights are fine for ConvTranspose
  CHECK(up.bound().nodes.at(0).attrs.get_ints("pads") == ints{1, -1});
}

TEST_CASE("ConvTranspose output_shape and auto_pad set the padding as the ONNX spec splits it") {
  SUBCASE("output_shape longer than the full output: the extra pixels go at the end") {
    const Bound b = bind_conv_transpose({1, 1, 3, 3}, {1, 2, 3, 3},
                                        attrs({{"strides", ints{3, 2}}, {"output_shape", ints{10, 8}}}));
    CHECK(b.out == Shape{1, 2, 10, 8});
    CHECK(b.attrs.get_ints("pads") == ints{0, 0, -1, -1});
    CHECK_FALSE(b.attrs.has("output_shape"));
  }
  SUBCASE("output_shape with N and C in front, and output_padding counted in the total") {
    const Bound b = bind_conv_transpose({1, 1, 3, 3}, {1, 2, 3, 3},
                                        attrs({{"strides", ints{3, 2}},
                                               {"output_padding", ints{1, 1}},
                                               {"output_shape", ints{1, 2, 10, 8}}}));
    CHECK(b.out == Shape{1, 2, 10, 8});
    CHECK(b.attrs.get_ints("pads") == ints{0, 0, -1, -1});
  }
  SUBCASE("output_shape shorter: an odd total pads one more at the beginning") {
    const Bound b = bind_conv_transpose({1, 1, 4, 4}, {1, 1, 3, 3}, attrs({{"output_shape", ints{3, 5}}}));
    CHECK(b.out == Shape{1, 1, 3, 5});
    CHECK(b.attrs.get_ints("pads") == ints{2, 1, 1, 0});  // totals 3 and 1
  }
  SUBCASE("SAME_UPPER: input * stride, the odd pixel of padding at the end") {
    const Bound b = bind_conv_transpose({1, 1, 3, 3}, {1, 2, 3, 3},
                                        attrs({{"auto_pad", std::string("SAME_UPPER")}, {"strides", ints{2, 2}}}));
    CHECK(b.out == Shape{1, 2, 6, 6});
    CHECK(b.attrs.get_ints("pads") == ints{0, 0, 1, 1});
    CHECK_FALSE(b.attrs.has("auto_pad"));
  }
  SUBCASE("SAME_LOWER: the odd pixel at the beginning") {
    const Bound b = bind_conv_transpose({1, 1, 3, 3}, {1, 2, 3, 3},
                                        attrs({{"auto_pad", std::string("SAME_LOWER")}, {"strides", ints{2, 2}}}));
    CHECK(b.out == Shape{1, 2, 6, 6});
    CHECK(b.attrs.get_ints("pads") == ints{1, 1, 0, 0});
  }
  SUBCASE("VALID: no padding") {
    const Bound b = bind_conv_transpose({1, 1, 3, 3}, {1, 1, 2, 2},
                                        attrs({{"auto_pad", std::string("VALID")}, {"strides", ints{2, 2}},
                                               {"pads", ints{1, 1, 1, 1}}}));
    CHECK(b.out == Shape{1, 1, 6, 6});
    CHECK(b.attrs.get_ints("pads") == ints{0, 0, 0, 0});
  }
}

TEST_CASE("ConvTranspose errors name the shapes and the values") {
  auto error = [](Shape x, Shape w, Attributes a) {
    return error_of([&] { bind_conv_transpose(x, w, a); });
  };
  std::pair<ErrorCode, std::string> e = error({1, 3, 4, 4}, {2, 1, 3, 3}, {});
  CHECK(e.first == ErrorCode::InvalidModel);
  CHECK(e.second.find("ConvTranspose node 'n' (#0)") == 0);
  CHECK(e.second.find("weight 2x1x3x3 is for 2 input channels but input 1x3x4x4 has 3") != std::string::npos);
  e = error({1, 3, 4, 4}, {3, 1, 3, 3}, attrs({{"group", int64_t{2}}}));
  CHECK(e.second.find("3 input channels do not split into 2 groups") != std::string::npos);
  e = error({1, 1, 4, 4}, {1, 1, 3, 3}, attrs({{"output_padding", ints{-1, 0}}}));
  CHECK(e.first == ErrorCode::InvalidModel);
  CHECK(e.second.find("output_padding -1 on axis 0 is negative") != std::string::npos);
  e = error({1, 1, 1, 1}, {1, 1, 1, 1}, attrs({{"pads", ints{1, 0, 1, 0}}}));
  CHECK(e.first == ErrorCode::InvalidModel);
  CHECK(e.second.find("leaves no output on axis 0") != std::string::npos);
  e = error({1, 1, 4, 4}, {1, 1, 3, 3}, attrs({{"pads", ints{-1, 0, 0, 0}}}));
  CHECK(e.first == ErrorCode::Unsupported);
  e = error({1, 1, 4, 4}, {1, 1, 3, 3}, attrs({{"output_shape", ints{0, 4}}}));
  CHECK(e.second.find("output_shape 0 on axis 0 must be positive") != std::string::npos);
  e = error({1, 1, 4, 4}, {1, 1, 3, 3}, attrs({{"strides", ints{int64_t{1} << 40, 1}}}));
  CHECK(e.second.find("out of range") != std::string::npos);

  OneNode bias{"ConvTranspose", attrs({{"group", int64_t{2}}})};
  bias.runtime = {{"x", ones({1, 2, 3, 3})}};
  bias.constants = {{"w", ones({2, 3, 2, 2})}, {"b", ones({3})}};
  bias.order = {"x", "w", "b"};
  CHECK(error_of([&] { bias.bound(); }).second.find("bias 3 does not match the 6 output channels") !=
        std::string::npos);

  OneNode deep{"ConvTranspose"};
  deep.runtime = {{"x", ones({1, 1, 3, 3, 3})}, {"w", ones({1, 1, 2, 2, 2})}};
  deep.order = {"x", "w"};
  CHECK(check_problems(deep.graph()) ==
        std::vector<std::string>{"3-D transposed convolution is not supported (1-D and 2-D are)"});
  CHECK(error_of([&] { deep.bound(); }).first == ErrorCode::Unsupported);
}

// ---- DepthToSpace / SpaceToDepth ---------------------------------------------------------------------

namespace {

// What DepthToSpace is defined as: Reshape to 6-D, Transpose, Reshape (ONNX's operator documentation).
HostTensor depth_to_space_by_definition(const HostTensor& x, int64_t b, bool crd) {
  const Shape& s = x.shape();
  const int64_t n = s[0], c = s[1], h = s[2], w = s[3];
  GraphBuilder g;
  g.input("x", s)
      .constant("s6", HostTensor::ints({6}, crd ? ints{n, c / (b * b), b, b, h, w} : ints{n, b, b, c / (b * b), h, w}))
      .constant("s4", HostTensor::ints({4}, {n, c / (b * b), h * b, w * b}))
      .node("Reshape", {"x", "s6"}, {"r"})
      .node("Transpose", {"r"}, {"t"}, attrs({{"perm", crd ? ints{0, 1, 4, 2, 5, 3} : ints{0, 3, 4, 1, 5, 2}}}))
      .node("Reshape", {"t", "s4"}, {"y"})
      .output("y");
  return bind_and_run(g.graph, {x}).at(0);
}

HostTensor run_one(const std::string& op, const HostTensor& x, Attributes a) {
  OneNode node{op, std::move(a)};
  node.runtime = {{"x", x}};
  node.order = {"x"};
  return node.run();
}

}  // namespace

TEST_CASE("DepthToSpace DCR and CRD equal their Reshape + Transpose definitions; SpaceToDepth undoes DCR") {
  for (int64_t b : {1, 2, 3}) {
    CAPTURE(b);
    const HostTensor x = ramp({2, 2 * b * b, 3, 5}, 1.0f);
    for (const char* mode : {"DCR", "CRD"}) {
      CAPTURE(mode);
      const HostTensor y = run_one("DepthToSpace", x, attrs({{"blocksize", b}, {"mode", std::string(mode)}}));
      const HostTensor want = depth_to_space_by_definition(x, b, std::string(mode) == "CRD");
      check_close(y, want.shape(), want.float_values());
    }
    const HostTensor dcr = run_one("DepthToSpace", x, attrs({{"blocksize", b}}));  // DCR is the default
    const HostTensor back = run_one("SpaceToDepth", dcr, attrs({{"blocksize", b}}));
    check_close(back, x.shape(), x.float_values());
  }
  // ONNX's SpaceToDepth example: [1, 1, 4, 6] blocksize 2 -> [1, 4, 2, 3].
  check_close(run_one("SpaceToDepth", ramp({1, 1, 4, 6}), attrs({{"blocksize", int64_t{2}}})), {1, 4, 2, 3},
              {0, 2, 4, 12, 14, 16, 1, 3, 5, 13, 15, 17, 6, 8, 10, 18, 20, 22, 7, 9, 11, 19, 21, 23});
}

TEST_CASE("DepthToSpace and SpaceToDepth: canonical mode, and errors naming the shape and blocksize") {
  OneNode d2s{"DepthToSpace", attrs({{"blocksize", int64_t{2}}})};
  d2s.runtime = {{"x", ones({1, 8, 2, 3})}};
  d2s.order = {"x"};
  CHECK(d2s.bound().nodes.at(0).attrs.get_string("mode", "") == "DCR");

  auto message = [](const std::string& op, Shape x, Attributes a) {
    OneNode node{op, std::move(a)};
    node.runtime = {{"x", ones(x)}};
    node.order = {"x"};
    return error_of([&] { node.bound(); }).second;
  };
  CHECK(message("DepthToSpace", {1, 6, 2, 2}, attrs({{"blocksize", int64_t{2}}})).find(
            "6 channels of input 1x6x2x2 are not a multiple of blocksize^2 = 4") != std::string::npos);
  CHECK(message("SpaceToDepth", {1, 1, 4, 5}, attrs({{"blocksize", int64_t{2}}})).find(
            "height and width of input 1x1x4x5 are not multiples of blocksize 2") != std::string::npos);
  CHECK(message("SpaceToDepth", {1, 1, 4, 4}, {}).find("attribute 'blocksize' is missing") != std::string::npos);
  CHECK(message("DepthToSpace", {1, 4, 2, 2}, attrs({{"blocksize", int64_t{0}}})).find("blocksize 0") !=
        std::string::npos);
  CHECK(message("DepthToSpace", {1, 4, 2}, attrs({{"blocksize", int64_t{2}}})).find("is not N x C x H x W") !=
        std::string::npos);

  OneNode bad_mode{"DepthToSpace", attrs({{"blocksize", int64_t{2}}, {"mode", std::string("RCD")}})};
  bad_mode.runtime = {{"x", ones({1, 4, 2, 2})}};
  bad_mode.order = {"x"};
  CHECK(check_problems(bad_mode.graph()) == std::vector<std::string>{"mode 'RCD' is not one of DCR, CRD"});
}

// ---- InstanceNormalization ---------------------------------------------------------------------------

TEST_CASE("InstanceNormalization normalizes every (n, c) plane by its own mean and variance") {
  OneNode norm{"InstanceNormalization", attrs({{"epsilon", 0.01f}})};
  // Plane (0, 0) is 0..5, plane (0, 1) is 6..11, and so on: each has mean start + 2.5 and variance 35/12.
  norm.runtime = {{"x", ramp({2, 2, 2, 3})}, {"scale", HostTensor::floats({2}, {2.0f, -0.5f})}};
  norm.constants = {{"bias", HostTensor::floats({2}, {1.0f, 0.25f})}};
  norm.order = {"x", "scale", "bias"};
  std::vector<float> want;
  const double deviation = std::sqrt(35.0 / 12.0 + 0.01);
  for (int p = 0; p < 4; ++p) {
    const double scale = p % 2 == 0 ? 2.0 : -0.5, bias = p % 2 == 0 ? 1.0 : 0.25;
    for (int i = 0; i < 6; ++i) want.push_back(static_cast<float>(scale * (i - 2.5) / deviation + bias));
  }
  check_close(norm.run(), {2, 2, 2, 3}, want);
  CHECK(norm.bound().nodes.at(0).attrs.get_float("epsilon", 0) == doctest::Approx(0.01f));

  OneNode wrong{"InstanceNormalization"};
  wrong.runtime = {{"x", ones({1, 3, 2, 2})}};
  wrong.constants = {{"scale", ones({2})}, {"bias", ones({3})}};
  wrong.order = {"x", "scale", "bias"};
  CHECK(error_of([&] { wrong.bound(); }).second.find("scale 2 does not match the 3 channels of input 1x3x2x2") !=
        std::string::npos);
  // The default epsilon is 1e-5, written explicitly.
  wrong.constants[0].second = ones({3});
  CHECK(wrong.bound().nodes.at(0).attrs.get_float("epsilon", 0) == doctest::Approx(1e-5f));
}
