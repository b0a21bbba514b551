// Resize (canonical form, ir/ops_resize.cpp): nearest and linear over H and W of [N, C, H, W].
//
// Coordinates are computed in float, each as one rounded operation after another (no fused multiply-add can
// change an index), the same expressions as kernels/resize.cu, so that both pick the same source pixels.
#include <algorithm>
#include <cmath>

#include "cpu/kernel_util.hpp"

namespace cnnrt::cpu {
namespace {

using ir::HostTensor;

enum class Transform { HalfPixel, PytorchHalfPixel, AlignCorners, Asymmetric, TfHalfPixelForNearest };
enum class Nearest { RoundPreferFloor, RoundPreferCeil, Floor, Ceil };

Transform parse_transform(const std::string& name) {
  if (name == "half_pixel") return Transform::HalfPixel;
  if (name == "pytorch_half_pixel") return Transform::PytorchHalfPixel;
  if (name == "align_corners") return Transform::AlignCorners;
  if (name == "asymmetric") return Transform::Asymmetric;
  if (name == "tf_half_pixel_for_nn") return Transform::TfHalfPixelForNearest;
  fail(ErrorCode::Internal, "Resize coordinate_transformation_mode '{}' is not canonical", name);
}

Nearest parse_nearest(const std::string& name) {
  if (name == "round_prefer_floor") return Nearest::RoundPreferFloor;
  if (name == "round_prefer_ceil") return Nearest::RoundPreferCeil;
  if (name == "floor") return Nearest::Floor;
  if (name == "ceil") return Nearest::Ceil;
  fail(ErrorCode::Internal, "Resize nearest_mode '{}' is not canonical", name);
}

// The input coordinate (in pixels of the input axis) that output index `x` maps to; `length` is the resized
// length (canonical resized_lengths: input * scale, or the output size).
float source_coordinate(int64_t x, Transform transform, float scale, int64_t in, float length) {
  const float xf = static_cast<float>(x);
  switch (transform) {
    case Transform::HalfPixel: return (xf + 0.5f) / scale - 0.5f;
    case Transform::PytorchHalfPixel: return length > 1.0f ? (xf + 0.5f) / scale - 0.5f : 0.0f;
    case Transform::AlignCorners: return length == 1.0f ? 0.0f : xf * static_cast<float>(in - 1) / (length - 1.0f);
    case Transform::Asymmetric: return xf / scale;
    case Transform::TfHalfPixelForNearest: return (xf + 0.5f) / scale;
  }
  return 0.0f;
}

int64_t clamp_index(int64_t i, int64_t extent) { return std::min(std::max<int64_t>(i, 0), extent - 1); }

int64_t nearest_index(float coordinate, Nearest mode, int64_t extent) {
  const float below = std::floor(coordinate);
  const float fraction = coordinate - below;
  int64_t index = static_cast<int64_t>(below);
  switch (mode) {
    case Nearest::RoundPreferFloor: index += fraction > 0.5f ? 1 : 0; break;
    case Nearest::RoundPreferCeil: index += fraction >= 0.5f ? 1 : 0; break;
    case Nearest::Floor: break;
    case Nearest::Ceil: index += fraction > 0.0f ? 1 : 0; break;
  }
  return clamp_index(index, extent);
}

// Per output index of one axis: the two input indices it reads and the weight of the second (nearest: both
// indices equal, weight 0).
struct AxisTaps {
  std::vector<int64_t> first, second;
  std::vector<float> weight;
};

AxisTaps axis_taps(bool linear, Transform transform, Nearest nearest, float scale, float length, int64_t in,
                   int64_t out) {
  AxisTaps taps;
  for (int64_t x = 0; x < out; ++x) {
    const float coordinate = source_coordinate(x, transform, scale, in, length);
    if (!linear) {
      const int64_t index = nearest_index(coordinate, nearest, in);
      taps.first.push_back(index);
      taps.second.push_back(index);
      taps.weight.push_back(0.0f);
      continue;
    }
    // Outside [0, in - 1] the edge pixel repeats.
    const float clamped = std::min(std::max(coordinate, 0.0f), static_cast<float>(in - 1));
    const int64_t below = static_cast<int64_t>(std::floor(clamped));
    taps.first.push_back(below);
    taps.second.push_back(clamp_index(below + 1, in));
    taps.weight.push_back(clamped - static_cast<float>(below));
  }
  return taps;
}

void resize_kernel(const ir::Node& node, const Inputs& in, Outputs& out) {
  const HostTensor& x = *in[0];
  HostTensor& y = *out[0];
  const ir::Shape& xs = x.shape();
  const ir::Shape& ys = y.shape();
  CNNRT_CHECK(xs.size() == 4 && ys.size() == 4 && x.dtype() == ir::DType::Float32, ErrorCode::Internal,
              "Resize takes float32 [N, C, H, W], got {}", ir::shape_str(xs));
  const std::vector<float> scales = node.attrs.get_floats("scales");
  const std::vector<float> lengths = node.attrs.get_floats("resized_lengths");
  CNNRT_CHECK(scales.size() == 4 && lengths.size() == 4, ErrorCode::Internal, "Resize is not canonical");
  const bool linear = node.attrs.get_string("mode", "nearest") == "linear";
  const Transform transform = parse_transform(node.attrs.get_string("coordinate_transformation_mode", ""));
  const Nearest nearest = parse_nearest(node.attrs.get_string("nearest_mode", "round_prefer_floor"));
  const int64_t in_h = xs[2], in_w = xs[3], out_h = ys[2], out_w = ys[3];
  const AxisTaps rows = axis_taps(linear, transform, nearest, scales[2], lengths[2], in_h, out_h);
  const AxisTaps cols = axis_taps(linear, transform, nearest, scales[3], lengths[3], in_w, out_w);
  const int64_t planes = xs[0] * xs[1];
  const float* src = x.f32();
  float* dst = y.f32();
  for (int64_t p = 0; p < planes; ++p) {
    const float* plane = src + p * in_h * in_w;
    for (int64_t oy = 0; oy < out_h; ++oy) {
      const float* row0 = plane + rows.first[oy] * in_w;
      const float* row1 = plane + rows.second[oy] * in_w;
      const float wy = rows.weight[oy];
      if (!linear) {  // a copy: no arithmetic that could turn an inf into a NaN
        for (int64_t ox = 0; ox < out_w; ++ox) *dst++ = row0[cols.first[ox]];
        continue;
      }
      for (int64_t ox = 0; ox < out_w; ++ox) {
        const int64_t c0 = cols.first[ox], c1 = cols.second[ox];
        const float wx = cols.weight[ox];
        const float top = row0[c0] * (1.0f - wx) + row0[c1] * wx;
        const float bottom = row1[c0] * (1.0f - wx) + row1[c1] * wx;
        *dst++ = top * (1.0f - wy) + bottom * wy;
      }
    }
  }
}

}  // namespace

void add_resize_kernels(KernelTable& table) { table.push_back({"Resize", resize_kernel}); }

}  // namespace cnnrt::cpu
