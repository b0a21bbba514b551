// Every variant of the stem family (few input channels: RGB and single-channel stems, 1-D first layers) against
// the CPU reference backend: odd sizes (1, 7, 31, 33, 1000) and paddings, strides 1 to 4 (unequal too), filters to
// 11x11 and 80 taps, fused max and average pooling, residuals, every kind of activation, random inputs and
// poisoned outputs (conv_family_check.hpp).
#include <doctest/doctest.h>

#include "conv_family_check.hpp"
#include "conv_layers.hpp"

using namespace cnnrt;
using namespace cnnrt::testing;

TEST_CASE("stem: declines groups, many channels, large filters, large strides, dilation, pooled residuals") {
  const kernels::ConvFamily* stem = kernels::find_conv_family("stem");
  REQUIRE(stem != nullptr);
  const kernels::DeviceCaps turing = turing_caps();
  CHECK(kernels::device_lacks(turing, stem->needs()).empty());
  for (const Layer& L : stem_layers()) CHECK(stem->reject(describe_layer(L), turing).empty());
  Layer grouped = tc_layer(1, 4, 16, 16, 8, 3, 3, 1, 1, 1, 1, 1);
  grouped.groups = 2;
  CHECK(stem->reject(describe_layer(grouped), turing) == "grouped convolution");
  CHECK(stem->reject(describe_layer(tc_layer(1, 17, 16, 16, 8, 3, 3, 1, 1, 1, 1, 1)), turing) ==
        "more than 16 input channels");
  CHECK(stem->reject(describe_layer(tc_layer(1, 3, 32, 32, 8, 13, 13, 1, 0, 0, 0, 0)), turing) ==
        "filter larger than 11");
  CHECK(stem->reject(describe_layer(tc_layer(1, 3, 1, 500, 8, 1, 129, 1, 0, 0, 0, 0)), turing) ==
        "filter longer than 128");
  CHECK(stem->reject(describe_layer(tc_layer(1, 3, 32, 32, 8, 3, 3, 5, 0, 0, 0, 0)), turing) == "stride above 4");
  Layer dilated = tc_layer(1, 3, 32, 32, 8, 3, 3, 1, 2, 2, 2, 2);
  dilated.dil = 2;
  CHECK(stem->reject(describe_layer(dilated), turing) == "dilation");
  Layer pooled_residual = tc_layer(1, 3, 32, 32, 8, 3, 3, 1, 1, 1, 1, 1, kernels::ParamAct::Relu, true);
  pooled_residual.pool = kernels::FusedPool::Max;
  CHECK(stem->reject(describe_layer(pooled_residual), turing) == "pooling with residual");
}

TEST_CASE("stem: every variant, odd sizes, strides, large filters, pooling, 1-D") {
  FamilyCheck stem("stem");
  if (!stem.runs_here()) return;
  uint32_t seed = 5200;
  for (const Layer& L : stem_layers()) stem.check(L, seed++);
  stem.covered_all();
}
