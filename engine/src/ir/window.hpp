// Sliding-window arithmetic shared by convolution and pooling: output sizes and resolved padding for
// explicit, asymmetric, SAME_UPPER, SAME_LOWER and VALID padding, with dilation and ceil_mode.
// The loader, shape inference, the planner, FLOP counts and the tests all use this one implementation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.hpp"
#include "kernels/layer.hpp"

namespace cnnrt::ir {

enum class AutoPad { NotSet, SameUpper, SameLower, Valid };

// Parses the auto_pad attribute; throws Unsupported for values ONNX does not define.
AutoPad parse_auto_pad(const std::string& text);

// One spatial axis of a window op, after padding is resolved: the one form the IR, the CPU reference, the
// planner and the kernels share.
using WindowAxis = kernels::SlidingAxis;

// Output extent for explicit padding. ceil_mode rounds up, but (as PyTorch and ONNX Runtime do) never
// lets the last window start inside the end padding. Returns <= 0 when the window does not fit.
int64_t window_output_size(int64_t input, int64_t kernel, int64_t stride, int64_t dilation, int64_t pad_begin,
                           int64_t pad_end, bool ceil_mode);

// All spatial axes of a Conv/MaxPool/AveragePool node whose spatial input extents are `input` (H, W, ...).
// Reads kernel_shape (or takes `kernel` from the weights for Conv), strides, dilations, pads, auto_pad and
// ceil_mode. Throws InvalidModel for inconsistent attributes or an empty output.
std::vector<WindowAxis> resolve_window(const Attributes& attrs, const std::vector<int64_t>& input,
                                       const std::vector<int64_t>& kernel, bool allow_ceil_mode);

// numpy-style broadcast of two shapes; throws InvalidModel naming both shapes when they do not broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b);

}  // namespace cnnrt::ir
