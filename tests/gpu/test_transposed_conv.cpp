// The transposed-convolution kernel (kernels/conv_transpose2d.cuh) against the CPU reference, which scatters
// where the kernel gathers: every variant (output channels a thread) on odd extents (1, 7, 31, 33, 1000),
// strides larger and smaller than the kernel, dilation, groups, asymmetric and negative pads (output_padding
// and output_shape), 1-D, and each fused epilogue (bias, ReLU, LeakyReLU, Sigmoid). Outputs are poisoned
// before every launch; inputs, weights and biases are random, never zeros.
#include "ir/fused.hpp"
#include "ir/window.hpp"
#include "kernel_test_util.hpp"
#include "kernels/conv_transpose2d.cuh"

namespace cnnrt::testing {
namespace {

struct TransposedCase {
  ir::Shape input;              // [N, C, W] or [N, C, H, W]
  int64_t out_per_group = 1;    // M / group
  int64_t group = 1;
  std::vector<int64_t> kernel;  // one per spatial axis
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;
  std::vector<int64_t> pads;            // begins, then ends (explicit, >= 0)
  std::vector<int64_t> output_padding;  // one per axis
  std::vector<int64_t> output_shape;    // spatial; empty: from the pads
};

const std::vector<TransposedCase>& transposed_cases() {
  static const std::vector<TransposedCase> cases = {
      {{1, 1, 1, 1}, 1, 1, {1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}, {0, 0}, {}},
      {{2, 3, 7, 7}, 4, 1, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, {1, 1}, {}},           // stride 2, pad 1, out pad 1
      {{1, 8, 31, 33}, 4, 2, {2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}, {0, 0}, {}},         // U-Net 2x2 up, 2 groups
      {{2, 6, 7, 31}, 1, 6, {3, 3}, {3, 2}, {1, 2}, {1, 0, 2, 1}, {0, 1}, {}},          // depthwise, dilation
      {{1, 4, 33, 7}, 16, 1, {4, 4}, {2, 2}, {1, 1}, {1, 1, 1, 1}, {0, 0}, {}},         // DCGAN 4x4 s2 p1
      {{1, 3, 5, 5}, 5, 1, {3, 3}, {1, 1}, {1, 1}, {0, 0, 0, 0}, {0, 0}, {9, 8}},       // output_shape: end pads < 0
      {{1, 2, 4, 4}, 2, 1, {2, 2}, {3, 3}, {1, 1}, {0, 0, 0, 0}, {2, 1}, {}},           // stride > kernel: gaps
      {{3, 2, 1000}, 3, 1, {5}, {3}, {2}, {2, 1}, {1}, {}},                             // 1-D
      {{2, 4, 1, 33}, 6, 2, {1, 3}, {1, 2}, {1, 1}, {0, 1, 0, 1}, {0, 0}, {}},         // one row
  };
  return cases;
}

ir::Attributes case_attrs(const TransposedCase& c) {
  ir::Attributes a = make_attrs({{"kernel_shape", c.kernel},
                                 {"strides", c.strides},
                                 {"dilations", c.dilations},
                                 {"pads", c.pads},
                                 {"output_padding", c.output_padding},
                                 {"group", c.group}});
  if (!c.output_shape.empty()) a.set("output_shape", c.output_shape);
  return a;
}

kernels::SlidingAxis sliding(const ir::WindowAxis& a) {
  kernels::SlidingAxis s;
  s.input = a.input;
  s.output = a.output;
  s.kernel = a.kernel;
  s.stride = a.stride;
  s.dilation = a.dilation;
  s.pad_begin = a.pad_begin;
  s.pad_end = a.pad_end;
  return s;
}

struct Activation {
  const char* op;  // "" for none
  kernels::ParamAct act;
  float alpha, beta;
};

}  // namespace

TEST_CASE("ConvTranspose: every variant and epilogue matches the CPU reference") {
  uint32_t seed = 2800;
  const Activation activations[] = {{"", kernels::ParamAct::None, 0, 0},
                                    {"Relu", kernels::ParamAct::Relu, 0, 0},
                                    {"LeakyRelu", kernels::ParamAct::LeakyRelu, 0.1f, 0},
                                    {"Sigmoid", kernels::ParamAct::Sigmoid, 0, 0}};
  int launches = 0;
  for (const TransposedCase& c : transposed_cases()) {
    const size_t spatial = c.input.size() - 2;
    const std::vector<ir::WindowAxis> axes = ir::resolve_transposed_window(
        case_attrs(c), ir::Shape(c.input.begin() + 2, c.input.end()), c.kernel);
    const int64_t out_channels = c.out_per_group * c.group;
    ir::Shape out_shape = {c.input[0], out_channels};
    for (const ir::WindowAxis& a : axes) out_shape.push_back(a.output);
    // The canonical node the CPU reference reads: resolved pads, output_padding and output_shape folded in.
    std::vector<int64_t> pads_begin, pads_end;
    for (const ir::WindowAxis& a : axes) {
      pads_begin.push_back(a.pad_begin);
      pads_end.push_back(a.pad_end);
    }
    std::vector<int64_t> pads = pads_begin;
    pads.insert(pads.end(), pads_end.begin(), pads_end.end());
    ir::Attributes canonical = make_attrs({{"kernel_shape", c.kernel},
                                           {"strides", c.strides},
                                           {"dilations", c.dilations},
                                           {"pads", pads},
                                           {"group", c.group}});

    ir::Shape w_shape = {c.input[1], c.out_per_group};
    w_shape.insert(w_shape.end(), c.kernel.begin(), c.kernel.end());
    const ir::HostTensor x = random_tensor(c.input, seed++);
    const ir::HostTensor w = random_tensor(w_shape, seed++);
    const ir::HostTensor b = random_tensor({out_channels}, seed++);
    DeviceBuffer x_device(x.float_values()), w_device(w.float_values()), b_device(b.float_values());

    kernels::ConvTranspose2dDesc desc;
    desc.batch = c.input[0];
    desc.in_channels = c.input[1];
    desc.out_channels = out_channels;
    desc.groups = c.group;
    desc.cols = sliding(axes.back());
    if (spatial == 2) desc.rows = sliding(axes.front());

    for (const Activation& act : activations) {
      for (bool with_bias : {false, true}) {
        ir::Attributes attrs = canonical;
        if (*act.op != '\0') {
          attrs.set(ir::fused::kActivation, std::string(act.op));
          attrs.set(ir::fused::kConvActAlpha, act.alpha);
          attrs.set(ir::fused::kConvActBeta, act.beta);
        }
        const ir::HostTensor want = cpu_reference(ir::fused::kFusedConvTranspose, attrs,
                                                  {&x, &w, with_bias ? &b : nullptr}, out_shape);
        kernels::Epilogue e;
        e.bias = with_bias ? b_device.get() : nullptr;
        e.param_act = act.act;
        e.alpha = act.alpha;
        e.beta = act.beta;
        REQUIRE(kernels::conv_transpose2d_unsupported(desc, e).empty());
        const auto variants = kernels::conv_transpose2d_variants(desc, e, 132);
        REQUIRE(!variants.empty());
        for (const kernels::ConvTransposeVariant& v : variants) {
          INFO(v.name << " on " << ir::shape_str(c.input) << " -> " << ir::shape_str(out_shape)
                      << (with_bias ? " with bias" : ""));
          note_check_point(v.name + " " + ir::shape_str(c.input));
          DeviceBuffer out(static_cast<size_t>(want.numel()));
          v.launch(x_device.get(), w_device.get(), out.get(), desc, e, nullptr);
          finish_launch();
          CHECK(error_against(out, want) < kTolerance);
          ++launches;
        }
      }
    }
  }
  CHECK(launches >= 100);
}

TEST_CASE("ConvTranspose: variants follow the layer, and residual or pooling epilogues are refused") {
  kernels::ConvTranspose2dDesc desc;
  desc.batch = 256;
  desc.in_channels = 128;
  desc.out_channels = 64;
  desc.rows = {32, 64, 2, 2, 1, 0, 0};
  desc.cols = {32, 64, 2, 2, 1, 0, 0};
  kernels::Epilogue e;
  e.param_act = kernels::ParamAct::Relu;
  auto variants = kernels::conv_transpose2d_variants(desc, e, 132);
  REQUIRE(variants.size() == 4);
  CHECK(variants.front().name == "conv_transpose_gather_m8_relu");  // plenty of pixels: most channel reuse
  desc.out_channels = 3;  // fewer channels a group than 4: only m1 and m2
  variants = kernels::conv_transpose2d_variants(desc, e, 132);
  CHECK(variants.size() == 2);
  desc.out_channels = 64;
  desc.batch = 1;
  desc.rows = {2, 4, 2, 2, 1, 0, 0};
  desc.cols = {2, 4, 2, 2, 1, 0, 0};
  variants = kernels::conv_transpose2d_variants(desc, e, 132);
  CHECK(variants.front().name == "conv_transpose_gather_m1_relu");  // 16 pixels: spread the channels

  float dummy = 0;
  e.residual = &dummy;
  CHECK(kernels::conv_transpose2d_unsupported(desc, e) == "a residual epilogue");
  CHECK(kernels::conv_transpose2d_variants(desc, e, 132).empty());
  e.residual = nullptr;
  e.pool.kind = kernels::FusedPool::Max;
  CHECK(kernels::conv_transpose2d_unsupported(desc, e) == "a pooling epilogue");
}

}  // namespace cnnrt::testing
