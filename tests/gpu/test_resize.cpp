// launch_resize against the CPU reference: every coordinate transform with linear and with each nearest
// rounding, enlarging and shrinking, axes of 1, odd extents (7, 31, 33), output scales given as sizes
// (scale = output / input) and as scales (output = floor(input * scale)), ties that the rounding decides.
// Then whole models (Resize at opset 13, Upsample at opset 9) through the GPU planner against the CPU backend.
#include <cmath>

#include "cnnrt/cnnrt.hpp"
#include "kernel_test_util.hpp"
#include "kernels/resize.cuh"
#include "tests/model_builder.hpp"

namespace cnnrt::testing {
namespace {

struct ResizeCase {
  ir::Shape input;  // [N, C, H, W]
  int64_t out_h, out_w;
  float scale_h, scale_w;  // 0: output / input (the model gave sizes)
};

const std::vector<ResizeCase>& resize_cases() {
  static const std::vector<ResizeCase> cases = {
      {{1, 1, 1, 1}, 1, 1, 0, 0},
      {{2, 3, 7, 7}, 31, 33, 0, 0},    // enlarge by odd ratios
      {{1, 2, 33, 31}, 7, 1, 0, 0},    // shrink, to an axis of 1
      {{1, 1, 1, 7}, 33, 7, 0, 0},     // an axis of 1 enlarged
      {{2, 2, 31, 33}, 33, 31, 0, 0},  // one axis up, one down
      {{1, 3, 7, 5}, 17, 3, 2.5f, 0.6f},
      {{1, 1, 4, 4}, 8, 8, 2.0f, 2.0f},  // coordinates on exact halves: the rounding decides
      {{1, 1, 8, 8}, 3, 3, 0.375f, 0.375f},
      {{1, 2, 4, 2}, 2, 1, 0.6f, 0.6f},  // lengths 2.4 and 1.2: align_corners and pytorch_half_pixel read them
  };
  return cases;
}

struct TransformCase {
  const char* name;
  kernels::ResizeTransform transform;
};

struct RoundingCase {
  const char* name;
  kernels::NearestRounding rounding;
};

TEST_CASE("Resize nearest and linear match the CPU reference for every transform") {
  using T = kernels::ResizeTransform;
  using R = kernels::NearestRounding;
  const std::vector<TransformCase> transforms = {{"half_pixel", T::HalfPixel},
                                                 {"pytorch_half_pixel", T::PytorchHalfPixel},
                                                 {"align_corners", T::AlignCorners},
                                                 {"asymmetric", T::Asymmetric},
                                                 {"tf_half_pixel_for_nn", T::TfHalfPixelForNearest}};
  const std::vector<RoundingCase> roundings = {{"round_prefer_floor", R::RoundPreferFloor},
                                               {"round_prefer_ceil", R::RoundPreferCeil},
                                               {"floor", R::Floor},
                                               {"ceil", R::Ceil}};
  uint32_t seed = 2600;
  for (const ResizeCase& c : resize_cases()) {
    const ir::Shape out_shape = {c.input[0], c.input[1], c.out_h, c.out_w};
    const float scale_h = c.scale_h > 0 ? c.scale_h : static_cast<float>(c.out_h) / static_cast<float>(c.input[2]);
    const float scale_w = c.scale_w > 0 ? c.scale_w : static_cast<float>(c.out_w) / static_cast<float>(c.input[3]);
    // The resized length: input * scale, not rounded down, when scales are given; else the output size.
    const float length_h = c.scale_h > 0 ? static_cast<float>(c.input[2] * double{c.scale_h}) : c.out_h;
    const float length_w = c.scale_w > 0 ? static_cast<float>(c.input[3] * double{c.scale_w}) : c.out_w;
    const ir::HostTensor x = random_tensor(c.input, seed++);
    DeviceBuffer x_device(x.float_values());
    kernels::ResizeDesc desc;
    desc.planes = c.input[0] * c.input[1];
    desc.rows = {c.input[2], c.out_h, scale_h, length_h};
    desc.cols = {c.input[3], c.out_w, scale_w, length_w};
    for (const TransformCase& t : transforms) {
      desc.transform = t.transform;
      // Linear first (rounding unused), then nearest with each rounding.
      for (int variant = -1; variant < static_cast<int>(roundings.size()); ++variant) {
        const bool linear = variant < 0;
        desc.mode = linear ? kernels::ResizeMode::Linear : kernels::ResizeMode::Nearest;
        const char* rounding = linear ? "round_prefer_floor" : roundings[variant].name;
        if (!linear) desc.rounding = roundings[variant].rounding;
        INFO("Resize " << ir::shape_str(c.input) << " -> " << ir::shape_str(out_shape) << ", "
                       << (linear ? "linear" : "nearest") << " " << t.name << " " << rounding);
        const ir::Attributes attrs =
            make_attrs({{"mode", std::string(linear ? "linear" : "nearest")},
                        {"coordinate_transformation_mode", std::string(t.name)},
                        {"nearest_mode", std::string(rounding)},
                        {"scales", std::vector<float>{1, 1, scale_h, scale_w}},
                        {"resized_lengths", std::vector<float>{1, 1, length_h, length_w}},
                        {"sizes", std::vector<int64_t>(out_shape.begin(), out_shape.end())}});
        const ir::HostTensor want = cpu_reference("Resize", attrs, {&x}, out_shape);
        DeviceBuffer out(static_cast<size_t>(want.numel()));
        kernels::launch_resize(x_device.get(), out.get(), desc, nullptr);
        finish_launch();
        if (linear) {
          CHECK(error_against(out, want) < kTolerance);
        } else {
          CHECK(out.download() == want.float_values());  // a copy: the same pixels, bit for bit
        }
      }
    }
  }
}

// Output of a one-node model on `device` for a batch of 2.
std::vector<float> run_model(const std::string& bytes, Device device, const std::vector<float>& x, size_t out_count) {
  Options options;
  options.device = device;
  options.batch_sizes = {2};
  options.tuning = false;
  options.tuning_cache = "none";
  const Model model = Model::load_from_memory(bytes.data(), bytes.size(), options, "resize.onnx");
  Context context(model);
  std::vector<float> y(out_count);
  const float* in = x.data();
  float* out = y.data();
  context.run(&in, &out, 2);
  return y;
}

TEST_CASE("Resize and Upsample models run on the GPU as on the CPU backend") {
  const std::vector<float> x = random_floats(2 * 3 * 7 * 5, 2700);
  {
    ModelBuilder m(13);
    m.input("x", {-1, 3, 7, 5}).output("y").int_initializer("sizes", {4}, {2, 3, 31, 4});
    auto& node = m.node("Resize", {"x", "", "", "sizes"}, {"y"}, "resize");
    ModelBuilder::attr_string(node, "mode", "linear");
    ModelBuilder::attr_string(node, "coordinate_transformation_mode", "pytorch_half_pixel");
    const size_t count = 2 * 3 * 31 * 4;
    const std::vector<float> want = run_model(m.bytes(), Device::Cpu, x, count);
    CHECK(relative_error(run_model(m.bytes(), Device::Gpu, x, count), want) < kTolerance);
  }
  {
    ModelBuilder m(9);
    m.input("x", {-1, 3, 7, 5}).output("y").initializer("scales", {4}, {1, 1, 2, 3});
    auto& node = m.node("Upsample", {"x", "scales"}, {"y"}, "upsample");
    ModelBuilder::attr_string(node, "mode", "nearest");
    const size_t count = 2 * 3 * 14 * 15;
    const std::vector<float> want = run_model(m.bytes(), Device::Cpu, x, count);
    CHECK(run_model(m.bytes(), Device::Gpu, x, count) == want);
  }
}

}  // namespace
}  // namespace cnnrt::testing
