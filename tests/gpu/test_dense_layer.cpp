// The DenseNet bottleneck layer kernel (kernels/dense_layer.cuh): every variant against a float64 reference on
// random inputs into poisoned outputs (twice: bit for bit), with and without the prologue, odd sizes (1, 7, 31, 33
// pixels), image strides on both sides (NaN between the input's images, the gaps of the output left poisoned); and
// the planner's choice of it for DenseNet-BC's layers, where forced.
#include <doctest/doctest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "gpu/device_info.hpp"
#include "gpu_test_util.hpp"
#include "kernel_test_util.hpp"
#include "kernels/dense_layer.cuh"

namespace cnnrt::testing {

namespace {

using kernels::ParamAct;

struct LayerCase {
  int batch, C, M, F, H, W;
  bool prologue;
  ParamAct act0, act1, act2;
  bool b1, b2;
  int x_gap, y_gap;  // floats between images beyond their extent
};

double act(ParamAct a, double v, double alpha, double beta) {
  switch (a) {
    case ParamAct::Relu: return v > 0 ? v : 0;
    case ParamAct::Clip: return std::min(std::max(v, double(alpha)), double(beta));
    case ParamAct::Sigmoid: return 1.0 / (1.0 + std::exp(-v));
    case ParamAct::None: return v;
    default: FAIL("activation not modelled here"); return v;
  }
}

constexpr float kAlpha = -0.25f, kBeta = 0.75f;  // Clip's bounds where a case clips

void check_case(const LayerCase& k, uint32_t seed, std::set<std::string>& ran) {
  const int64_t hw = int64_t(k.H) * k.W;
  const int64_t x_image = k.C * hw + k.x_gap, y_image = k.F * hw + k.y_gap;
  std::vector<float> x = random_floats(size_t(k.batch * x_image), seed);
  for (int n = 0; n < k.batch; ++n) {
    for (int g = 0; g < k.x_gap; ++g) x[size_t(n * x_image + k.C * hw + g)] = NAN;  // never read
  }
  const std::vector<float> scale = random_floats(size_t(k.C), seed + 1, 0.5f, 1.5f);
  const std::vector<float> shift = random_floats(size_t(k.C), seed + 2, -0.5f, 0.5f);
  const std::vector<float> w1 = random_floats(size_t(k.M) * k.C, seed + 3);
  const std::vector<float> b1 = random_floats(size_t(k.M), seed + 4);
  const std::vector<float> w2 = random_floats(size_t(k.F) * k.M * 9, seed + 5);
  const std::vector<float> b2 = random_floats(size_t(k.F), seed + 6);

  // The float64 answer, then the outputs where they lie in y (the gaps stay NaN: the poison).
  std::vector<double> hidden(size_t(k.M) * hw), in(size_t(k.C) * hw);
  std::vector<float> want(size_t(k.batch * y_image), NAN);
  for (int n = 0; n < k.batch; ++n) {
    for (int c = 0; c < k.C; ++c) {
      for (int64_t p = 0; p < hw; ++p) {
        const double v = x[size_t(n * x_image + c * hw + p)];
        in[size_t(c * hw + p)] = k.prologue ? act(k.act0, v * scale[size_t(c)] + shift[size_t(c)], kAlpha, kBeta) : v;
      }
    }
    for (int m = 0; m < k.M; ++m) {
      for (int64_t p = 0; p < hw; ++p) {
        double s = k.b1 ? b1[size_t(m)] : 0.0;
        for (int c = 0; c < k.C; ++c) s += double(w1[size_t(m * k.C + c)]) * in[size_t(c * hw + p)];
        hidden[size_t(m * hw + p)] = act(k.act1, s, kAlpha, kBeta);
      }
    }
    for (int f = 0; f < k.F; ++f) {
      for (int oy = 0; oy < k.H; ++oy) {
        for (int ox = 0; ox < k.W; ++ox) {
          double s = k.b2 ? b2[size_t(f)] : 0.0;
          for (int m = 0; m < k.M; ++m) {
            for (int t = 0; t < 9; ++t) {
              const int iy = oy - 1 + t / 3, ix = ox - 1 + t % 3;
              if (iy < 0 || iy >= k.H || ix < 0 || ix >= k.W) continue;
              s += double(w2[size_t((f * k.M + m) * 9 + t)]) * hidden[size_t(m * hw + iy * k.W + ix)];
            }
          }
          want[size_t(n * y_image + f * hw + oy * k.W + ox)] = float(act(k.act2, s, kAlpha, kBeta));
        }
      }
    }
  }

  DeviceBuffer dx(x), dscale(scale), dshift(shift), db1(b1), db2(b2);
  kernels::DenseLayerDesc d;
  d.batch = k.batch;
  d.C = k.C;
  d.H = k.H;
  d.W = k.W;
  d.x_image = k.x_gap ? x_image : 0;
  if (k.prologue) {
    d.scale = dscale.get();
    d.shift = dshift.get();
    d.act0 = k.act0;
    d.alpha0 = kAlpha;
    d.beta0 = kBeta;
  }
  d.M = k.M;
  d.b1 = k.b1 ? db1.get() : nullptr;
  d.act1 = k.act1;
  d.alpha1 = kAlpha;
  d.beta1 = kBeta;
  d.F = k.F;
  d.b2 = k.b2 ? db2.get() : nullptr;
  d.act2 = k.act2;
  d.alpha2 = kAlpha;
  d.beta2 = kBeta;
  d.y_image = k.y_gap ? y_image : 0;
  DeviceBuffer packed(kernels::dense_layer_pack(w1, w2, d));
  d.w1 = packed.get();
  d.w2 = packed.get() + kernels::dense_layer_w2_offset(d);
  std::string why;
  REQUIRE_MESSAGE(kernels::dense_layer_supports(d, &why), why);
  const int optin = static_cast<int>(gpu::current_device().smem_per_block_optin);
  const std::vector<kernels::DenseLayerVariant> variants = kernels::dense_layer_variants(d, optin);
  REQUIRE(!variants.empty());
  DeviceBuffer y(want.size());
  const ir::HostTensor expected = ir::HostTensor::floats({int64_t(want.size())}, want);
  for (const kernels::DenseLayerVariant& v : variants) {
    const std::string what = v.name + " batch " + std::to_string(k.batch) + " C " + std::to_string(k.C) + " M " +
                             std::to_string(k.M) + " F " + std::to_string(k.F) + " " + std::to_string(k.H) + "x" +
                             std::to_string(k.W) + " gaps " + std::to_string(k.x_gap) + "/" + std::to_string(k.y_gap);
    const std::vector<float> got =
        check_twice(what, y, expected, [&] { kernels::launch_dense_layer(v, dx.get(), y.get(), d, nullptr); });
    // The gaps between the output's images: still the poison.
    bool gaps_poisoned = true;
    for (int n = 0; n < k.batch; ++n) {
      for (int g = 0; g < k.y_gap; ++g) gaps_poisoned = gaps_poisoned && std::isnan(got[size_t(n * y_image + k.F * hw + g)]);
    }
    CHECK_MESSAGE(gaps_poisoned, what << ": wrote between the output's images");
    ran.insert(v.name);
  }
}

}  // namespace

TEST_CASE("dense_layer: every variant against float64, odd sizes, prologues, activations, image strides") {
  std::set<std::string> ran;
  uint32_t seed = 9100;
  const LayerCase cases[] = {
      // DenseNet-BC's layers: BatchNormalization + ReLU, 1x1 to 48 (+ folded BN, ReLU), 3x3 to 12 into the Concat.
      {1, 24, 48, 12, 32, 32, true, ParamAct::Relu, ParamAct::Relu, ParamAct::None, true, false, 0, 0},
      {2, 84, 48, 12, 32, 32, true, ParamAct::Relu, ParamAct::Relu, ParamAct::None, true, false, 12 * 1024, 96 * 1024},
      {1, 120, 48, 12, 16, 16, true, ParamAct::Relu, ParamAct::Relu, ParamAct::None, true, false, 0, 0},
      {3, 132, 48, 12, 8, 8, true, ParamAct::Relu, ParamAct::Relu, ParamAct::None, true, false, 7, 5},
      // Odd sizes and everything else: no prologue, other activations, biases on both, counts not multiples of 4.
      {1, 1, 1, 1, 1, 1, false, ParamAct::None, ParamAct::None, ParamAct::None, false, true, 0, 0},
      {2, 7, 5, 3, 7, 9, true, ParamAct::Clip, ParamAct::Sigmoid, ParamAct::Relu, true, true, 3, 1},
      {3, 33, 17, 13, 31, 33, false, ParamAct::None, ParamAct::Relu, ParamAct::Clip, false, true, 0, 2},
      {1, 31, 9, 6, 33, 1, true, ParamAct::None, ParamAct::Relu, ParamAct::None, true, false, 0, 0},
      {16, 60, 48, 12, 8, 8, true, ParamAct::Relu, ParamAct::Relu, ParamAct::None, true, false, 0, 0},
  };
  for (const LayerCase& k : cases) {
    check_case(k, seed, ran);
    seed += 10;
  }
  for (const std::string& name : kernels::dense_layer_variant_names()) {
    CHECK_MESSAGE(ran.count(name) == 1, "no case ran " << name);
  }
}

TEST_CASE("dense_layer: DenseNet's eighteen bottleneck layers, each one launch where forced, against the CPU") {
  // The transitions' BatchNormalization + 1x1 convolution + average pool are not dense layers.
  check_fused_plans({"densenet_bc", 32, "dense_layer", "dense layer ", 18, {1, 2}, INT64_MAX, 9300});
}

TEST_CASE("dense_layer: declines what it cannot run") {
  kernels::DenseLayerDesc d;
  alignas(16) const float stand_in[4] = {};  // (never read: nothing is launched)
  std::string why;
  CHECK(!kernels::dense_layer_supports(d, &why));
  CHECK(why == "no packed weights");
  d.w1 = d.w2 = stand_in + 1;
  CHECK(!kernels::dense_layer_supports(d, &why));
  CHECK(why == "packed weights not 16-byte aligned");
  d.w1 = d.w2 = stand_in;
  CHECK(kernels::dense_layer_supports(d));
  d.scale = stand_in;
  CHECK(!kernels::dense_layer_supports(d, &why));
  CHECK(why == "a prologue's scale without its shift");
  d.shift = stand_in;
  d.C = 4;
  d.x_image = 3;
  CHECK(!kernels::dense_layer_supports(d, &why));
  CHECK(why == "images closer together than their extent");
  d.x_image = 0;
  d.M = 257;
  CHECK(!kernels::dense_layer_supports(d, &why));
}

}  // namespace cnnrt::testing
