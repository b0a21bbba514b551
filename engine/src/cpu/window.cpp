// Window kernels: Conv, ConvTranspose, MaxPool, AveragePool (1-D and 2-D, run as 2-D with a unit leading
// axis) and the global pools. They read the canonical attributes (kernel_shape, strides, dilations, pads) and
// take output extents from the pre-allocated output, never re-deriving them.
#include <algorithm>
#include <cmath>
#include <limits>

#include "cpu/kernel_util.hpp"

namespace cnnrt::cpu {
namespace {

using ir::HostTensor;
using ir::WindowAxis;

// A 1-D or 2-D window seen as 2-D: 1-D windows get a leading axis of extent 1.
struct Window2d {
  WindowAxis rows;
  WindowAxis cols;
};

Window2d window_2d(const ir::Node& node, const ir::Shape& in, const ir::Shape& out) {
  const size_t spatial = in.size() - 2;
  const std::vector<int64_t> kernel = node.attrs.get_ints("kernel_shape");
  const std::vector<int64_t> strides = node.attrs.get_ints("strides", std::vector<int64_t>(spatial, 1));
  const std::vector<int64_t> dilations = node.attrs.get_ints("dilations", std::vector<int64_t>(spatial, 1));
  const std::vector<int64_t> pads = node.attrs.get_ints("pads", std::vector<int64_t>(2 * spatial, 0));
  CNNRT_CHECK((spatial == 1 || spatial == 2) && kernel.size() == spatial && strides.size() == spatial &&
                  dilations.size() == spatial && pads.size() == 2 * spatial,
              ErrorCode::Internal, "window attributes are not canonical for a {}-D input", spatial);
  std::vector<WindowAxis> axes(spatial);
  for (size_t i = 0; i < spatial; ++i) {
    WindowAxis& axis = axes[i];
    axis.input = in[2 + i];
    axis.output = out[2 + i];
    axis.kernel = kernel[i];
    axis.stride = strides[i];
    axis.dilation = dilations[i];
    axis.pad_begin = pads[i];
    axis.pad_end = pads[spatial + i];
  }
  Window2d window;
  window.cols = axes.back();
  if (spatial == 2) {
    window.rows = axes.front();
  } else {  // a 1-D window: one row of input and output (an empty 2-D input keeps its 0 rows)
    window.rows.input = 1;
    window.rows.output = 1;
  }
  return window;
}

// Input position of tap k of the window at output position o (may fall in the padding).
int64_t tap_position(const WindowAxis& axis, int64_t o, int64_t k) {
  return o * axis.stride - axis.pad_begin + k * axis.dilation;
}

// The taps [first, end) of the window at output position o whose input position lies in [low, high).
struct TapRange {
  int64_t first = 0;
  int64_t end = 0;
  int64_t count() const { return end - first; }
};

// Rounding divisions by a positive divisor, for negative numerators too.
int64_t ceil_div(int64_t numerator, int64_t divisor) {
  return numerator >= 0 ? (numerator + divisor - 1) / divisor : -(-numerator / divisor);
}
int64_t floor_div(int64_t numerator, int64_t divisor) {
  return numerator >= 0 ? numerator / divisor : -((-numerator + divisor - 1) / divisor);
}

// Solves low <= tap_position(k) < high for k in closed form (no scan over a hostile kernel size).
TapRange taps_within(const WindowAxis& axis, int64_t o, int64_t low, int64_t high) {
  const int64_t start = tap_position(axis, o, 0);
  TapRange range;
  range.first = std::max<int64_t>(0, ceil_div(low - start, axis.dilation));
  range.end = std::min(axis.kernel, floor_div(high - 1 - start, axis.dilation) + 1);
  range.end = std::max(range.end, range.first);
  return range;
}

TapRange taps_inside(const WindowAxis& axis, int64_t o) { return taps_within(axis, o, 0, axis.input); }

// ---- Conv --------------------------------------------------------------------------------------------

// X [N, C, H, W] * W [M, C/group, KH, KW] (+ B [M]) -> Y [N, M, OH, OW]; sums in double.
void conv_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  const HostTensor& x = *in[0];
  const float* weight = in[1]->f32();
  const float* bias = in.size() > 2 && in[2] != nullptr ? in[2]->f32() : nullptr;
  HostTensor& y = *out[0];
  const Window2d window = window_2d(node, x.shape(), y.shape());
  const WindowAxis& rows = window.rows;
  const WindowAxis& cols = window.cols;
  const int64_t group = node.attrs.get_int("group", 1);
  const int64_t batch = x.shape()[0];
  const int64_t in_channels = x.shape()[1];
  const int64_t out_channels = y.shape()[1];
  const int64_t in_per_group = in_channels / group;
  const int64_t out_per_group = out_channels / group;
  const int64_t in_plane = rows.input * cols.input;
  const int64_t kernel_plane = rows.kernel * cols.kernel;
  float* result = y.f32();
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t m = 0; m < out_channels; ++m) {
      const int64_t first_in_channel = (m / out_per_group) * in_per_group;
      for (int64_t oy = 0; oy < rows.output; ++oy) {
        const TapRange ky_range = taps_inside(rows, oy);
        for (int64_t ox = 0; ox < cols.output; ++ox) {
          const TapRange kx_range = taps_inside(cols, ox);
          double sum = bias != nullptr ? bias[m] : 0.0;
          for (int64_t c = 0; c < in_per_group; ++c) {
            const float* x_plane = x.f32() + (n * in_channels + first_in_channel + c) * in_plane;
            const float* w_plane = weight + (m * in_per_group + c) * kernel_plane;
            for (int64_t ky = ky_range.first; ky < ky_range.end; ++ky) {
              const float* x_row = x_plane + tap_position(rows, oy, ky) * cols.input;
              const float* w_row = w_plane + ky * cols.kernel;
              for (int64_t kx = kx_range.first; kx < kx_range.end; ++kx) {
                sum += static_cast<double>(x_row[tap_position(cols, ox, kx)]) * w_row[kx];
              }
            }
          }
          *result++ = static_cast<float>(sum);
        }
      }
    }
  }
}

// ---- ConvTranspose -----------------------------------------------------------------------------------

// X [N, C, H, W] * W [C, M/group, KH, KW] (+ B [M]) -> Y [N, M, OH, OW]. Scattered, as the op is defined:
// input pixel (iy, ix) of channel c adds x * w[c, m, ky, kx] to output (iy * stride + ky * dilation - pad_begin,
// likewise for x) when that lies inside the output (pads may be negative: ir::resolve_transposed_window).
// The GPU kernel gathers instead, so the two formulations check each other. Sums in double.
void conv_transpose_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  const HostTensor& x = *in[0];
  const float* weight = in[1]->f32();
  const float* bias = in.size() > 2 && in[2] != nullptr ? in[2]->f32() : nullptr;
  HostTensor& y = *out[0];
  const Window2d window = window_2d(node, x.shape(), y.shape());
  const WindowAxis& rows = window.rows;
  const WindowAxis& cols = window.cols;
  const int64_t group = node.attrs.get_int("group", 1);
  const int64_t batch = x.shape()[0];
  const int64_t in_channels = x.shape()[1];
  const int64_t out_channels = y.shape()[1];
  const int64_t in_per_group = in_channels / group;
  const int64_t out_per_group = out_channels / group;
  const int64_t in_plane = rows.input * cols.input;
  const int64_t out_plane = rows.output * cols.output;
  const int64_t kernel_plane = rows.kernel * cols.kernel;
  std::vector<double> sums(static_cast<size_t>(out_channels * out_plane));
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t m = 0; m < out_channels; ++m) {
      std::fill_n(sums.begin() + m * out_plane, out_plane, bias != nullptr ? bias[m] : 0.0);
    }
    for (int64_t c = 0; c < in_channels; ++c) {
      const float* x_plane = x.f32() + (n * in_channels + c) * in_plane;
      const int64_t first_out_channel = (c / in_per_group) * out_per_group;
      for (int64_t mg = 0; mg < out_per_group; ++mg) {
        const float* w_plane = weight + (c * out_per_group + mg) * kernel_plane;
        double* y_plane = sums.data() + (first_out_channel + mg) * out_plane;
        for (int64_t iy = 0; iy < rows.input; ++iy) {
          for (int64_t ky = 0; ky < rows.kernel; ++ky) {
            const int64_t oy = iy * rows.stride + ky * rows.dilation - rows.pad_begin;
            if (oy < 0 || oy >= rows.output) continue;
            for (int64_t ix = 0; ix < cols.input; ++ix) {
              const double value = x_plane[iy * cols.input + ix];
              for (int64_t kx = 0; kx < cols.kernel; ++kx) {
                const int64_t ox = ix * cols.stride + kx * cols.dilation - cols.pad_begin;
                if (ox < 0 || ox >= cols.output) continue;
                y_plane[oy * cols.output + ox] += value * w_plane[ky * cols.kernel + kx];
              }
            }
          }
        }
      }
    }
    float* result = y.f32() + n * out_channels * out_plane;
    for (size_t i = 0; i < sums.size(); ++i) result[i] = static_cast<float>(sums[i]);
  }
}

// ---- MaxPool / AveragePool ---------------------------------------------------------------------------

// Visits every (n, c) plane and output position with the taps inside the input; `pool` returns the value.
template <class Pool>
void for_each_pool_window(const ir::Node& node, const HostTensor& x, HostTensor& y, Pool pool) {
  const Window2d window = window_2d(node, x.shape(), y.shape());
  const int64_t planes = x.shape()[0] * x.shape()[1];
  const int64_t in_plane = window.rows.input * window.cols.input;
  float* result = y.f32();
  for (int64_t p = 0; p < planes; ++p) {
    const float* x_plane = x.f32() + p * in_plane;
    for (int64_t oy = 0; oy < window.rows.output; ++oy) {
      for (int64_t ox = 0; ox < window.cols.output; ++ox) *result++ = pool(window, x_plane, oy, ox);
    }
  }
}

// Calls visit(value) for each input element of the window at (oy, ox) that lies inside the input.
template <class Visit>
void for_each_tap(const Window2d& window, const float* x_plane, int64_t oy, int64_t ox, Visit visit) {
  const TapRange ky_range = taps_inside(window.rows, oy);
  const TapRange kx_range = taps_inside(window.cols, ox);
  for (int64_t ky = ky_range.first; ky < ky_range.end; ++ky) {
    const float* x_row = x_plane + tap_position(window.rows, oy, ky) * window.cols.input;
    for (int64_t kx = kx_range.first; kx < kx_range.end; ++kx) visit(x_row[tap_position(window.cols, ox, kx)]);
  }
}

void max_pool_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  for_each_pool_window(node, *in[0], *out[0], [](const Window2d& window, const float* x_plane, int64_t oy, int64_t ox) {
    float max = -std::numeric_limits<float>::infinity();
    for_each_tap(window, x_plane, oy, ox, [&max](float value) { max = std::max(max, value); });
    return max;
  });
}

void average_pool_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  const bool count_include_pad = node.attrs.get_int("count_include_pad", 0) != 0;
  for_each_pool_window(node, *in[0], *out[0], [=](const Window2d& window, const float* x_plane, int64_t oy,
                                                   int64_t ox) {
    double sum = 0.0;
    int64_t inside = 0;
    for_each_tap(window, x_plane, oy, ox, [&](float value) {
      sum += value;
      ++inside;
    });
    // With count_include_pad the divisor counts padding taps too, but not taps past the padding that
    // ceil_mode windows may reach (as PyTorch and ONNX Runtime do).
    int64_t divisor = inside;
    if (count_include_pad) {
      const WindowAxis& rows = window.rows;
      const WindowAxis& cols = window.cols;
      divisor = taps_within(rows, oy, -rows.pad_begin, rows.input + rows.pad_end).count() *
                taps_within(cols, ox, -cols.pad_begin, cols.input + cols.pad_end).count();
    }
    return divisor > 0 ? static_cast<float>(sum / static_cast<double>(divisor)) : 0.0f;
  });
}

// ---- GlobalAveragePool / GlobalMaxPool ---------------------------------------------------------------

template <class Reduce>
void global_pool(const HostTensor& x, HostTensor& y, Reduce reduce) {
  const int64_t planes = x.shape()[0] * x.shape()[1];
  const int64_t plane = extent_product(x.shape(), 2, x.shape().size());
  for (int64_t p = 0; p < planes; ++p) y.f32()[p] = reduce(x.f32() + p * plane, plane);
}

void global_average_pool_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  global_pool(*in[0], *out[0], [](const float* values, int64_t count) {
    double sum = 0.0;
    for (int64_t i = 0; i < count; ++i) sum += values[i];
    return count > 0 ? static_cast<float>(sum / static_cast<double>(count)) : 0.0f;
  });
}

void global_max_pool_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  global_pool(*in[0], *out[0], [](const float* values, int64_t count) {
    float max = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < count; ++i) max = std::max(max, values[i]);
    return max;
  });
}

}  // namespace

void add_window_kernels(KernelTable& table) {
  table.insert(table.end(), {
      {"Conv", conv_kernel},
      {"ConvTranspose", conv_transpose_kernel},
      {"MaxPool", max_pool_kernel},
      {"AveragePool", average_pool_kernel},
      {"GlobalAveragePool", global_average_pool_kernel},
      {"GlobalMaxPool", global_max_pool_kernel},
  });
}

}  // namespace cnnrt::cpu
