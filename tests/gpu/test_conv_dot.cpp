// Every variant of the dot family (each output a dot product split over a warp's lanes) against the CPU
// reference backend on random inputs and poisoned outputs (conv_family_check.hpp), and what it declines.
#include <doctest/doctest.h>

#include "conv_family_check.hpp"
#include "conv_layers.hpp"

using namespace cnnrt;
using namespace cnnrt::testing;

TEST_CASE("dot: declines fused pooling, fewer than 16 taps and layers with more than 2^19 outputs") {
  const kernels::ConvFamily* dot = kernels::find_conv_family("dot");
  REQUIRE(dot != nullptr);
  const kernels::DeviceCaps caps = test_device_caps();
  Layer pooled = tc_layer(1, 32, 16, 16, 64, 3, 3, 1, 1, 1, 1, 1);
  pooled.pool = kernels::FusedPool::Max;
  CHECK(dot->reject(describe_layer(pooled), caps) == "fused pooling");
  CHECK(dot->reject(describe_layer(tc_layer(1, 15, 8, 8, 8, 1, 1, 1, 0, 0, 0, 0)), caps).find("16 taps") !=
        std::string::npos);
  CHECK(dot->reject(describe_layer(tc_layer(1, 16, 8, 8, 8, 1, 1, 1, 0, 0, 0, 0)), caps).empty());
  CHECK(dot->reject(describe_layer(tc_layer(1, 16, 128, 128, 33, 1, 1, 1, 0, 0, 0, 0)), caps).find("2^19") !=
        std::string::npos);
}

TEST_CASE("dot: every variant, odd sizes, strides, dilation, groups, 1-D, long reductions") {
  FamilyCheck dot("dot");
  if (!dot.runs_here()) return;
  uint32_t seed = 4700;
  for (const Layer& L : family_layers("dot")) dot.check(L, seed++);
  dot.covered_all();
}
