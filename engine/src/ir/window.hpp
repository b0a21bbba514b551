// Sliding-window arithmetic shared by convolution, transposed convolution and pooling: output sizes and
// resolved padding for explicit, asymmetric, SAME_UPPER, SAME_LOWER and VALID padding, with dilation and
// ceil_mode (and, for ConvTranspose, output_padding and output_shape).
// The loader, shape inference, the planner, FLOP counts and the tests all use this one implementation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.hpp"

namespace cnnrt::ir {

enum class AutoPad { NotSet, SameUpper, SameLower, Valid };

// Parses the auto_pad attribute; throws Unsupported for values ONNX does not define.
AutoPad parse_auto_pad(const std::string& text);

// One spatial axis of a window op, after padding is resolved.
struct WindowAxis {
  int64_t input = 0;     // input extent (pixels)
  int64_t kernel = 1;    // window extent before dilation
  int64_t stride = 1;
  int64_t dilation = 1;
  int64_t pad_begin = 0;
  int64_t pad_end = 0;
  int64_t output = 0;

  int64_t dilated_kernel() const { return (kernel - 1) * dilation + 1; }
};

// Output extent for explicit padding. ceil_mode rounds up, but (as PyTorch and ONNX Runtime do) never
// lets the last window start inside the end padding. Returns <= 0 when the window does not fit.
int64_t window_output_size(int64_t input, int64_t kernel, int64_t stride, int64_t dilation, int64_t pad_begin,
                           int64_t pad_end, bool ceil_mode);

// All spatial axes of a Conv/MaxPool/AveragePool node whose spatial input extents are `input` (H, W, ...).
// Reads kernel_shape (or takes `kernel` from the weights for Conv), strides, dilations, pads, auto_pad and
// ceil_mode. Throws InvalidModel for inconsistent attributes or an empty output.
std::vector<WindowAxis> resolve_window(const Attributes& attrs, const std::vector<int64_t>& input,
                                       const std::vector<int64_t>& kernel, bool allow_ceil_mode);

// Output extent of one axis of a transposed convolution (ConvTranspose): input pixel i and tap k land on
// output o = i * stride + k * dilation - pad_begin, and the output keeps [0, output):
//   output = stride * (input - 1) + (kernel - 1) * dilation + 1 - pad_begin - pad_end.
// Pads may be negative here (output_padding and output_shape lengthen the output that way; see below).
int64_t transposed_output_size(int64_t input, int64_t kernel, int64_t stride, int64_t dilation, int64_t pad_begin,
                               int64_t pad_end);

// All spatial axes of a ConvTranspose node (ONNX opsets 1 and 11) whose spatial input extents are `input`.
// Reads kernel_shape (or takes `kernel` from the weights), strides, dilations, pads, auto_pad,
// output_padding and output_shape, and returns the axes with padding resolved so that
// transposed_output_size() gives the output: output_padding is taken off the end pad, and output_shape
// (given, or input * stride under SAME_UPPER/SAME_LOWER) sets the total padding, split as the ONNX spec
// says (SAME_UPPER: the odd pixel at the end; otherwise at the beginning). Throws InvalidModel for
// inconsistent attributes or an empty output, Unsupported for negative explicit pads.
std::vector<WindowAxis> resolve_transposed_window(const Attributes& attrs, const std::vector<int64_t>& input,
                                                  const std::vector<int64_t>& kernel);

// numpy-style broadcast of two shapes; throws InvalidModel naming both shapes when they do not broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b);

}  // namespace cnnrt::ir
