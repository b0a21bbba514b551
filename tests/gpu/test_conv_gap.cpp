// Every variant of the gap family (a 1x1 convolution, its activation and a global pooling in one launch, the
// channels split over a thread-block cluster) against the CPU reference backend on random inputs and poisoned
// outputs (conv_family_check.hpp): average and max pools, odd sizes (1, 7, 13, 31, 33 pixels; 1 and 1000 channels
// and filters), every activation kind, several images; and what it declines.
#include <doctest/doctest.h>

#include "conv_family_check.hpp"
#include "conv_layers.hpp"

using namespace cnnrt;
using namespace cnnrt::testing;

TEST_CASE("gap: needs nothing beyond sm_75 for its unclustered variants; declines what is not a 1x1 + global pool") {
  const kernels::ConvFamily* gap = kernels::find_conv_family("gap");
  REQUIRE(gap != nullptr);
  const kernels::DeviceCaps turing = turing_caps();
  CHECK(kernels::device_lacks(turing, gap->needs()).empty());
  using kernels::FusedPool;
  using kernels::ParamAct;
  CHECK(gap->reject(describe_layer(gap_layer(1, 64, 13, 13, 100, ParamAct::Relu, FusedPool::Avg)), turing).empty());
  CHECK(gap->reject(describe_layer(tc_layer(1, 32, 8, 8, 16, 1, 1, 1, 0, 0, 0, 0)), turing) ==
        "no global pooling after it");
  Layer windowed = tc_layer(1, 32, 8, 8, 16, 1, 1, 1, 0, 0, 0, 0);
  windowed.pool = FusedPool::Max;  // 2x2/2
  CHECK(gap->reject(describe_layer(windowed), turing) == "a pooling that is not global");
  Layer k3 = gap_layer(1, 32, 8, 8, 16, ParamAct::Relu, FusedPool::Avg);
  k3.K = 3;
  k3.kw = 3;
  k3.pad_top = k3.pad_left = k3.pad_bottom = k3.pad_right = 1;
  CHECK(gap->reject(describe_layer(k3), turing) == "not a 1x1 convolution of stride 1, no padding, one group");
  // A map whose one rank's channels cannot fit shared memory without clusters (Turing: 64 KB a block).
  CHECK(gap->reject(describe_layer(gap_layer(1, 512, 32, 32, 8, ParamAct::None, FusedPool::Avg)), turing) ==
        "a block's channels exceed shared memory");
}

TEST_CASE("gap: every variant, average and max pools, odd sizes, every activation, several images") {
  FamilyCheck gap("gap");
  if (!gap.runs_here()) return;
  uint32_t seed = 5200;
  for (const Layer& L : gap_layers()) gap.check(L, seed++);
  gap.covered_all();
}
