// Every variant of the igemm family (implicit GEMM on the CUDA cores, the fallback that needs nothing of the
// device) against the CPU reference backend, at FP32 accuracy: the tc family's layers (odd sizes 1, 7, 31,
// 33, 1000, strides 1 to 4 and unequal, dilation, groups, 1-D, 7x7 and 11x11 stems, residual adds, every
// activation, long reductions), random inputs and poisoned outputs (conv_family_check.hpp).
#include <doctest/doctest.h>

#include "conv_family_check.hpp"
#include "conv_layers.hpp"

using namespace cnnrt;
using namespace cnnrt::testing;

TEST_CASE("igemm: needs nothing beyond sm_75 and accepts every unpooled geometry") {
  const kernels::ConvFamily* igemm = kernels::find_conv_family("igemm");
  REQUIRE(igemm != nullptr);
  const kernels::DeviceCaps turing = turing_caps();
  CHECK(kernels::device_lacks(turing, igemm->needs()).empty());
  for (const Layer& L : tc_layers()) CHECK(igemm->reject(describe_layer(L), turing).empty());
  Layer pooled = tc_layer(2, 32, 16, 16, 64, 3, 3, 1, 1, 1, 1, 1);
  pooled.pool = kernels::FusedPool::Max;
  CHECK(igemm->reject(describe_layer(pooled), turing) == "fused pooling");
}

TEST_CASE("igemm: every variant, odd sizes, strides, dilation, groups, 1-D, long reductions") {
  FamilyCheck igemm("igemm");
  if (!igemm.runs_here()) return;
  uint32_t seed = 4100;
  for (const Layer& L : tc_layers()) igemm.check(L, seed++);
  igemm.covered_all();
}
