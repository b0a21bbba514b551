// Matrix products and data movement.
//
// Canonical forms (inputs list data inputs only):
//   Gemm       alpha, beta, transA, transB; inputs A, B, optional C (broadcast unidirectionally to [M, N])
//   MatMul     -   numpy matmul: 1-D operands promoted, batch dims broadcast
//   Transpose  perm (explicit)
//   Concat     axis (>= 0)
//   Slice      starts, steps: one per axis of the input, clamped to the input; the output shape gives the
//              counts (element i of an axis is input index starts[axis] + i * steps[axis])
//   Gather     axis (>= 0); indices (input 1) constant int64, kept as an input, negative indices allowed
//   Pad        pads (2 * rank, >= 0: begins then ends), mode (constant, edge, reflect), value (float)
//   Split      axis (>= 0), split (the size of each output along axis, one per output, summing to the extent)
//   Expand     -   the output shape is the value's shape
//   DepthToSpace   blocksize, mode ("DCR" or "CRD", explicit); input [N, C, H, W] with C a multiple of blocksize^2
//   SpaceToDepth   blocksize; input [N, C, H, W] with H and W multiples of blocksize
//                  (both rearrangements are spelled out in ir/depth_space.hpp)
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

#include "core/error.hpp"
#include "ir/ops_util.hpp"
#include "ir/window.hpp"

namespace cnnrt::ir {
namespace {

// ---- Gemm / MatMul -----------------------------------------------------------------------------------

void infer_gemm(Node& node, Graph& graph, int64_t opset) {
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    if (node.has_input(i)) require_float_input(node, graph, i);
  }
  const Shape& a = input_shape(node, graph, 0);
  const Shape& b = input_shape(node, graph, 1);
  CNNRT_CHECK(a.size() == 2 && b.size() == 2, ErrorCode::InvalidModel, "Gemm takes 2-D matrices, not A {} and B {}",
              shape_str(a), shape_str(b));
  const int64_t trans_a = node.attrs.get_int("transA", 0) != 0 ? 1 : 0;
  const int64_t trans_b = node.attrs.get_int("transB", 0) != 0 ? 1 : 0;
  const int64_t m = trans_a ? a[1] : a[0];
  const int64_t k = trans_a ? a[0] : a[1];
  const int64_t k_of_b = trans_b ? b[1] : b[0];
  const int64_t n = trans_b ? b[0] : b[1];
  CNNRT_CHECK(k == k_of_b, ErrorCode::InvalidModel, "A {} (transA={}) and B {} (transB={}) disagree on K ({} vs {})",
              shape_str(a), trans_a, shape_str(b), trans_b, k, k_of_b);
  const Shape out{m, n};
  if (node.has_input(2)) {
    const Shape& c = input_shape(node, graph, 2);
    CNNRT_CHECK(broadcast_shapes(c, out) == out, ErrorCode::InvalidModel, "C {} does not broadcast to the output {}",
                shape_str(c), shape_str(out));
  }
  node.attrs.set("alpha", node.attrs.get_float("alpha", 1.0f));
  node.attrs.set("beta", node.attrs.get_float("beta", 1.0f));
  node.attrs.set("transA", trans_a);
  node.attrs.set("transB", trans_b);
  node.attrs.erase("broadcast");  // opset < 7; C broadcasts in every opset we read
  set_output(node, graph, 0, DType::Float32, out);
}

void infer_matmul(Node& node, Graph& graph, int64_t opset) {
  require_float_input(node, graph, 0);
  require_float_input(node, graph, 1);
  const Shape& a = input_shape(node, graph, 0);
  const Shape& b = input_shape(node, graph, 1);
  CNNRT_CHECK(!a.empty() && !b.empty(), ErrorCode::InvalidModel, "MatMul does not take scalars (A {}, B {})",
              shape_str(a), shape_str(b));
  // numpy: a 1-D A is a row [1, K], a 1-D B a column [K, 1]; the added dim is removed from the result.
  const Shape a2 = a.size() == 1 ? Shape{1, a[0]} : a;
  const Shape b2 = b.size() == 1 ? Shape{b[0], 1} : b;
  const int64_t k = a2[a2.size() - 1];
  const int64_t k_of_b = b2[b2.size() - 2];
  CNNRT_CHECK(k == k_of_b, ErrorCode::InvalidModel, "A {} and B {} disagree on K ({} vs {})", shape_str(a),
              shape_str(b), k, k_of_b);
  Shape out = broadcast_shapes(Shape(a2.begin(), a2.end() - 2), Shape(b2.begin(), b2.end() - 2));
  if (a.size() > 1) out.push_back(a2[a2.size() - 2]);
  if (b.size() > 1) out.push_back(b2[b2.size() - 1]);
  set_output(node, graph, 0, DType::Float32, std::move(out));
}

// ---- Transpose / Concat ------------------------------------------------------------------------------

void infer_transpose(Node& node, Graph& graph, int64_t opset) {
  const DType dtype = common_numeric_dtype(node, graph);
  const Shape& x = input_shape(node, graph, 0);
  const int64_t rank = static_cast<int64_t>(x.size());
  std::vector<int64_t> perm(x.size());
  for (int64_t i = 0; i < rank; ++i) perm[i] = rank - 1 - i;  // the default reverses the axes
  perm = node.attrs.get_ints("perm", perm);
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  bool is_permutation = static_cast<int64_t>(perm.size()) == rank;
  for (int64_t i = 0; is_permutation && i < rank; ++i) is_permutation = sorted[i] == i;
  CNNRT_CHECK(is_permutation, ErrorCode::InvalidModel, "perm [{}] is not a permutation of the {} axes of {}",
              fmt::join(perm, ", "), rank, shape_str(x));
  Shape out;
  for (int64_t axis : perm) out.push_back(x[axis]);
  node.attrs.set("perm", perm);
  set_output(node, graph, 0, dtype, std::move(out));
}

// ---- DepthToSpace / SpaceToDepth --------------------------------------------------------------------

void check_depth_space(const Node& node, const Graph& graph, int64_t opset, std::vector<std::string>& problems) {
  check_input_dtypes(node, graph, problems);
  const std::string mode = node.attrs.get_string("mode", "DCR");
  if (node.op == "DepthToSpace" && mode != "DCR" && mode != "CRD") {
    problems.push_back(fmt::format("mode '{}' is not one of DCR, CRD", mode));
  }
}

void infer_depth_space(Node& node, Graph& graph, int64_t opset) {
  const DType dtype = common_numeric_dtype(node, graph);
  const Shape& x = input_shape(node, graph, 0);
  CNNRT_CHECK(x.size() == 4, ErrorCode::InvalidModel, "input {} is not N x C x H x W", shape_str(x));
  CNNRT_CHECK(node.attrs.has("blocksize"), ErrorCode::InvalidModel, "attribute 'blocksize' is missing");
  const int64_t b = node.attrs.get_int("blocksize", 0);
  // 2^15 squared still fits any later product with an extent bounded by the tensor size.
  CNNRT_CHECK(b >= 1 && b <= (int64_t{1} << 15), ErrorCode::InvalidModel, "blocksize {} is not in [1, 32768]", b);
  Shape out;
  if (node.op == "DepthToSpace") {
    CNNRT_CHECK(x[1] % (b * b) == 0, ErrorCode::InvalidModel,
                "{} channels of input {} are not a multiple of blocksize^2 = {}", x[1], shape_str(x), b * b);
    CNNRT_CHECK(x[2] <= INT64_MAX / b && x[3] <= INT64_MAX / b, ErrorCode::InvalidModel,
                "input {} times blocksize {} overflows int64", shape_str(x), b);
    out = {x[0], x[1] / (b * b), x[2] * b, x[3] * b};
    const std::string mode = node.attrs.get_string("mode", "DCR");
    CNNRT_CHECK(mode == "DCR" || mode == "CRD", ErrorCode::InvalidModel, "mode '{}' is not one of DCR, CRD", mode);
    node.attrs.set("mode", mode);
  } else {
    CNNRT_CHECK(x[2] % b == 0 && x[3] % b == 0, ErrorCode::InvalidModel,
                "height and width of input {} are not multiples of blocksize {}", shape_str(x), b);
    CNNRT_CHECK(x[1] <= INT64_MAX / (b * b), ErrorCode::InvalidModel, "input {} times blocksize^2 = {} overflows int64",
                shape_str(x), b * b);
    out = {x[0], x[1] * b * b, x[2] / b, x[3] / b};
  }
  node.attrs.set("blocksize", b);
  set_output(node, graph, 0, dtype, std::move(out));
}

void infer_concat(Node& node, Graph& graph, int64_t opset) {
  const DType dtype = common_numeric_dtype(node, graph);
  CNNRT_CHECK(node.attrs.has("axis"), ErrorCode::InvalidModel, "attribute 'axis' is missing");
  const Shape& first = input_shape(node, graph, 0);
  const int64_t axis = normalize_axis(node.attrs.get_int("axis", 0), static_cast<int64_t>(first.size()), "axis");
  Shape out = first;
  out[axis] = 0;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const Shape& shape = input_shape(node, graph, i);
    bool compatible = shape.size() == first.size();
    for (size_t d = 0; compatible && d < shape.size(); ++d) {
      compatible = static_cast<int64_t>(d) == axis || shape[d] == first[d];
    }
    CNNRT_CHECK(compatible, ErrorCode::InvalidModel, "inputs {} and {} differ outside the concat axis {}",
                shape_str(first), shape_str(shape), axis);
    out[axis] = add_dims(out[axis], shape[axis]);
  }
  numel(out);  // rejects a total that overflows
  node.attrs.set("axis", axis);
  set_output(node, graph, 0, dtype, std::move(out));
}

// ---- Slice -------------------------------------------------------------------------------------------

struct SliceAxis {
  int64_t start = 0;
  int64_t step = 1;
  int64_t count = 0;
};

// ONNX Slice on one axis of extent `dim`: negative start/end count from the end, then both are clamped
// (to [0, dim] going forward, [0, dim - 1] and [-1, dim - 1] going backward).
SliceAxis slice_axis(int64_t dim, int64_t start, int64_t end, int64_t step) {
  SliceAxis axis;
  if (dim == 0) return axis;
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  // A step of at least dim takes one element at most: clamping it keeps the result and avoids overflow.
  step = std::max(-dim, std::min(dim, step));
  if (step > 0) {
    start = std::max<int64_t>(0, std::min(dim, start));
    end = std::max<int64_t>(0, std::min(dim, end));
    axis.count = end > start ? (end - start - 1) / step + 1 : 0;
  } else {
    start = std::max<int64_t>(0, std::min(dim - 1, start));
    end = std::max<int64_t>(-1, std::min(dim - 1, end));
    axis.count = start > end ? (start - end - 1) / -step + 1 : 0;
  }
  axis.start = axis.count > 0 ? start : 0;
  axis.step = step;
  return axis;
}

void check_slice(const Node& node, const Graph& graph, int64_t opset, std::vector<std::string>& problems) {
  check_constant_inputs(node, graph, problems, {{1, "starts"}, {2, "ends"}, {3, "axes"}, {4, "steps"}});
}

void infer_slice(Node& node, Graph& graph, int64_t opset) {
  const DType dtype = numeric_input(node, graph, 0).dtype;
  const Shape& x = input_shape(node, graph, 0);
  const int64_t rank = static_cast<int64_t>(x.size());
  // Opset < 10: starts/ends/axes attributes; later, inputs 1..4.
  const auto starts = ints_from_input_or_attr(node, graph, 1, "starts", "starts");
  const auto ends = ints_from_input_or_attr(node, graph, 2, "ends", "ends");
  CNNRT_CHECK(starts && ends, ErrorCode::InvalidModel, "starts and ends are required");
  const size_t count = starts->size();
  std::vector<int64_t> axes(count);
  for (size_t j = 0; j < count; ++j) axes[j] = static_cast<int64_t>(j);
  axes = ints_from_input_or_attr(node, graph, 3, "axes", "axes").value_or(axes);
  const std::vector<int64_t> steps =
      ints_from_input_or_attr(node, graph, 4, "steps", "steps").value_or(std::vector<int64_t>(count, 1));
  CNNRT_CHECK(ends->size() == count && axes.size() == count && steps.size() == count, ErrorCode::InvalidModel,
              "starts, ends, axes and steps have different lengths ({}, {}, {}, {})", count, ends->size(),
              axes.size(), steps.size());
  normalize_axes(axes, rank, "slice axis");  // range and repeats; the order below follows `axes`
  std::vector<int64_t> full_starts(x.size(), 0);
  std::vector<int64_t> full_steps(x.size(), 1);
  Shape out = x;
  for (size_t j = 0; j < count; ++j) {
    const int64_t axis = normalize_axis(axes[j], rank, "slice axis");
    CNNRT_CHECK(steps[j] != 0, ErrorCode::InvalidModel, "step 0 on axis {}", axis);
    const SliceAxis sliced = slice_axis(x[axis], (*starts)[j], (*ends)[j], steps[j]);
    full_starts[axis] = sliced.start;
    full_steps[axis] = sliced.step;
    out[axis] = sliced.count;
  }
  keep_inputs(node, 1);
  node.attrs.set("starts", full_starts);
  node.attrs.set("steps", full_steps);
  node.attrs.erase("ends");
  node.attrs.erase("axes");
  set_output(node, graph, 0, dtype, std::move(out));
}

// ---- Gather ------------------------------------------------------------------------------------------

void check_gather(const Node& node, const Graph& graph, int64_t opset, std::vector<std::string>& problems) {
  check_constant_inputs(node, graph, problems, {{1, "indices"}});
}

void infer_gather(Node& node, Graph& graph, int64_t opset) {
  const Value& data = numeric_input(node, graph, 0);
  const Shape& x = *data.shape;
  const int64_t axis = normalize_axis(node.attrs.get_int("axis", 0), static_cast<int64_t>(x.size()), "axis");
  const HostTensor& indices = require_constant_input(node, graph, 1, "indices");
  const std::string& indices_name = input_value(node, graph, 1).name;
  CNNRT_CHECK(indices.dtype() == DType::Int64, ErrorCode::InvalidModel, "indices '{}' have type {}, expected int64",
              indices_name, dtype_name(indices.dtype()));
  const int64_t extent = x[axis];
  for (int64_t i = 0; i < indices.numel(); ++i) {
    const int64_t index = indices.i64()[i];
    CNNRT_CHECK(index >= -extent && index < extent, ErrorCode::InvalidModel,
                "index {} in '{}' is out of range for axis {} of size {} (data {})", index, indices_name, axis, extent,
                shape_str(x));
  }
  Shape out(x.begin(), x.begin() + axis);
  out.insert(out.end(), indices.shape().begin(), indices.shape().end());
  out.insert(out.end(), x.begin() + axis + 1, x.end());
  node.attrs.set("axis", axis);
  set_output(node, graph, 0, data.dtype, std::move(out));
}

// ---- Pad ---------------------------------------------------------------------------------------------

bool pad_mode_supported(const std::string& mode) { return mode == "constant" || mode == "edge" || mode == "reflect"; }

void check_pad(const Node& node, const Graph& graph, int64_t opset, std::vector<std::string>& problems) {
  check_constant_inputs(node, graph, problems, {{1, "pads"}, {2, "constant value"}, {3, "axes"}});
  const std::string mode = node.attrs.get_string("mode", "constant");
  if (!pad_mode_supported(mode)) {
    problems.push_back(fmt::format("mode '{}' is not supported (constant, edge, reflect are)", mode));
  }
}

void infer_pad(Node& node, Graph& graph, int64_t opset) {
  const Value& data = numeric_input(node, graph, 0);
  const Shape& x = *data.shape;
  const int64_t rank = static_cast<int64_t>(x.size());
  const std::string mode = node.attrs.get_string("mode", "constant");
  CNNRT_CHECK(pad_mode_supported(mode), ErrorCode::Unsupported,
              "mode '{}' is not supported (constant, edge, reflect are)", mode);
  // Opset < 11: pads and value attributes; from 11, inputs; from 18 an optional axes input.
  const auto given = ints_from_input_or_attr(node, graph, 1, "pads", "pads");
  CNNRT_CHECK(given.has_value(), ErrorCode::InvalidModel, "the pads are missing");
  const float value = float_from_input(node, graph, 2, "constant value").value_or(node.attrs.get_float("value", 0));
  std::vector<int64_t> axes(x.size());
  for (int64_t i = 0; i < rank; ++i) axes[i] = i;
  if (node.has_input(3)) axes = *ints_from_input_or_attr(node, graph, 3, "axes", "axes");
  const size_t padded = axes.size();
  CNNRT_CHECK(given->size() == 2 * padded, ErrorCode::InvalidModel, "pads has {} entries for {} axes (expected {})",
              given->size(), padded, 2 * padded);
  normalize_axes(axes, rank, "pad axis");  // range and repeats
  std::vector<int64_t> pads(2 * x.size(), 0);
  for (size_t j = 0; j < padded; ++j) {
    const int64_t axis = normalize_axis(axes[j], rank, "pad axis");
    pads[axis] = (*given)[j];
    pads[axis + rank] = (*given)[j + padded];
  }
  Shape out = x;
  for (int64_t axis = 0; axis < rank; ++axis) {
    const int64_t begin = pads[axis];
    const int64_t end = pads[axis + rank];
    CNNRT_CHECK(begin >= 0 && end >= 0, ErrorCode::Unsupported,
                "negative pads ({}, {}) on axis {} (cropping) are not supported", begin, end, axis);
    if (mode != "constant" && (begin > 0 || end > 0)) {
      CNNRT_CHECK(x[axis] > 0, ErrorCode::InvalidModel, "cannot pad the empty axis {} of {} in {} mode", axis,
                  shape_str(x), mode);
    }
    out[axis] = add_dims(add_dims(x[axis], begin), end);
  }
  numel(out);  // rejects a total that overflows
  keep_inputs(node, 1);
  node.attrs.set("pads", pads);
  node.attrs.set("mode", mode);
  node.attrs.set("value", value);
  set_output(node, graph, 0, data.dtype, std::move(out));
}

// ---- Split -------------------------------------------------------------------------------------------

constexpr int kMaxSplitOutputs = 1 << 16;

void check_split(const Node& node, const Graph& graph, int64_t opset, std::vector<std::string>& problems) {
  check_constant_inputs(node, graph, problems, {{1, "split input"}});
}

// The size of each output along the split axis of extent `extent`. The sizes come from the split input
// (opset >= 13) or attribute (< 13); without them the extent is divided among the outputs: evenly before
// opset 18, and from 18 (num_outputs) in chunks of ceil(extent / n) with a smaller last chunk.
std::vector<int64_t> split_sizes(const Node& node, const Graph& graph, int64_t opset, int64_t extent) {
  const int64_t outputs = static_cast<int64_t>(node.outputs.size());
  const auto given = ints_from_input_or_attr(node, graph, 1, "split", "split input");
  if (given.has_value()) {
    CNNRT_CHECK(!node.attrs.has("num_outputs"), ErrorCode::InvalidModel,
                "both the split sizes and num_outputs are given (ONNX allows one)");
    CNNRT_CHECK(static_cast<int64_t>(given->size()) == outputs, ErrorCode::InvalidModel,
                "{} split sizes [{}] for {} outputs", given->size(), fmt::join(*given, ", "), outputs);
    int64_t total = 0;
    for (int64_t size : *given) {
      CNNRT_CHECK(size >= 0, ErrorCode::InvalidModel, "split sizes [{}] have a negative size", fmt::join(*given, ", "));
      total = add_dims(total, size);
    }
    CNNRT_CHECK(total == extent, ErrorCode::InvalidModel, "split sizes [{}] sum to {}, but the axis has {}",
                fmt::join(*given, ", "), total, extent);
    return *given;
  }
  const int64_t parts = node.attrs.get_int("num_outputs", outputs);
  CNNRT_CHECK(parts == outputs, ErrorCode::InvalidModel, "num_outputs is {} but the node has {} outputs", parts,
              outputs);
  if (opset < 18 || extent % parts == 0) {
    CNNRT_CHECK(extent % parts == 0, ErrorCode::InvalidModel,
                "an axis of {} does not split evenly into {} outputs (give the split sizes)", extent, parts);
    return std::vector<int64_t>(static_cast<size_t>(parts), extent / parts);
  }
  const int64_t chunk = (extent + parts - 1) / parts;  // ceil: every output but the last
  const int64_t last = extent - chunk * (parts - 1);
  CNNRT_CHECK(last >= 0, ErrorCode::InvalidModel, "an axis of {} cannot be split into {} chunks of {} (num_outputs)",
              extent, parts, chunk);
  std::vector<int64_t> sizes(static_cast<size_t>(parts), chunk);
  sizes.back() = last;
  return sizes;
}

void infer_split(Node& node, Graph& graph, int64_t opset) {
  const Value& data = numeric_input(node, graph, 0);
  const Shape x = *data.shape;  // a copy: set_output below writes into graph.values
  const DType dtype = data.dtype;
  const int64_t axis = normalize_axis(node.attrs.get_int("axis", 0), static_cast<int64_t>(x.size()), "axis");
  const std::vector<int64_t> sizes = split_sizes(node, graph, opset, x[axis]);
  keep_inputs(node, 1);
  node.attrs.erase("num_outputs");
  node.attrs.set("axis", axis);
  node.attrs.set("split", sizes);
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    Shape out = x;
    out[axis] = sizes[i];
    set_output(node, graph, i, dtype, std::move(out));
  }
}

// ---- Expand ------------------------------------------------------------------------------------------

void check_expand(const Node& node, const Graph& graph, int64_t opset, std::vector<std::string>& problems) {
  check_constant_inputs(node, graph, problems, {{1, "target shape"}});
}

void infer_expand(Node& node, Graph& graph, int64_t opset) {
  const Value& data = numeric_input(node, graph, 0);
  const auto target = ints_from_input_or_attr(node, graph, 1, "shape", "target shape");
  CNNRT_CHECK(target.has_value(), ErrorCode::InvalidModel, "the target shape is missing (input 1)");
  numel(*target);  // rejects negative dims
  // Expand broadcasts both ways: a 1 in the target keeps the input's dim.
  Shape out = broadcast_shapes(*data.shape, *target);
  numel(out);
  keep_inputs(node, 1);
  set_output(node, graph, 0, data.dtype, std::move(out));
}

}  // namespace

void add_matrix_ops(std::vector<OpInfo>& table) {
  // name, inputs min..max, outputs min..max, check, infer
  table.push_back({"Gemm", 2, 3, 1, 1, check_dtypes_only, infer_gemm});
  table.push_back({"MatMul", 2, 2, 1, 1, check_dtypes_only, infer_matmul});
  table.push_back({"Transpose", 1, 1, 1, 1, check_dtypes_only, infer_transpose});
  table.push_back({"DepthToSpace", 1, 1, 1, 1, check_depth_space, infer_depth_space});
  table.push_back({"SpaceToDepth", 1, 1, 1, 1, check_depth_space, infer_depth_space});
  table.push_back({"Concat", 1, -1, 1, 1, check_dtypes_only, infer_concat});
  table.push_back({"Slice", 1, 5, 1, 1, check_slice, infer_slice});
  table.push_back({"Gather", 2, 2, 1, 1, check_gather, infer_gather});
  table.push_back({"Pad", 1, 4, 1, 1, check_pad, infer_pad});
  table.push_back({"Split", 1, 2, 1, kMaxSplitOutputs, check_split, infer_split});
  table.push_back({"Expand", 2, 2, 1, 1, check_expand, infer_expand});
}

}  // namespace cnnrt::ir
