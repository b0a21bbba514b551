// Every variant of the dot family (each output a dot product split over a warp's lanes) against the CPU
// reference backend on random inputs and poisoned outputs (conv_family_check.hpp), and what it declines.
#include <doctest/doctest.h>

#include "conv_family_check.hpp"
#include "conv_layers.hpp"

using namespace cnnrt;
using namespace cnnrt::testing;

TEST_CASE("dot: declines fewer than 16 taps and layers with more than 2^19 outputs") {
  const kernels::ConvFamily* dot = kernels::find_conv_family("dot");
  REQUIRE(dot != nullptr);
  const kernels::DeviceCaps caps = test_device_caps();
  Layer pooled = tc_layer(1, 32, 16, 16, 64, 3, 3, 1, 1, 1, 1, 1);
  pooled.pool = kernels::FusedPool::Max;
  CHECK(dot->reject(describe_layer(pooled), caps).empty());
  CHECK(dot->reject(describe_layer(tc_layer(1, 15, 8, 8, 8, 1, 1, 1, 0, 0, 0, 0)), caps).find("16 taps") !=
        std::string::npos);
  CHECK(dot->reject(describe_layer(tc_layer(1, 16, 8, 8, 8, 1, 1, 1, 0, 0, 0, 0)), caps).empty());
  CHECK(dot->reject(describe_layer(tc_layer(1, 16, 128, 128, 33, 1, 1, 1, 0, 0, 0, 0)), caps).find("2^19") !=
        std::string::npos);
}

TEST_CASE("dot: every variant, odd sizes, strides, dilation, groups, 1-D, long reductions, pools; read through an affine") {
  FamilyCheck dot("dot");
  if (!dot.runs_here()) return;
  uint32_t seed = 4700;
  for (const Layer& L : family_layers("dot")) dot.check(L, seed++);
  // The `pre` variants: the input read through a per-channel affine and activation (DenseNet's BatchNormalization +
  // ReLU in front of a convolution; others), on the same layers: padded (the padding must stay zero, not the
  // activation of the shift), strided, grouped, dilated, 1-D, with residuals.
  const kernels::ParamAct acts[] = {kernels::ParamAct::Relu, kernels::ParamAct::None, kernels::ParamAct::Clip,
                                    kernels::ParamAct::Sigmoid};
  size_t i = 0;
  for (const Layer& L : family_layers("dot")) {
    const kernels::ParamAct act = acts[i++ % 4];
    dot.check_affine(L, seed, act, act == kernels::ParamAct::Clip ? -0.25f : 0.0f, 0.75f);
    seed += 10;
  }
  dot.covered_all();
}

TEST_CASE("dot and pw: the families that read their input through a per-channel affine") {
  const float scale = 1.0f;  // (never read: nothing is launched)
  const std::vector<float> w(32 * 16 * 9, 0.5f);
  // A padded 3x3 layer (dot only: pw takes 1x1 layers) and a 1x1 one (both).
  for (const bool one_by_one : {false, true}) {
    kernels::ConvLayer layer = describe_layer(one_by_one ? tc_layer(1, 32, 8, 8, 16, 1, 1, 1, 0, 0, 0, 0)
                                                         : tc_layer(1, 32, 8, 8, 16, 3, 3, 1, 1, 1, 1, 1));
    layer.in.scale = &scale;
    layer.in.shift = &scale;
    for (const kernels::FamilyCandidates& fc :
         kernels::conv_candidates(layer, test_device_caps(), w.data(), nullptr, nullptr,
                                  [](const std::vector<float>&, const std::string&) { return nullptr; })) {
      const std::string name = fc.family->name();
      CAPTURE(name);
      CAPTURE(one_by_one);
      if (name == "dot" || (name == "pw" && one_by_one)) {
        CHECK(fc.rejected.empty());
        CHECK(!fc.variants.empty());
        for (const kernels::ConvVariant& v : fc.variants) CHECK(v.name.find("_pre") != std::string::npos);
        continue;
      }
      CHECK(fc.variants.empty());
      if (name == "pw") {
        CHECK(fc.rejected == "needs a 1x1 filter");
      } else if (kernels::device_lacks(test_device_caps(), fc.family->needs()).empty()) {
        CHECK(fc.rejected.find("per-channel affine") != std::string::npos);
      }
    }
  }
}
