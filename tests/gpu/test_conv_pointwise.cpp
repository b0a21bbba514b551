// Every variant of the pw family (1x1 convolutions at stride 1 on the CUDA cores) against the CPU reference
// backend: odd channel and filter counts, planes of 1 to 4000 pixels (quads across images where H*W % 4 != 0),
// groups, residuals and every activation (conv_layers.hpp: pw_layers), random inputs and poisoned outputs
// (conv_family_check.hpp).
#include <doctest/doctest.h>

#include "conv_family_check.hpp"
#include "conv_layers.hpp"

using namespace cnnrt;
using namespace cnnrt::testing;

TEST_CASE("pw: needs nothing beyond sm_75; takes 1x1 layers at stride 1 without padding or pooling") {
  const kernels::ConvFamily* pw = kernels::find_conv_family("pw");
  REQUIRE(pw != nullptr);
  const kernels::DeviceCaps turing = turing_caps();
  CHECK(kernels::device_lacks(turing, pw->needs()).empty());
  for (const Layer& L : pw_layers()) CHECK(pw->reject(describe_layer(L), turing).empty());
  CHECK(pw->reject(describe_layer(tc_layer(1, 8, 8, 8, 8, 3, 3, 1, 1, 1, 1, 1)), turing) == "needs a 1x1 filter");
  CHECK(pw->reject(describe_layer(tc_layer(1, 8, 8, 8, 8, 1, 1, 2, 0, 0, 0, 0)), turing) == "stride other than 1");
  CHECK(pw->reject(describe_layer(tc_layer(1, 8, 7, 7, 8, 1, 1, 1, 1, 1, 1, 1)), turing) == "padding");
  CHECK(pw->reject(describe_layer(tc_layer(1, 257, 8, 8, 8, 1, 1, 1, 0, 0, 0, 0)), turing) ==
        "more than 256 input channels a group");
  Layer pooled = tc_layer(1, 8, 8, 8, 8, 1, 1, 1, 0, 0, 0, 0);
  pooled.pool = kernels::FusedPool::Max;
  CHECK(pw->reject(describe_layer(pooled), turing) == "fused pooling");
}

TEST_CASE("pw: every variant, odd channels and filters, planes of any size, groups, residuals, activations; read through an affine") {
  FamilyCheck pw("pw");
  if (!pw.runs_here()) return;
  uint32_t seed = 7100;
  for (const Layer& L : pw_layers()) pw.check(L, seed++);
  // The `pre` variants: the input read through a per-channel affine and activation (DenseNet's BatchNormalization +
  // ReLU in front of its 1x1 convolutions), every activation of the prologue, on the same layers; every fourth also
  // with an input image stride (NaN between the images).
  const kernels::ParamAct acts[] = {kernels::ParamAct::Relu, kernels::ParamAct::None, kernels::ParamAct::Clip,
                                    kernels::ParamAct::Sigmoid};
  size_t i = 0;
  for (const Layer& L : pw_layers()) {
    const kernels::ParamAct act = acts[i % 4];
    pw.check_affine(L, seed, act, act == kernels::ParamAct::Clip ? -0.25f : 0.0f, 0.75f, 0, i % 4 == 3 ? 5 : 0);
    seed += 10;
    ++i;
  }
  pw.covered_all();
}
