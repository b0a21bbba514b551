#include "ir/window.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace cnnrt::ir {

AutoPad parse_auto_pad(const std::string& text) {
  if (text.empty() || text == "NOTSET") return AutoPad::NotSet;
  if (text == "SAME_UPPER") return AutoPad::SameUpper;
  if (text == "SAME_LOWER") return AutoPad::SameLower;
  if (text == "VALID") return AutoPad::Valid;
  fail(ErrorCode::InvalidModel, "auto_pad '{}' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID", text);
}

int64_t window_output_size(int64_t input, int64_t kernel, int64_t stride, int64_t dilation, int64_t pad_begin,
                           int64_t pad_end, bool ceil_mode) {
  const int64_t span = input + pad_begin + pad_end - ((kernel - 1) * dilation + 1);
  if (span < 0) return 0;
  int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  // With ceil_mode the last window must start inside the input or the begin padding.
  if (ceil_mode && (out - 1) * stride >= input + pad_begin) --out;
  return out;
}

std::vector<WindowAxis> resolve_window(const Attributes& attrs, const std::vector<int64_t>& input,
                                       const std::vector<int64_t>& kernel, bool allow_ceil_mode) {
  const size_t rank = input.size();
  std::vector<int64_t> kernel_shape = attrs.get_ints("kernel_shape", kernel);
  CNNRT_CHECK(kernel_shape.size() == rank, ErrorCode::InvalidModel,
              "kernel_shape has {} entries for {} spatial dimensions", kernel_shape.size(), rank);
  const std::vector<int64_t> ones(rank, 1);
  const std::vector<int64_t> strides = attrs.get_ints("strides", ones);
  const std::vector<int64_t> dilations = attrs.get_ints("dilations", ones);
  const std::vector<int64_t> pads = attrs.get_ints("pads", std::vector<int64_t>(2 * rank, 0));
  CNNRT_CHECK(strides.size() == rank, ErrorCode::InvalidModel, "strides has {} entries for {} spatial dims",
              strides.size(), rank);
  CNNRT_CHECK(dilations.size() == rank, ErrorCode::InvalidModel, "dilations has {} entries for {} spatial dims",
              dilations.size(), rank);
  CNNRT_CHECK(pads.size() == 2 * rank, ErrorCode::InvalidModel, "pads has {} entries, expected {}", pads.size(),
              2 * rank);
  const AutoPad auto_pad = parse_auto_pad(attrs.get_string("auto_pad", "NOTSET"));
  const bool ceil_mode = allow_ceil_mode && attrs.get_int("ceil_mode", 0) != 0;

  std::vector<WindowAxis> axes(rank);
  for (size_t i = 0; i < rank; ++i) {
    WindowAxis& a = axes[i];
    a.input = input[i];
    a.kernel = kernel_shape[i];
    a.stride = strides[i];
    a.dilation = dilations[i];
    CNNRT_CHECK(a.kernel > 0, ErrorCode::InvalidModel, "kernel size {} on axis {} must be positive", a.kernel, i);
    CNNRT_CHECK(a.stride > 0, ErrorCode::InvalidModel, "stride {} on axis {} must be positive", a.stride, i);
    CNNRT_CHECK(a.dilation > 0, ErrorCode::InvalidModel, "dilation {} on axis {} must be positive", a.dilation, i);
    switch (auto_pad) {
      case AutoPad::NotSet:
        a.pad_begin = pads[i];
        a.pad_end = pads[i + rank];
        CNNRT_CHECK(a.pad_begin >= 0 && a.pad_end >= 0, ErrorCode::Unsupported,
                    "negative padding ({}, {}) on axis {} is not supported", a.pad_begin, a.pad_end, i);
        a.output = window_output_size(a.input, a.kernel, a.stride, a.dilation, a.pad_begin, a.pad_end, ceil_mode);
        break;
      case AutoPad::Valid:
        a.output = window_output_size(a.input, a.kernel, a.stride, a.dilation, 0, 0, false);
        break;
      case AutoPad::SameUpper:
      case AutoPad::SameLower: {
        a.output = (a.input + a.stride - 1) / a.stride;
        const int64_t total = std::max<int64_t>(0, (a.output - 1) * a.stride + a.dilated_kernel() - a.input);
        const int64_t small = total / 2;
        a.pad_begin = auto_pad == AutoPad::SameUpper ? small : total - small;
        a.pad_end = total - a.pad_begin;
        break;
      }
    }
    CNNRT_CHECK(a.output > 0, ErrorCode::InvalidModel,
                "window of {} (dilation {}) does not fit input extent {} with padding ({}, {}) on axis {}",
                a.kernel, a.dilation, a.input, a.pad_begin, a.pad_end, i);
  }
  return axes;
}

int64_t transposed_output_size(int64_t input, int64_t kernel, int64_t stride, int64_t dilation, int64_t pad_begin,
                               int64_t pad_end) {
  return stride * (input - 1) + (kernel - 1) * dilation + 1 - pad_begin - pad_end;
}

namespace {

// Rounds toward negative infinity (total padding may be negative when output_shape asks for more).
int64_t half_rounded_down(int64_t total) { return total >= 0 ? total / 2 : -((-total + 1) / 2); }

}  // namespace

std::vector<WindowAxis> resolve_transposed_window(const Attributes& attrs, const std::vector<int64_t>& input,
                                                  const std::vector<int64_t>& kernel) {
  const size_t rank = input.size();
  const std::vector<int64_t> kernel_shape = attrs.get_ints("kernel_shape", kernel);
  CNNRT_CHECK(kernel_shape.size() == rank, ErrorCode::InvalidModel,
              "kernel_shape has {} entries for {} spatial dimensions", kernel_shape.size(), rank);
  const std::vector<int64_t> ones(rank, 1), zeros(rank, 0);
  const std::vector<int64_t> strides = attrs.get_ints("strides", ones);
  const std::vector<int64_t> dilations = attrs.get_ints("dilations", ones);
  const std::vector<int64_t> pads = attrs.get_ints("pads", std::vector<int64_t>(2 * rank, 0));
  const std::vector<int64_t> output_padding = attrs.get_ints("output_padding", zeros);
  std::vector<int64_t> output_shape = attrs.get_ints("output_shape", {});
  CNNRT_CHECK(strides.size() == rank, ErrorCode::InvalidModel, "strides has {} entries for {} spatial dims",
              strides.size(), rank);
  CNNRT_CHECK(dilations.size() == rank, ErrorCode::InvalidModel, "dilations has {} entries for {} spatial dims",
              dilations.size(), rank);
  CNNRT_CHECK(pads.size() == 2 * rank, ErrorCode::InvalidModel, "pads has {} entries, expected {}", pads.size(),
              2 * rank);
  CNNRT_CHECK(output_padding.size() == rank, ErrorCode::InvalidModel,
              "output_padding has {} entries for {} spatial dims", output_padding.size(), rank);
  // output_shape lists the spatial extents; some exporters write N and C in front of them.
  if (output_shape.size() == rank + 2) output_shape.erase(output_shape.begin(), output_shape.begin() + 2);
  CNNRT_CHECK(output_shape.empty() || output_shape.size() == rank, ErrorCode::InvalidModel,
              "output_shape has {} entries for {} spatial dims", output_shape.size(), rank);
  const AutoPad auto_pad = parse_auto_pad(attrs.get_string("auto_pad", "NOTSET"));

  std::vector<WindowAxis> axes(rank);
  for (size_t i = 0; i < rank; ++i) {
    WindowAxis& a = axes[i];
    a.input = input[i];
    a.kernel = kernel_shape[i];
    a.stride = strides[i];
    a.dilation = dilations[i];
    CNNRT_CHECK(a.kernel > 0, ErrorCode::InvalidModel, "kernel size {} on axis {} must be positive", a.kernel, i);
    CNNRT_CHECK(a.stride > 0, ErrorCode::InvalidModel, "stride {} on axis {} must be positive", a.stride, i);
    CNNRT_CHECK(a.dilation > 0, ErrorCode::InvalidModel, "dilation {} on axis {} must be positive", a.dilation, i);
    CNNRT_CHECK(a.input > 0, ErrorCode::InvalidModel, "input extent {} on axis {} must be positive", a.input, i);
    CNNRT_CHECK(output_padding[i] >= 0, ErrorCode::InvalidModel, "output_padding {} on axis {} is negative",
                output_padding[i], i);
    // The extent with no padding at all, output_padding included.
    const int64_t full = transposed_output_size(a.input, a.kernel, a.stride, a.dilation, 0, 0) + output_padding[i];
    int64_t target = -1;  // the output extent asked for, when padding is derived from it
    if (!output_shape.empty()) {
      target = output_shape[i];
      CNNRT_CHECK(target > 0, ErrorCode::InvalidModel, "output_shape {} on axis {} must be positive", target, i);
    } else if (auto_pad == AutoPad::SameUpper || auto_pad == AutoPad::SameLower) {
      target = a.input * a.stride;
    }
    int64_t pad_begin = 0, pad_end = 0;
    if (target >= 0) {
      const int64_t total = full - target;
      const int64_t half = half_rounded_down(total);
      pad_begin = auto_pad == AutoPad::SameUpper ? half : total - half;
      pad_end = total - pad_begin;
    } else if (auto_pad == AutoPad::NotSet) {
      pad_begin = pads[i];
      pad_end = pads[i + rank];
      CNNRT_CHECK(pad_begin >= 0 && pad_end >= 0, ErrorCode::Unsupported,
                  "negative padding ({}, {}) on axis {} is not supported", pad_begin, pad_end, i);
    }
    a.pad_begin = pad_begin;
    a.pad_end = pad_end - output_padding[i];
    a.output = transposed_output_size(a.input, a.kernel, a.stride, a.dilation, a.pad_begin, a.pad_end);
    CNNRT_CHECK(a.output > 0, ErrorCode::InvalidModel,
                "transposed window of {} (stride {}, dilation {}) over input extent {} with padding ({}, {}) and "
                "output_padding {} leaves no output on axis {}",
                a.kernel, a.stride, a.dilation, a.input, pad_begin, pad_end, output_padding[i], i);
  }
  return axes;
}

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da == db || db == 1) {
      out[i] = da;
    } else if (da == 1) {
      out[i] = db;
    } else {
      fail(ErrorCode::InvalidModel, "shapes {} and {} do not broadcast (axis {}: {} vs {})", shape_str(a),
           shape_str(b), i, da, db);
    }
  }
  return out;
}

}  // namespace cnnrt::ir
