#include "kernels/layer.hpp"

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

}  // namespace cnnrt::kernels
