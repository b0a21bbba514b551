// Resize and Upsample: output shapes from scales, sizes and axes; the canonical form; values for each
// coordinate transform and nearest mode; and the refusals (cubic, antialias, crop-and-resize, N/C scales, 5-D,
// run-time scales), each naming the node, the op and the value.
#include "ir/ops.hpp"
#include "op_test_util.hpp"

using namespace cnnrt;
using namespace cnnrt::ir;
using namespace cnnrt::test;

namespace {

// Resize (opset 11 and later) of run-time x with constant scales (sizes empty) or sizes (scales empty).
OneNode resize(HostTensor x, Attributes attributes, std::vector<float> scales, ints sizes = {},
               int64_t opset = 13) {
  OneNode node("Resize", std::move(attributes));
  node.opset = opset;
  node.runtime = {{"x", std::move(x)}};
  if (!scales.empty()) {
    const int64_t count = static_cast<int64_t>(scales.size());
    node.constants.push_back({"scales", HostTensor::floats({count}, std::move(scales))});
    node.order = {"x", "", "scales"};
  } else {
    const int64_t count = static_cast<int64_t>(sizes.size());
    node.constants.push_back({"sizes", HostTensor::ints({count}, std::move(sizes))});
    node.order = {"x", "", "", "sizes"};
  }
  return node;
}

Attributes nearest(const std::string& transform, const std::string& rounding) {
  return attrs({{"mode", std::string("nearest")},
                {"coordinate_transformation_mode", transform},
                {"nearest_mode", rounding}});
}

Attributes linear(const std::string& transform) {
  return attrs({{"mode", std::string("linear")}, {"coordinate_transformation_mode", transform}});
}

// The Unsupported error binding `node` gives (fails when it binds or fails otherwise).
std::string unsupported(const OneNode& node) {
  const auto [code, message] = error_of([&] { node.bound(); });
  CHECK_MESSAGE(code == ErrorCode::Unsupported, message);
  CHECK_MESSAGE(message.find("Resize node 'n'") != std::string::npos, message);
  return message;
}

bool contains(const std::string& text, const std::string& piece) { return text.find(piece) != std::string::npos; }

}  // namespace

TEST_CASE("Upsample (opsets 7 and 9) becomes an asymmetric Resize that repeats pixels") {
  OneNode up("Upsample", attrs({{"mode", std::string("nearest")}}));
  up.opset = 9;
  up.runtime = {{"x", ramp({1, 1, 2, 2})}};
  up.constants = {{"scales", HostTensor::floats({4}, {1, 1, 2, 3})}};
  up.order = {"x", "scales"};
  check_close(up.run(), {1, 1, 4, 6}, {0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 2, 2, 2, 3, 3, 3});
  ir::Graph g = up.bound();
  const Node& canonical = g.nodes.at(0);
  CHECK(canonical.op == "Resize");
  CHECK(canonical.inputs.size() == 1);
  CHECK(canonical.attrs.get_string("coordinate_transformation_mode", "") == "asymmetric");
  CHECK(canonical.attrs.get_string("nearest_mode", "") == "floor");
  CHECK(canonical.attrs.get_ints("sizes") == ints{1, 1, 4, 6});
  CHECK(canonical.attrs.get_floats("scales") == floats{1, 1, 2, 3});
  // Binding again (after the passes) keeps the canonical node as it is.
  passes::bind_shapes(g, {{1, 1, 2, 2}});
  CHECK(g.values[g.outputs[0]].shape == Shape{1, 1, 4, 6});

  OneNode up7("Upsample", attrs({{"mode", std::string("linear")}, {"scales", floats{1, 1, 1, 2}}}));
  up7.opset = 7;
  up7.runtime = {{"x", HostTensor::floats({1, 1, 1, 2}, {0, 1})}};
  up7.order = {"x"};
  check_close(up7.run(), {1, 1, 1, 4}, {0, 0.5f, 1, 1});  // x / 2, the edge repeating past the end

  // Resize-10 (X, scales) reads like Upsample; shrinking picks with ceil: 4 -> 3 reads x / 0.75 = 0, 1.33, 2.67.
  OneNode shrink("Resize", attrs({{"mode", std::string("nearest")}}));
  shrink.opset = 10;
  shrink.runtime = {{"x", HostTensor::floats({1, 1, 1, 4}, {10, 20, 30, 40})}};
  shrink.constants = {{"scales", HostTensor::floats({4}, {1, 1, 1, 0.75f})}};
  shrink.order = {"x", "scales"};
  check_close(shrink.run(), {1, 1, 1, 3}, {10, 30, 40});
}

TEST_CASE("Resize output shapes: floor(input * scale), sizes, opset 18 axes") {
  const ir::Graph g = resize(ramp({2, 3, 5, 7}), nearest("half_pixel", "floor"), {1, 1, 0.5f, 1.5f}).bound();
  CHECK(g.values[g.outputs[0]].shape == Shape{2, 3, 2, 10});
  const ir::Graph by_size = resize(ramp({1, 2, 3, 3}), linear("align_corners"), {}, {1, 2, 7, 1}).bound();
  CHECK(by_size.values[by_size.outputs[0]].shape == Shape{1, 2, 7, 1});

  OneNode with_axes = resize(ramp({1, 1, 1, 1}), attrs({{"axes", ints{-2, 3}}}), {2, 3}, {}, 18);
  check_close(with_axes.run(), {1, 1, 2, 3}, {0, 0, 0, 0, 0, 0});
}

TEST_CASE("Resize linear for each coordinate transform") {
  const HostTensor x = HostTensor::floats({1, 1, 1, 2}, {0, 1});
  // half_pixel, 2 -> 4: (i + 0.5) / 2 - 0.5 = -0.25, 0.25, 0.75, 1.25, clamped to the input.
  check_close(resize(x, linear("half_pixel"), {}, {1, 1, 1, 4}).run(), {1, 1, 1, 4}, {0, 0.25f, 0.75f, 1});
  check_close(resize(x, linear("pytorch_half_pixel"), {1, 1, 1, 2}).run(), {1, 1, 1, 4}, {0, 0.25f, 0.75f, 1});
  // pytorch_half_pixel maps a length-1 output to 0 (half_pixel to the middle).
  check_close(resize(x, linear("pytorch_half_pixel"), {}, {1, 1, 1, 1}).run(), {1, 1, 1, 1}, {0});
  check_close(resize(x, linear("half_pixel"), {}, {1, 1, 1, 1}).run(), {1, 1, 1, 1}, {0.5f});
  check_close(resize(x, linear("align_corners"), {}, {1, 1, 1, 3}).run(), {1, 1, 1, 3}, {0, 0.5f, 1});
  check_close(resize(x, linear("asymmetric"), {1, 1, 1, 2}).run(), {1, 1, 1, 4}, {0, 0.5f, 1, 1});
  // nearest_mode means nothing to linear: any value binds.
  Attributes odd_rounding = linear("asymmetric");
  odd_rounding.set("nearest_mode", std::string("round_half_even"));
  check_close(resize(x, odd_rounding, {1, 1, 1, 2}).run(), {1, 1, 1, 4}, {0, 0.5f, 1, 1});
  // Both axes: the four corners of a 2x2 input, half way.
  check_close(resize(HostTensor::floats({1, 1, 2, 2}, {0, 1, 2, 3}), linear("align_corners"), {}, {1, 1, 3, 3}).run(),
              {1, 1, 3, 3}, {0, 0.5f, 1, 1, 1.5f, 2, 2, 2.5f, 3});
}

TEST_CASE("Resize nearest for each rounding mode") {
  const HostTensor x = HostTensor::floats({1, 1, 1, 3}, {10, 20, 30});
  // asymmetric, 3 -> 12: source coordinates 0, 0.25, 0.5, ..., 2.75.
  auto run = [&](const std::string& rounding) {
    return resize(x, nearest("asymmetric", rounding), {1, 1, 1, 4}).run();
  };
  const Shape shape = {1, 1, 1, 12};
  check_close(run("round_prefer_floor"), shape, {10, 10, 10, 20, 20, 20, 20, 30, 30, 30, 30, 30});
  check_close(run("round_prefer_ceil"), shape, {10, 10, 20, 20, 20, 20, 30, 30, 30, 30, 30, 30});
  check_close(run("floor"), shape, {10, 10, 10, 10, 20, 20, 20, 20, 30, 30, 30, 30});
  check_close(run("ceil"), shape, {10, 20, 20, 20, 20, 30, 30, 30, 30, 30, 30, 30});
  // tf_half_pixel_for_nn, 3 -> 2: (i + 0.5) * 1.5 = 0.75, 2.25.
  check_close(resize(x, nearest("tf_half_pixel_for_nn", "round_prefer_floor"), {}, {1, 1, 1, 2}).run(),
              {1, 1, 1, 2}, {20, 30});
}

TEST_CASE("Resize refusals name the node, the op and the value") {
  const HostTensor x = ramp({1, 1, 2, 2});
  CHECK(contains(unsupported(resize(x, attrs({{"mode", std::string("cubic")}}), {1, 1, 2, 2})),
                 "mode 'cubic' is not supported"));
  CHECK(contains(unsupported(resize(x, linear("tf_crop_and_resize"), {1, 1, 2, 2})),
                 "coordinate_transformation_mode 'tf_crop_and_resize' is not supported"));
  CHECK(contains(unsupported(resize(x, attrs({{"antialias", int64_t{1}}}), {1, 1, 0.5f, 0.5f}, {}, 18)),
                 "antialias=1 is not supported"));
  CHECK(contains(unsupported(resize(x, nearest("asymmetric", "round_half_even"), {1, 1, 2, 2})),
                 "nearest_mode 'round_half_even' is not supported"));
  CHECK(contains(unsupported(resize(x, attrs({{"keep_aspect_ratio_policy", std::string("not_larger")}}), {},
                                    {1, 1, 4, 4}, 18)),
                 "keep_aspect_ratio_policy 'not_larger' is not supported"));
  CHECK(contains(unsupported(resize(x, linear("half_pixel"), {1, 2, 2, 2})), "resizing axis 1"));
  CHECK(contains(unsupported(resize(ramp({1, 1, 2, 2, 2}), linear("half_pixel"), {1, 1, 2, 2, 2})), "4-D"));

  // The loader's check reports every problem at once, before shapes are known.
  const OneNode cubic = resize(x, attrs({{"mode", std::string("cubic")}, {"antialias", int64_t{1}}}), {1, 1, 2, 2});
  const Graph graph = cubic.graph();
  std::vector<std::string> problems;
  find_op("Resize")->check(graph.nodes[0], graph, 19, problems);
  CHECK(problems == std::vector<std::string>{"mode 'cubic' is not supported (nearest, linear are)",
                                             "antialias=1 is not supported (only 0 is)"});

  // Scales from a model input: the check names it; binding refuses it.
  OneNode runtime_scales("Resize");
  runtime_scales.runtime = {{"x", x}, {"s", HostTensor::floats({4}, {1, 1, 2, 2})}};
  runtime_scales.order = {"x", "", "s"};
  const Graph rg = runtime_scales.graph();
  problems.clear();
  find_op("Resize")->check(rg.nodes[0], rg, 13, problems);
  REQUIRE(problems.size() == 1);
  CHECK(contains(problems[0], "the scales input comes from the model input 's'"));
  CHECK(contains(unsupported(runtime_scales), "computed at run time"));
}
