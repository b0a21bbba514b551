// Resizing the two spatial axes of an NCHW tensor: Resize (opsets 10 to 19) and Upsample (opsets 7 and 9,
// rewritten as Resize).
//
// Canonical form (input X only, float32 [N, C, H, W]; N and C keep their size):
//   Resize  mode                             nearest, linear
//           coordinate_transformation_mode   half_pixel, pytorch_half_pixel, align_corners, asymmetric,
//                                            tf_half_pixel_for_nn
//           nearest_mode                     round_prefer_floor, round_prefer_ceil, floor, ceil
//           scales (4 floats)                the scale each axis's coordinates map with (output / input when
//                                            the model gives sizes); 1 for N and C
//           sizes (4 ints)                   the output shape
//           resized_lengths (4 floats)       the output length coordinates map with: the size when the model
//                                            gives sizes, input * scale (not rounded down) when it gives scales
//                                            (align_corners and pytorch_half_pixel read it, as the ONNX reference)
// Upsample and Resize-10 have no coordinate_transformation_mode: they map asymmetrically and pick the nearest
// pixel with floor when enlarging, ceil when shrinking (as ONNX Runtime does).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "core/error.hpp"
#include "ir/ops_util.hpp"

namespace cnnrt::ir {
namespace {

constexpr size_t kRank = 4;  // [N, C, H, W]

const std::set<std::string> kCoordinateModes = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                                                "tf_half_pixel_for_nn"};
const std::set<std::string> kNearestModes = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};

// Upsample (any opset) and Resize-10 take (X, scales) and know no coordinate_transformation_mode.
bool legacy_form(const Node& node, int64_t opset) { return node.op == "Upsample" || opset < 11; }

// A Resize that infer has already written (binding shapes again after the passes).
bool canonical_form(const Node& node) {
  return node.op == "Resize" && node.inputs.size() == 1 && node.attrs.has("sizes") && node.attrs.has("scales") &&
         node.attrs.has("resized_lengths");
}

std::string resize_mode(const Node& node) {
  const std::string mode = node.attrs.get_string("mode", "nearest");
  return node.op == "Upsample" && mode == "bilinear" ? "linear" : mode;  // Upsample-1 spelled it bilinear
}

// One message per attribute value cnnrt cannot run; empty when the node is supported as far as attributes go.
std::vector<std::string> attribute_problems(const Node& node, int64_t opset) {
  std::vector<std::string> problems;
  const std::string mode = resize_mode(node);
  if (mode != "nearest" && mode != "linear") {
    problems.push_back(fmt::format("mode '{}' is not supported (nearest, linear are)", mode));
  }
  if (node.op == "Upsample" && (node.attrs.has("height_scale") || node.attrs.has("width_scale"))) {
    problems.push_back("height_scale/width_scale (Upsample-1) are not supported; use the scales of opset 7 or later");
  }
  if (!legacy_form(node, opset)) {
    const std::string transform = node.attrs.get_string("coordinate_transformation_mode", "half_pixel");
    if (kCoordinateModes.count(transform) == 0) {
      problems.push_back(fmt::format("coordinate_transformation_mode '{}' is not supported (half_pixel, "
                                     "pytorch_half_pixel, align_corners, asymmetric, tf_half_pixel_for_nn are)",
                                     transform));
    }
    const std::string nearest = node.attrs.get_string("nearest_mode", "round_prefer_floor");
    if (mode == "nearest" && kNearestModes.count(nearest) == 0) {
      problems.push_back(fmt::format("nearest_mode '{}' is not supported (round_prefer_floor, round_prefer_ceil, "
                                     "floor, ceil are)", nearest));
    }
  }
  const int64_t antialias = node.attrs.get_int("antialias", 0);
  if (antialias != 0) problems.push_back(fmt::format("antialias={} is not supported (only 0 is)", antialias));
  const std::string policy = node.attrs.get_string("keep_aspect_ratio_policy", "stretch");
  if (policy != "stretch") {
    problems.push_back(fmt::format("keep_aspect_ratio_policy '{}' is not supported (only stretch is)", policy));
  }
  return problems;
}

size_t scales_slot(const Node& node, int64_t opset) { return legacy_form(node, opset) ? 1 : 2; }
constexpr size_t kSizesSlot = 3;  // Resize >= 11

void check_resize(const Node& node, const Graph& graph, int64_t opset, std::vector<std::string>& problems) {
  if (legacy_form(node, opset)) {
    check_constant_inputs(node, graph, problems, {{1, "scales input"}});
  } else {  // roi (input 1) only matters for tf_crop_and_resize, which is refused
    check_constant_inputs(node, graph, problems, {{2, "scales input"}, {kSizesSlot, "sizes input"}});
  }
  for (std::string& problem : attribute_problems(node, opset)) problems.push_back(std::move(problem));
}

// The scales the model gives (input or Upsample-7 attribute); nullopt when absent or empty.
std::optional<std::vector<float>> given_scales(const Node& node, const Graph& graph, int64_t opset) {
  const size_t slot = scales_slot(node, opset);
  if (node.has_input(slot)) {
    const HostTensor& tensor = require_constant_input(node, graph, slot, "scales input");
    if (tensor.numel() == 0) return std::nullopt;  // Resize-11/13: an empty scales beside sizes
    CNNRT_CHECK(tensor.dtype() == DType::Float32 && tensor.rank() == 1, ErrorCode::InvalidModel,
                "the scales '{}' are {} of shape {}, expected a 1-D float list", input_value(node, graph, slot).name,
                dtype_name(tensor.dtype()), shape_str(tensor.shape()));
    return tensor.float_values();
  }
  if (node.op == "Upsample" && node.attrs.has("scales")) return node.attrs.get_floats("scales");
  return std::nullopt;
}

std::optional<std::vector<int64_t>> given_sizes(const Node& node, const Graph& graph, int64_t opset) {
  if (legacy_form(node, opset) || !node.has_input(kSizesSlot)) return std::nullopt;
  const HostTensor& tensor = require_constant_input(node, graph, kSizesSlot, "sizes input");
  if (tensor.numel() == 0) return std::nullopt;
  CNNRT_CHECK(tensor.dtype() == DType::Int64 && tensor.rank() == 1, ErrorCode::InvalidModel,
              "the sizes '{}' are {} of shape {}, expected a 1-D int64 list", input_value(node, graph, kSizesSlot).name,
              dtype_name(tensor.dtype()), shape_str(tensor.shape()));
  return tensor.int_values();
}

void infer_resize(Node& node, Graph& graph, int64_t opset) {
  const Value& in = input_value(node, graph, 0);
  require_float_input(node, graph, 0);
  const Shape& x = *in.shape;
  CNNRT_CHECK(x.size() == kRank, ErrorCode::Unsupported,
              "input '{}' has shape {}; {} resizes 4-D [N, C, H, W] tensors only", in.name, shape_str(x), node.op);
  const std::vector<std::string> problems = attribute_problems(node, opset);
  CNNRT_CHECK(problems.empty(), ErrorCode::Unsupported, "{}", problems.empty() ? "" : problems.front());
  if (canonical_form(node)) {
    const std::vector<int64_t> sizes = node.attrs.get_ints("sizes");
    const std::vector<float> scales = node.attrs.get_floats("scales");
    const std::vector<float> lengths = node.attrs.get_floats("resized_lengths");
    bool valid = sizes.size() == kRank && scales.size() == kRank && lengths.size() == kRank && sizes[0] == x[0] &&
                 sizes[1] == x[1];
    for (size_t axis = 0; valid && axis < kRank; ++axis) {
      valid = sizes[axis] >= 0 && scales[axis] > 0 && std::isfinite(scales[axis]) && lengths[axis] >= 0 &&
              std::isfinite(lengths[axis]);
    }
    CNNRT_CHECK(valid, ErrorCode::InvalidModel, "the Resize attributes sizes, scales and resized_lengths do not fit "
                "the input {}", shape_str(x));
    set_output(node, graph, 0, in.dtype, sizes);
    return;
  }

  const auto scales = given_scales(node, graph, opset);
  const auto sizes = given_sizes(node, graph, opset);
  CNNRT_CHECK(scales.has_value() != sizes.has_value(), ErrorCode::InvalidModel,
              "exactly one of scales and sizes must be given (got {})", scales ? "both" : "neither");
  // Opset 18 `axes` name the axes that scales/sizes list; the others keep their size.
  std::vector<int64_t> axes = {0, 1, 2, 3};
  if (node.attrs.has("axes")) {
    axes = node.attrs.get_ints("axes");
    for (int64_t& axis : axes) axis = normalize_axis(axis, kRank, "resize axis");
    normalize_axes(axes, kRank, "resize axis");  // rejects repeats
  }
  const size_t given = scales ? scales->size() : sizes->size();
  CNNRT_CHECK(given == axes.size(), ErrorCode::InvalidModel, "{} has {} entries for {} axes",
              scales ? "scales" : "sizes", given, axes.size());

  std::vector<float> axis_scales(kRank, 1.0f);
  std::vector<float> resized_lengths(x.begin(), x.end());
  Shape out = x;
  for (size_t j = 0; j < axes.size(); ++j) {
    const int64_t axis = axes[j];
    if (scales) {
      const float scale = (*scales)[j];
      CNNRT_CHECK(scale > 0 && std::isfinite(scale), ErrorCode::InvalidModel, "scale {} on axis {} is not positive",
                  scale, axis);
      axis_scales[axis] = scale;
      const double length = static_cast<double>(x[axis]) * static_cast<double>(scale);
      CNNRT_CHECK(length < 0x1p62, ErrorCode::InvalidModel, "scale {} makes axis {} of size {} too long", scale, axis,
                  x[axis]);
      out[axis] = static_cast<int64_t>(std::floor(length));
      resized_lengths[axis] = static_cast<float>(length);
    } else {
      const int64_t size = (*sizes)[j];
      CNNRT_CHECK(size >= 0, ErrorCode::InvalidModel, "size {} on axis {} is negative", size, axis);
      out[axis] = size;
      resized_lengths[axis] = static_cast<float>(size);
      // Coordinates map with output / input (in float, as ONNX Runtime computes it).
      axis_scales[axis] = x[axis] > 0 ? static_cast<float>(size) / static_cast<float>(x[axis]) : 1.0f;
    }
  }
  for (int64_t axis : {0, 1}) {
    CNNRT_CHECK(out[axis] == x[axis] && axis_scales[axis] == 1.0f, ErrorCode::Unsupported,
                "resizing axis {} ({} -> {}, scale {}) is not supported; cnnrt resizes H and W of [N, C, H, W] only",
                axis, x[axis], out[axis], axis_scales[axis]);
  }
  for (int64_t axis : {2, 3}) {
    CNNRT_CHECK(x[axis] > 0 || out[axis] == 0, ErrorCode::InvalidModel, "cannot resize the empty axis {} of {} to {}",
                axis, shape_str(x), out[axis]);
  }
  numel(out);  // rejects a total that overflows

  std::string transform = node.attrs.get_string("coordinate_transformation_mode", "half_pixel");
  std::string nearest = node.attrs.get_string("nearest_mode", "round_prefer_floor");
  if (legacy_form(node, opset)) {
    const bool shrinks = axis_scales[2] < 1.0f || axis_scales[3] < 1.0f;
    const bool grows = axis_scales[2] > 1.0f || axis_scales[3] > 1.0f;
    CNNRT_CHECK(!(shrinks && grows) || resize_mode(node) != "nearest", ErrorCode::Unsupported,
                "{}-{} nearest that shrinks one axis and enlarges the other (scales {}, {}) is not supported",
                node.op, opset, axis_scales[2], axis_scales[3]);
    transform = "asymmetric";
    nearest = shrinks ? "ceil" : "floor";
  }
  const std::string mode = resize_mode(node);
  if (mode == "linear") nearest = "round_prefer_floor";  // unused; the model's value is not checked for linear
  node.attrs = Attributes{};
  node.attrs.set("mode", mode);
  node.attrs.set("coordinate_transformation_mode", transform);
  node.attrs.set("nearest_mode", nearest);
  node.attrs.set("scales", axis_scales);
  node.attrs.set("sizes", std::vector<int64_t>(out.begin(), out.end()));
  node.attrs.set("resized_lengths", resized_lengths);
  node.op = "Resize";
  keep_inputs(node, 1);
  set_output(node, graph, 0, in.dtype, std::move(out));
}

}  // namespace

void add_resize_ops(std::vector<OpInfo>& table) {
  // name, inputs min..max, outputs min..max, check, infer
  table.push_back({"Resize", 1, 4, 1, 1, check_resize, infer_resize});
  table.push_back({"Upsample", 1, 2, 1, 1, check_resize, infer_resize});
}

}  // namespace cnnrt::ir
