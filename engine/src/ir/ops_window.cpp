// Window ops (Conv, ConvTranspose, MaxPool, AveragePool, global pools), InstanceNormalization and reductions
// (Reduce*, Softmax, LogSoftmax).
//
// Canonical forms (input X is [N, C, spatial...]; 1-D and 2-D windows):
//   Conv         kernel_shape, strides, dilations, pads (begin..., end...), group; inputs X, W, optional B
//   ConvTranspose  kernel_shape, strides, dilations, pads, group; inputs X, W [C, M/group, k...], optional
//                B [M] (W and B may be computed at run time). pads are resolved so that each output extent is
//                stride * (in - 1) + (k - 1) * dilation + 1 - pad_begin - pad_end (ir::transposed_output_size):
//                output_padding and output_shape are folded into them (an end pad may be negative);
//                auto_pad, output_padding and output_shape are erased
//   InstanceNormalization  epsilon; inputs X (rank >= 3), scale [C], B [C] (may be computed at run time)
//   MaxPool      kernel_shape, strides, dilations, pads, ceil_mode; one output
//   AveragePool  kernel_shape, strides, pads, ceil_mode, count_include_pad
//   GlobalAveragePool, GlobalMaxPool   -   (any rank >= 3)
//   ReduceMean/Sum/Max/Min   axes (sorted, >= 0), keepdims, noop_with_empty_axes (1 exactly when axes is empty)
//   Softmax, LogSoftmax      axis (>= 0), coerce_2d (1: normalize over all axes from `axis` on, opset < 13)
// auto_pad is resolved into pads by ir::resolve_window (ir::resolve_transposed_window for ConvTranspose), the
// one place output sizes are computed.
#include <fmt/format.h>

#include "core/error.hpp"
#include "ir/ops_util.hpp"
#include "ir/window.hpp"

namespace cnnrt::ir {
namespace {

// "convolution", "transposed convolution" or "pooling", for messages.
const char* window_kind(const Node& node) {
  if (node.op == "Conv") return "convolution";
  if (node.op == "ConvTranspose") return "transposed convolution";
  return "pooling";
}

// The number of spatial axes the node asks for, when it can be told before shapes are known.
int64_t declared_spatial_rank(const Node& node, const Graph& graph) {
  if (node.attrs.has("kernel_shape")) return static_cast<int64_t>(node.attrs.get_ints("kernel_shape").size());
  if (node.op != "Conv" && node.op != "ConvTranspose") return 0;
  if (const HostTensor* weight = input_constant(node, graph, 1)) return weight->rank() - 2;
  // ConvTranspose may take its weights from a model input, whose declared shape tells the rank.
  if (node.has_input(1) && node.input(1) < static_cast<int>(graph.values.size())) {
    const Value& weight = graph.values[node.input(1)];
    const std::optional<Shape>& dims = weight.declared ? weight.declared : weight.shape;
    if (dims && !dims->empty()) return static_cast<int64_t>(dims->size()) - 2;
  }
  return 0;
}

void check_spatial_rank(const Node& node, const Graph& graph, std::vector<std::string>& problems) {
  const int64_t spatial = declared_spatial_rank(node, graph);
  if (spatial > 2) {
    problems.push_back(fmt::format("{}-D {} is not supported (1-D and 2-D are)", spatial, window_kind(node)));
  }
}

// Spatial extents of X ([N, C, spatial...]); Unsupported beyond 2-D.
Shape spatial_extents(const Node& node, const Shape& x) {
  CNNRT_CHECK(x.size() >= 3, ErrorCode::InvalidModel, "input {} has no spatial axes (expected N x C x ...)",
              shape_str(x));
  const size_t spatial = x.size() - 2;
  CNNRT_CHECK(spatial <= 2, ErrorCode::Unsupported, "{}-D {} is not supported (1-D and 2-D are)", spatial,
              window_kind(node));
  return Shape(x.begin() + 2, x.end());
}

// Bounds the window attributes and extents: 2^31 pixels is far beyond any image, and the bound keeps the window
// arithmetic (extent + pads, (kernel - 1) * dilation, stride * extent) inside int64.
void check_window_bounds(const Node& node, const Shape& spatial) {
  constexpr int64_t kMaxWindowValue = int64_t{1} << 31;
  for (const char* name : {"kernel_shape", "strides", "dilations", "pads", "output_padding", "output_shape"}) {
    for (int64_t value : node.attrs.get_ints(name)) {
      CNNRT_CHECK(value >= -kMaxWindowValue && value <= kMaxWindowValue, ErrorCode::InvalidModel,
                  "{} value {} is out of range", name, value);
    }
  }
  for (int64_t extent : spatial) {
    CNNRT_CHECK(extent <= kMaxWindowValue, ErrorCode::LimitExceeded, "spatial extent {} exceeds 2^31", extent);
  }
}

// Resolves the window after bounding its attributes (check_window_bounds).
std::vector<WindowAxis> bounded_window(const Node& node, const Shape& spatial, const Shape& kernel, bool ceil_mode) {
  check_window_bounds(node, spatial);
  return resolve_window(node.attrs, spatial, kernel, ceil_mode);
}

// Writes the resolved window as explicit attributes and returns the output's spatial extents.
Shape write_window_attrs(Node& node, const std::vector<WindowAxis>& axes) {
  std::vector<int64_t> kernel, strides, dilations, pads_begin, pads_end;
  Shape out;
  for (const WindowAxis& axis : axes) {
    kernel.push_back(axis.kernel);
    strides.push_back(axis.stride);
    dilations.push_back(axis.dilation);
    pads_begin.push_back(axis.pad_begin);
    pads_end.push_back(axis.pad_end);
    out.push_back(axis.output);
  }
  std::vector<int64_t> pads = pads_begin;
  pads.insert(pads.end(), pads_end.begin(), pads_end.end());
  node.attrs.set("kernel_shape", kernel);
  node.attrs.set("strides", strides);
  node.attrs.set("dilations", dilations);
  node.attrs.set("pads", pads);
  node.attrs.erase("auto_pad");
  return out;
}

// ---- Conv --------------------------------------------------------------------------------------------

void check_conv(const Node& node, const Graph& graph, int64_t opset, std::vector<std::string>& problems) {
  check_constant_inputs(node, graph, problems, {{1, "weight"}, {2, "bias"}});
  check_spatial_rank(node, graph, problems);
}

// A constant float32 weight or bias with the expected shape.
const HostTensor& conv_parameter(const Node& node, const Graph& graph, size_t i, const char* what) {
  const HostTensor& param = require_constant_input(node, graph, i, what);
  CNNRT_CHECK(param.dtype() == DType::Float32, ErrorCode::Unsupported, "{} '{}' has type {}, expected float32", what,
              input_value(node, graph, i).name, dtype_name(param.dtype()));
  return param;
}

void infer_conv(Node& node, Graph& graph, int64_t opset) {
  require_float_input(node, graph, 0);
  const Shape& x = input_shape(node, graph, 0);
  const Shape spatial = spatial_extents(node, x);
  const Shape& w = conv_parameter(node, graph, 1, "weight").shape();
  CNNRT_CHECK(w.size() == x.size(), ErrorCode::InvalidModel, "weight {} and input {} differ in rank", shape_str(w),
              shape_str(x));
  const int64_t group = node.attrs.get_int("group", 1);
  const int64_t in_channels = x[1];
  const int64_t out_channels = w[0];
  CNNRT_CHECK(group >= 1, ErrorCode::InvalidModel, "group {} must be positive", group);
  CNNRT_CHECK(in_channels % group == 0 && in_channels / group == w[1], ErrorCode::InvalidModel,
              "weight {} takes {} input channels per group ({} groups) but input {} has {} channels", shape_str(w),
              w[1], group, shape_str(x), in_channels);
  CNNRT_CHECK(out_channels % group == 0, ErrorCode::InvalidModel, "{} output channels (weight {}) do not split into "
              "{} groups", out_channels, shape_str(w), group);
  if (node.has_input(2)) {
    const Shape& b = conv_parameter(node, graph, 2, "bias").shape();
    CNNRT_CHECK(b == Shape{out_channels}, ErrorCode::InvalidModel, "bias {} does not match the {} output channels "
                "of weight {}", shape_str(b), out_channels, shape_str(w));
  }
  const Shape kernel(w.begin() + 2, w.end());
  if (node.attrs.has("kernel_shape")) {
    const std::vector<int64_t> declared = node.attrs.get_ints("kernel_shape");
    CNNRT_CHECK(declared == kernel, ErrorCode::InvalidModel, "kernel_shape [{}] does not match weight {}",
                fmt::join(declared, ", "), shape_str(w));
  }
  const std::vector<WindowAxis> axes = bounded_window(node, spatial, kernel, false);
  Shape out{x[0], out_channels};
  for (int64_t extent : write_window_attrs(node, axes)) out.push_back(extent);
  node.attrs.set("group", group);
  set_output(node, graph, 0, DType::Float32, std::move(out));
}

// ---- ConvTranspose -----------------------------------------------------------------------------------

void check_conv_transpose(const Node& node, const Graph& graph, int64_t opset, std::vector<std::string>& problems) {
  check_input_dtypes(node, graph, problems);
  check_spatial_rank(node, graph, problems);
}

void infer_conv_transpose(Node& node, Graph& graph, int64_t opset) {
  require_float_input(node, graph, 0);
  require_float_input(node, graph, 1);
  const Shape& x = input_shape(node, graph, 0);
  const Shape spatial = spatial_extents(node, x);
  const Shape& w = input_shape(node, graph, 1);
  CNNRT_CHECK(w.size() == x.size(), ErrorCode::InvalidModel, "weight {} and input {} differ in rank", shape_str(w),
              shape_str(x));
  const int64_t group = node.attrs.get_int("group", 1);
  CNNRT_CHECK(group >= 1, ErrorCode::InvalidModel, "group {} must be positive", group);
  const int64_t in_channels = x[1];
  CNNRT_CHECK(w[0] == in_channels, ErrorCode::InvalidModel,
              "weight {} is for {} input channels but input {} has {} (ConvTranspose weights are "
              "[C, M/group, k...])", shape_str(w), w[0], shape_str(x), in_channels);
  CNNRT_CHECK(in_channels % group == 0, ErrorCode::InvalidModel, "{} input channels do not split into {} groups",
              in_channels, group);
  const int64_t out_channels = w[1] * group;
  if (node.has_input(2)) {
    require_float_input(node, graph, 2);
    const Shape& b = input_shape(node, graph, 2);
    CNNRT_CHECK(b == Shape{out_channels}, ErrorCode::InvalidModel, "bias {} does not match the {} output channels "
                "of weight {} with {} groups", shape_str(b), out_channels, shape_str(w), group);
  }
  const Shape kernel(w.begin() + 2, w.end());
  if (node.attrs.has("kernel_shape")) {
    const std::vector<int64_t> declared = node.attrs.get_ints("kernel_shape");
    CNNRT_CHECK(declared == kernel, ErrorCode::InvalidModel, "kernel_shape [{}] does not match weight {}",
                fmt::join(declared, ", "), shape_str(w));
  }
  check_window_bounds(node, spatial);
  const std::vector<WindowAxis> axes = resolve_transposed_window(node.attrs, spatial, kernel);
  Shape out{x[0], out_channels};
  for (int64_t extent : write_window_attrs(node, axes)) out.push_back(extent);
  node.attrs.erase("output_padding");
  node.attrs.erase("output_shape");
  node.attrs.set("group", group);
  set_output(node, graph, 0, DType::Float32, std::move(out));
}

// ---- InstanceNormalization ---------------------------------------------------------------------------

void infer_instance_norm(Node& node, Graph& graph, int64_t opset) {
  for (size_t i = 0; i < 3; ++i) require_float_input(node, graph, i);
  const Shape& x = input_shape(node, graph, 0);
  CNNRT_CHECK(x.size() >= 3, ErrorCode::InvalidModel, "input {} has no spatial axes (expected N x C x ...)",
              shape_str(x));
  for (size_t i = 1; i < 3; ++i) {
    const Shape& param = input_shape(node, graph, i);
    CNNRT_CHECK(param == Shape{x[1]}, ErrorCode::InvalidModel, "{} {} does not match the {} channels of input {}",
                i == 1 ? "scale" : "bias", shape_str(param), x[1], shape_str(x));
  }
  node.attrs.set("epsilon", node.attrs.get_float("epsilon", 1e-5f));
  node.attrs.erase("consumed_inputs");  // opset 1's legacy bookkeeping, meaningless at inference
  set_output(node, graph, 0, DType::Float32, x);
}

// ---- MaxPool / AveragePool ---------------------------------------------------------------------------

bool has_dilation(const Node& node) {
  for (int64_t dilation : node.attrs.get_ints("dilations")) {
    if (dilation != 1) return true;
  }
  return false;
}

void check_pool(const Node& node, const Graph& graph, int64_t opset, std::vector<std::string>& problems) {
  check_input_dtypes(node, graph, problems);
  check_spatial_rank(node, graph, problems);
  if (node.op == "MaxPool") {
    if (node.attrs.get_int("storage_order", 0) != 0) {
      problems.push_back("storage_order=1 is not supported (only the Indices output uses it; row-major only)");
    }
    check_output_unused(node, graph, 1, "Indices", problems);
  } else if (has_dilation(node)) {
    problems.push_back("AveragePool with dilations other than 1 is not supported");
  }
}

void infer_pool(Node& node, Graph& graph, int64_t opset) {
  require_float_input(node, graph, 0);
  const bool is_max = node.op == "MaxPool";
  const Shape& x = input_shape(node, graph, 0);
  const Shape spatial = spatial_extents(node, x);
  CNNRT_CHECK(node.attrs.has("kernel_shape"), ErrorCode::InvalidModel, "attribute 'kernel_shape' is missing");
  if (is_max) {
    keep_outputs(node, graph, 1, "Indices");
    node.attrs.erase("storage_order");  // only describes the Indices output
  } else {
    CNNRT_CHECK(!has_dilation(node), ErrorCode::Unsupported, "AveragePool with dilations other than 1 is not supported");
  }
  const std::vector<WindowAxis> axes = bounded_window(node, spatial, {}, true);
  // resolve_window ignores ceil_mode under auto_pad; the explicit pads it returns need floor rounding.
  const bool explicit_pads = parse_auto_pad(node.attrs.get_string("auto_pad", "NOTSET")) == AutoPad::NotSet;
  const int64_t ceil_mode = explicit_pads && node.attrs.get_int("ceil_mode", 0) != 0 ? 1 : 0;
  Shape out{x[0], x[1]};
  for (int64_t extent : write_window_attrs(node, axes)) out.push_back(extent);
  node.attrs.set("ceil_mode", ceil_mode);
  if (!is_max) {
    node.attrs.erase("dilations");
    node.attrs.set("count_include_pad", node.attrs.get_int("count_include_pad", 0) != 0 ? int64_t{1} : int64_t{0});
  }
  set_output(node, graph, 0, DType::Float32, std::move(out));
}

void infer_global_pool(Node& node, Graph& graph, int64_t opset) {
  require_float_input(node, graph, 0);
  const Shape& x = input_shape(node, graph, 0);
  CNNRT_CHECK(x.size() >= 3, ErrorCode::InvalidModel, "input {} has no spatial axes (expected N x C x ...)",
              shape_str(x));
  Shape out(x.size(), 1);
  out[0] = x[0];
  out[1] = x[1];
  set_output(node, graph, 0, DType::Float32, std::move(out));
}

// ---- Reduce* -----------------------------------------------------------------------------------------

void check_reduce(const Node& node, const Graph& graph, int64_t opset, std::vector<std::string>& problems) {
  check_constant_inputs(node, graph, problems, {{1, "axes"}});
}

void infer_reduce(Node& node, Graph& graph, int64_t opset) {
  require_float_input(node, graph, 0);
  const Shape& x = input_shape(node, graph, 0);
  const int64_t rank = static_cast<int64_t>(x.size());
  const bool keepdims = node.attrs.get_int("keepdims", 1) != 0;
  const bool noop_with_empty_axes = node.attrs.get_int("noop_with_empty_axes", 0) != 0;
  // ReduceSum has the axes input from opset 13, the others from 18; earlier, an attribute.
  const std::vector<int64_t> given = ints_from_input_or_attr(node, graph, 1, "axes", "axes").value_or(
      std::vector<int64_t>{});
  std::vector<int64_t> axes;
  if (!given.empty()) {
    axes = normalize_axes(given, rank, "reduce axis");
  } else if (!noop_with_empty_axes) {
    for (int64_t axis = 0; axis < rank; ++axis) axes.push_back(axis);
  }
  Shape out;
  size_t next = 0;
  for (int64_t axis = 0; axis < rank; ++axis) {
    const bool reduced = next < axes.size() && axes[next] == axis;
    if (reduced) ++next;
    if (!reduced) {
      out.push_back(x[axis]);
    } else if (keepdims) {
      out.push_back(1);
    }
  }
  keep_inputs(node, 1);
  node.attrs.set("axes", axes);
  node.attrs.set("keepdims", int64_t{keepdims ? 1 : 0});
  node.attrs.set("noop_with_empty_axes", int64_t{axes.empty() ? 1 : 0});
  set_output(node, graph, 0, DType::Float32, std::move(out));
}

// ---- Softmax / LogSoftmax ----------------------------------------------------------------------------

void infer_softmax(Node& node, Graph& graph, int64_t opset) {
  require_float_input(node, graph, 0);
  const Shape& x = input_shape(node, graph, 0);
  // Before opset 13 the input is coerced to 2-D at `axis` (default 1); from 13 on, one axis (default -1).
  // A node that is already canonical carries coerce_2d and keeps its meaning.
  const bool legacy = opset < 13;
  const int64_t coerce_2d = node.attrs.get_int("coerce_2d", legacy ? 1 : 0) != 0 ? 1 : 0;
  const int64_t axis = normalize_axis(node.attrs.get_int("axis", legacy ? 1 : -1), static_cast<int64_t>(x.size()),
                                      "axis");
  node.attrs.set("axis", axis);
  node.attrs.set("coerce_2d", coerce_2d);
  set_output(node, graph, 0, DType::Float32, x);
}

}  // namespace

void add_window_ops(std::vector<OpInfo>& table) {
  // name, inputs min..max, outputs min..max, check, infer
  table.push_back({"Conv", 2, 3, 1, 1, check_conv, infer_conv});
  table.push_back({"ConvTranspose", 2, 3, 1, 1, check_conv_transpose, infer_conv_transpose});
  table.push_back({"InstanceNormalization", 3, 3, 1, 1, check_dtypes_only, infer_instance_norm});
  table.push_back({"MaxPool", 1, 1, 1, 2, check_pool, infer_pool});
  table.push_back({"AveragePool", 1, 1, 1, 1, check_pool, infer_pool});
  table.push_back({"GlobalAveragePool", 1, 1, 1, 1, check_dtypes_only, infer_global_pool});
  table.push_back({"GlobalMaxPool", 1, 1, 1, 1, check_dtypes_only, infer_global_pool});
  for (const char* op : {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"}) {
    table.push_back({op, 1, 2, 1, 1, check_reduce, infer_reduce});
  }
  table.push_back({"Softmax", 1, 1, 1, 1, check_dtypes_only, infer_softmax});
  table.push_back({"LogSoftmax", 1, 1, 1, 1, check_dtypes_only, infer_softmax});
}

}  // namespace cnnrt::ir
