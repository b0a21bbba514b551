#include "kernels/layer.hpp"

#include <algorithm>
#include <climits>
#include <stdexcept>
#include <string>

namespace cnnrt::kernels {

namespace {

int checked_int(int64_t v, const char* what) {
  if (v < 0 || v > INT_MAX) {
    throw std::length_error(std::string(what) + " " + std::to_string(v) + " is too large for the GPU kernels");
  }
  return static_cast<int>(v);
}

}  // namespace

ConvGeometry conv_geometry(int64_t N, int64_t C, int64_t F, int64_t groups, const SlidingAxis& rows,
                           const SlidingAxis& cols) {
  ConvGeometry g;
  g.N = checked_int(N, "batch");
  g.C = checked_int(C, "channels");
  g.F = checked_int(F, "filters");
  g.groups = checked_int(groups, "groups");
  g.H = checked_int(rows.input, "height");
  g.W = checked_int(cols.input, "width");
  g.KH = checked_int(rows.kernel, "kernel height");
  g.KW = checked_int(cols.kernel, "kernel width");
  g.OH = checked_int(rows.output, "output height");
  g.OW = checked_int(cols.output, "output width");
  g.stride_h = checked_int(rows.stride, "stride");
  g.stride_w = checked_int(cols.stride, "stride");
  g.dil_h = checked_int(rows.dilation, "dilation");
  g.dil_w = checked_int(cols.dilation, "dilation");
  g.pad_top = checked_int(rows.pad_begin, "pad");
  g.pad_bottom = checked_int(rows.pad_end, "pad");
  g.pad_left = checked_int(cols.pad_begin, "pad");
  g.pad_right = checked_int(cols.pad_end, "pad");
  return g;
}

std::vector<float> apply_input_prologue(const ConvLayer& layer, const float* x, const float* scale, const float* shift) {
  const ConvGeometry& g = layer.g;
  const InputPrologue& in = layer.in;
  if (in.scale && (!scale || !shift)) throw std::invalid_argument("apply_input_prologue: the affine's host copies");
  const size_t plane = static_cast<size_t>(g.H) * g.W;
  std::vector<float> out(static_cast<size_t>(g.N) * g.C * plane);
  for (int n = 0; n < g.N; ++n) {
    for (int c = 0; c < g.C; ++c) {
      const float* from = x + (static_cast<size_t>(n) * g.C + in.channel(c, g.C)) * plane;
      float* to = out.data() + (static_cast<size_t>(n) * g.C + c) * plane;
      for (size_t i = 0; i < plane; ++i) {
        to[i] = in.scale ? apply_activation<float>(in.act, from[i] * scale[c] + shift[c], in.alpha, in.beta) : from[i];
      }
    }
  }
  return out;
}

}  // namespace cnnrt::kernels
