// Every variant of the 3xTF32 tensor-core families of the kernel registry (tc: mma.sync; wgr and wgh: wgmma)
// against the CPU reference backend, at FP32 accuracy (relative error < 1e-5): random inputs (never zeros),
// poisoned outputs, odd sizes (1, 7, 31, 33, 1000), channel and filter counts off the tile sizes, 1x1 to 7x7
// and non-square kernels, strides 1 and 2 (tc: up to 4, unequal, dilated, grouped and 1-D too), symmetric and
// asymmetric paddings, residual adds, every activation, and long same-sign reductions. Each family must accept
// every layer it is given (conv_family_check.hpp), and every variant the registry lists for it must run.
#include <doctest/doctest.h>

#include <string>

#include "conv_family_check.hpp"
#include "conv_test_util.hpp"
#include "gpu_test_util.hpp"

using namespace cnnrt;
using namespace cnnrt::testing;
using kernels::ParamAct;

TEST_CASE("tc: eligibility, from the registry") {
  const kernels::ConvFamily* tc = kernels::find_conv_family("tc");
  REQUIRE(tc != nullptr);
  const kernels::DeviceCaps dev = test_device_caps();
  kernels::ConvLayer L;
  L.g.N = 1; L.g.C = 8; L.g.H = L.g.W = 9; L.g.F = 16; L.g.KH = L.g.KW = 3; L.g.OH = L.g.OW = 7;
  CHECK(tc->reject(L, dev).empty());
  L.e.pool.kind = kernels::FusedPool::Max;
  CHECK(tc->reject(L, dev) == "fused pooling");
  L.e.pool.kind = kernels::FusedPool::None;
  // Groups, dilations and any strides, equal or not, are the same GEMM.
  L.g.groups = 2;
  CHECK(tc->reject(L, dev).empty());
  L.g.groups = 1;
  L.g.dil_h = L.g.dil_w = 2;
  CHECK(tc->reject(L, dev).empty());
  L.g.dil_h = L.g.dil_w = 1;
  L.g.stride_h = 3;
  L.g.stride_w = 2;
  CHECK(tc->reject(L, dev).empty());
  // ReLU layers get the ReLU instantiations too; other activations only the run-time ones.
  L.g.stride_h = L.g.stride_w = 1;
  L.e.param_act = ParamAct::Relu;
  const size_t relu_variants = tc->variants(L, dev, {}).size();
  L.e.param_act = ParamAct::Tanh;
  CHECK(tc->variants(L, dev, {}).size() < relu_variants);
  // A device without TF32 mma.sync (compute capability 7.5) is told why.
  kernels::DeviceCaps turing = dev;
  turing.cc_major = 7;
  turing.cc_minor = 5;
  CHECK(kernels::device_lacks(turing, tc->needs()).find("8.0") != std::string::npos);
}

TEST_CASE("tc: every variant, odd sizes, channels, kernels, strides, paddings, long reductions") {
  FamilyCheck tc("tc");
  if (!tc.runs_here()) return;
  uint32_t seed = 3100;
  for (const Layer& L : tc_layers()) tc.check(L, seed++);
  tc.covered_all();
}

namespace {

void check_wg(const char* family, uint32_t seed) {
  FamilyCheck fc(family);
  if (!fc.runs_here()) return;
  for (const Layer& L : family_layers(family)) fc.check(L, seed++);
  fc.covered_all();
}

}  // namespace

TEST_CASE("wgr: every variant, odd sizes, filters off the tiles, strides, paddings, long reductions") {
  check_wg("wgr", 3700);
}

TEST_CASE("wgh: every variant, odd sizes, filters off the tiles, paddings, long reductions") { check_wg("wgh", 3900); }

TEST_CASE("wgr and wgh: eligibility, from the registry") {
  const kernels::DeviceCaps dev = test_device_caps();
  kernels::ConvLayer L;
  L.g.N = 1; L.g.C = 48; L.g.H = L.g.W = 9; L.g.F = 16; L.g.KH = L.g.KW = 3; L.g.OH = L.g.OW = 7;
  for (const char* name : {"wgr", "wgh"}) {
    const kernels::ConvFamily* f = kernels::find_conv_family(name);
    REQUIRE(f != nullptr);
    L.g.C = 48;  // wgr: two halves of 16 channels a stage; wgh: whole 32-channel groups only
    CHECK(f->reject(L, dev) == (std::string(name) == "wgr" ? "" : "input channels not a multiple of 32"));
    L.g.C = 40;
    CHECK(f->reject(L, dev) == "input channels not a multiple of 16");
    kernels::DeviceCaps ampere = dev;
    ampere.cc_major = 8;
    ampere.cc_minor = 0;
    CHECK_FALSE(kernels::device_lacks(ampere, f->needs()).empty());
    kernels::DeviceCaps blackwell = dev;
    blackwell.cc_major = 10;
    blackwell.cc_minor = 0;
    CHECK_FALSE(kernels::device_lacks(blackwell, f->needs()).empty());  // sm_90a code runs on 9.0 only
  }
}
