// Lowering of Resize (canonical form, docs/ops.md) to launch_resize.
#include "kernels/resize.cuh"
#include "plan/gpu/lower_util.hpp"

namespace cnnrt::plan {

namespace {

kernels::ResizeTransform parse_transform(const std::string& name) {
  using T = kernels::ResizeTransform;
  if (name == "half_pixel") return T::HalfPixel;
  if (name == "pytorch_half_pixel") return T::PytorchHalfPixel;
  if (name == "align_corners") return T::AlignCorners;
  if (name == "asymmetric") return T::Asymmetric;
  if (name == "tf_half_pixel_for_nn") return T::TfHalfPixelForNearest;
  fail(ErrorCode::Internal, "Resize coordinate_transformation_mode '{}' is not canonical", name);
}

kernels::NearestRounding parse_rounding(const std::string& name) {
  using R = kernels::NearestRounding;
  if (name == "round_prefer_floor") return R::RoundPreferFloor;
  if (name == "round_prefer_ceil") return R::RoundPreferCeil;
  if (name == "floor") return R::Floor;
  if (name == "ceil") return R::Ceil;
  fail(ErrorCode::Internal, "Resize nearest_mode '{}' is not canonical", name);
}

void lower_resize(const ir::Node& node, LowerContext& lc) {
  const ir::Shape& in = input_shape(lc, node, 0);
  const ir::Shape& out = output_shape(lc, node);
  const std::vector<float> scales = node.attrs.get_floats("scales");
  const std::vector<float> lengths = node.attrs.get_floats("resized_lengths");
  CNNRT_CHECK(in.size() == 4 && out.size() == 4 && scales.size() == 4 && lengths.size() == 4, ErrorCode::Internal,
              "Resize is not canonical for {} -> {}", ir::shape_str(in), ir::shape_str(out));
  kernels::ResizeDesc desc;
  desc.planes = in[0] * in[1];
  desc.rows = {in[2], out[2], scales[2], lengths[2]};
  desc.cols = {in[3], out[3], scales[3], lengths[3]};
  const std::string mode = node.attrs.get_string("mode", "nearest");
  const std::string transform = node.attrs.get_string("coordinate_transformation_mode", "");
  const std::string rounding = node.attrs.get_string("nearest_mode", "round_prefer_floor");
  desc.mode = mode == "linear" ? kernels::ResizeMode::Linear : kernels::ResizeMode::Nearest;
  desc.transform = parse_transform(transform);
  desc.rounding = parse_rounding(rounding);
  const std::string config = mode == "linear" ? fmt::format("linear {}", transform)
                                              : fmt::format("nearest {} {}", transform, rounding);
  add_simple_step(lc, node, "resize", config, [desc](const float* const* i, float* const* o, Stream s) {
    kernels::launch_resize(i[0], o[0], desc, s);
  });
}

}  // namespace

std::vector<LoweringEntry> resize_lowerings() { return {{"Resize", lower_resize}}; }

}  // namespace cnnrt::plan
