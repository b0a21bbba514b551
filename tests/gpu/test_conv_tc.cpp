// Every variant of the 3xTF32 tensor-core convolution (kernels/conv2d_tc.cuh) against the CPU reference
// backend, at FP32 accuracy (relative error < 1e-5): random inputs (never zeros), poisoned outputs, odd
// sizes (1, 7, 31, 33, 1000), channel and filter counts off the tile sizes, 1x1 to 7x7 and non-square
// kernels, strides 1 and 2, symmetric and asymmetric paddings, residual adds and every activation.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "conv_test_util.hpp"
#include "gpu_test_util.hpp"
#include "kernel_test_util.hpp"
#include "kernels/conv2d_tc.cuh"
#include "kernels/conv2d_wg.cuh"

using namespace cnnrt;
using namespace cnnrt::testing;
using kernels::ConvGeometry;
using kernels::Epilogue;

namespace {

struct TcLayer {
  int N, C, H, W, F, KH, KW, stride, pad_top, pad_left, pad_bottom, pad_right;
  kernels::ParamAct act = kernels::ParamAct::None;
  bool residual = false;
  bool positive = false;  // inputs and weights in [0, 1): sums keep their sign (worst case for rounding bias)
};

int tc_variants_checked = 0;
int wg_variants_checked = 0;

// The device's compute capability (the wgmma kernels run on 9.0 only).
std::pair<int, int> device_cc() {
  int major = 0, minor = 0;
  GPU_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
  GPU_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0));
  return {major, minor};
}

void check_tc_layer(const TcLayer& L, uint32_t seed, bool wg_only = false) {
  const float lo = L.positive ? 0.0f : -1.0f;
  auto x = ir::HostTensor::floats({L.N, L.C, L.H, L.W}, random_floats(size_t(L.N) * L.C * L.H * L.W, seed, lo));
  auto w = ir::HostTensor::floats({L.F, L.C, L.KH, L.KW},
                                  random_floats(size_t(L.F) * L.C * L.KH * L.KW, seed + 1, lo));
  auto b = ir::HostTensor::floats({L.F}, random_floats(size_t(L.F), seed + 2));

  const ConvCase conv = make_conv_case(L.N, L.C, L.H, L.W, L.F, L.KH, L.KW, L.stride, L.pad_top, L.pad_left,
                                       L.pad_bottom, L.pad_right, 1);
  const ConvGeometry& g = conv.g;

  // Reference: CPU Conv (with bias), + residual, activation.
  ir::HostTensor ref = cpu_reference("Conv", conv.attrs, {&x, &w, &b}, {L.N, L.F, g.OH, g.OW});
  ir::HostTensor res;
  if (L.residual) res = ir::HostTensor::floats(ref.shape(), random_floats(size_t(ref.numel()), seed + 3));
  apply_test_epilogue(ref, L.residual ? &res : nullptr, L.act);

  DeviceBuffer dx(x.float_values()), db(b.float_values());
  DeviceBuffer dres(L.residual ? res.float_values() : std::vector<float>{0.0f});
  DeviceBuffer packed(kernels::pack_tc_filters(w.f32(), L.F, L.C, L.KH, L.KW));
  Epilogue e;
  e.bias = db.get();
  e.residual = L.residual ? dres.get() : nullptr;
  set_test_activation(e, L.act);

  const std::string where = "N" + std::to_string(L.N) + " C" + std::to_string(L.C) + " " + std::to_string(L.H) + "x" +
                            std::to_string(L.W) + " F" + std::to_string(L.F) + " K" + std::to_string(L.KH) + "x" +
                            std::to_string(L.KW) + " s" + std::to_string(L.stride) + " pads " +
                            std::to_string(L.pad_top) + "," + std::to_string(L.pad_left) + "," +
                            std::to_string(L.pad_bottom) + "," + std::to_string(L.pad_right) +
                            (L.residual ? " residual" : "") + (L.positive ? " positive" : "");
  auto check_all = [&](const std::vector<kernels::TcVariant>& variants, const DeviceBuffer& weights, int* count) {
    for (const auto& variant : variants) {
      DeviceBuffer y(static_cast<size_t>(ref.numel()));  // poisoned (NaN) until written
      variant.launch(dx.get(), y.get(), weights.get(), g, e, nullptr);
      GPU_CHECK(cudaGetLastError());
      const double err = relative_error(y.download(), ref.float_values());
      CHECK_MESSAGE(err < 1e-5, variant.name << " @ " << where << ": relative error " << err);
      ++*count;
    }
  };
  std::string why;
  if (!wg_only) {
    REQUIRE_MESSAGE(kernels::conv2d_tc_supports(g, e, &why), where << ": " << why);
    const auto variants = kernels::conv2d_tc_variants(g, e, 132);
    REQUIRE(!variants.empty());
    check_all(variants, packed, &tc_variants_checked);
  }
  // The wgmma kernels too, where the layer (C a multiple of 32) and the device (9.0) allow.
  const auto [major, minor] = device_cc();
  if (kernels::conv2d_wg_supports(g, e, major, minor, &why)) {
    DeviceBuffer packed_wg(kernels::pack_wg_filters(w.f32(), L.F, L.C, L.KH, L.KW));
    const auto variants = kernels::conv2d_wg_variants(g, e, 132, major, minor);
    REQUIRE(!variants.empty());
    check_all(variants, packed_wg, &wg_variants_checked);
  } else if (wg_only) {
    FAIL_CHECK(where << ": wgmma kernels expected: " << why);
  }
}

}  // namespace

TEST_CASE("conv2d_tc: eligibility") {
  ConvGeometry g;
  g.N = 1; g.C = 8; g.H = g.W = 9; g.F = 16; g.KH = g.KW = 3; g.OH = g.OW = 7;
  Epilogue e;
  std::string why;
  CHECK(kernels::conv2d_tc_supports(g, e, &why));
  e.pool.kind = kernels::FusedPool::Max;
  CHECK_FALSE(kernels::conv2d_tc_supports(g, e, &why));
  CHECK(kernels::conv2d_tc_variants(g, e, 132).empty());
  e.pool.kind = kernels::FusedPool::None;
  g.groups = 2;
  CHECK_FALSE(kernels::conv2d_tc_supports(g, e, &why));
  g.groups = 1;
  g.dil_h = g.dil_w = 2;
  CHECK_FALSE(kernels::conv2d_tc_supports(g, e, &why));
  g.dil_h = g.dil_w = 1;
  g.stride_h = g.stride_w = 3;
  CHECK_FALSE(kernels::conv2d_tc_supports(g, e, &why));
  g.stride_h = 1;
  g.stride_w = 2;
  CHECK_FALSE(kernels::conv2d_tc_supports(g, e, &why));
  // ReLU layers get the ReLU instantiations too; other activations only the run-time ones.
  g.stride_w = 1;
  e.param_act = kernels::ParamAct::Relu;
  const size_t relu_variants = kernels::conv2d_tc_variants(g, e, 132).size();
  e.param_act = kernels::ParamAct::Tanh;
  CHECK(kernels::conv2d_tc_variants(g, e, 132).size() < relu_variants);
}

TEST_CASE("conv2d_tc: every variant, odd sizes, channels, kernels, strides, paddings") {
  uint32_t seed = 3100;
  using kernels::ParamAct;
  for (int K : {1, 3, 5}) {
    const int pad = K / 2;
    for (int size : {1, 7, 31, 33}) {
      check_tc_layer({1, 7, size, size, 9, K, K, 1, pad, pad, pad, pad}, seed++);
      check_tc_layer({2, 32, size, size + 3, 64, K, K, 1, pad, pad, pad, pad, ParamAct::Relu, true}, seed++);
      // Asymmetric: no left pad, a double right pad (keeps a 1x1 input's output non-empty).
      check_tc_layer({3, 33, size, size, 31, K, K, 2, pad, 0, pad, 2 * pad, ParamAct::LeakyRelu}, seed++);
    }
  }
  check_tc_layer({1, 1, 31, 1000, 31, 5, 5, 1, 2, 2, 2, 2, ParamAct::Relu, true}, seed++);
  check_tc_layer({1, 3, 33, 33, 1, 3, 3, 1, 1, 1, 1, 1}, seed++);
  check_tc_layer({2, 3, 33, 31, 64, 7, 7, 2, 3, 3, 3, 3, ParamAct::Relu}, seed++);
  check_tc_layer({1, 64, 31, 31, 128, 3, 1, 2, 1, 0, 1, 0, ParamAct::Relu}, seed++);
  check_tc_layer({3, 7, 9, 9, 9, 2, 3, 1, 0, 1, 1, 1, ParamAct::None, true}, seed++);
  check_tc_layer({1, 64, 7, 7, 1000, 1, 1, 1, 0, 0, 0, 0, ParamAct::Clip}, seed++);
  check_tc_layer({2, 256, 14, 14, 128, 3, 3, 1, 1, 1, 1, 1, ParamAct::Relu, true}, seed++);
  check_tc_layer({1, 32, 15, 17, 33, 3, 3, 2, 1, 1, 1, 1, ParamAct::Sigmoid}, seed++);
  check_tc_layer({2, 16, 16, 16, 24, 5, 5, 1, 2, 2, 2, 2, ParamAct::Tanh, true}, seed++);
  MESSAGE(tc_variants_checked << " tc variant checks so far");
}

TEST_CASE("conv2d_tc: long reductions keep FP32 accuracy (C*KH*KW up to 4608, same-sign sums)") {
  uint32_t seed = 3500;
  using kernels::ParamAct;
  TcLayer deep{1, 512, 7, 7, 64, 3, 3, 1, 1, 1, 1, 1, ParamAct::None};
  check_tc_layer(deep, seed++);
  deep.positive = true;
  check_tc_layer(deep, seed++);
  check_tc_layer({2, 256, 9, 9, 40, 3, 3, 1, 1, 1, 1, 1, ParamAct::Relu, true, true}, seed++);
  MESSAGE(tc_variants_checked << " tc variant checks in all");
}

TEST_CASE("conv2d_wg: every variant, odd sizes, filters off the tiles, strides, paddings, long reductions") {
  const auto [major, minor] = device_cc();
  ConvGeometry g;
  g.N = 1; g.C = 32; g.H = g.W = 9; g.F = 16; g.KH = g.KW = 3; g.OH = g.OW = 7;
  std::string why;
  if (!kernels::conv2d_wg_supports(g, Epilogue{}, major, minor, &why)) {
    MESSAGE("SKIPPED: wgmma kernels need a device of compute capability 9.0 (" << why << ")");
    return;
  }
  g.C = 48;
  CHECK_FALSE(kernels::conv2d_wg_supports(g, Epilogue{}, major, minor, &why));  // C not a multiple of 32
  CHECK(kernels::conv2d_wg_variants(g, Epilogue{}, 132, major, minor).empty());

  uint32_t seed = 3700;
  using kernels::ParamAct;
  for (int K : {1, 3, 5}) {
    const int pad = K / 2;
    for (int size : {1, 7, 31, 33}) {
      check_tc_layer({1, 32, size, size, 9, K, K, 1, pad, pad, pad, pad}, seed++, true);
      check_tc_layer({2, 64, size, size + 3, 64, K, K, 1, pad, pad, pad, pad, ParamAct::Relu, true}, seed++, true);
      check_tc_layer({3, 32, size, size, 130, K, K, 2, pad, 0, pad, 2 * pad, ParamAct::LeakyRelu}, seed++, true);
    }
  }
  check_tc_layer({1, 32, 31, 1000, 33, 5, 5, 1, 2, 2, 2, 2, ParamAct::Relu, true}, seed++, true);
  check_tc_layer({1, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, 1, ParamAct::Relu}, seed++, true);
  check_tc_layer({2, 128, 28, 28, 128, 5, 5, 1, 2, 2, 2, 2, ParamAct::Relu}, seed++, true);
  check_tc_layer({1, 32, 33, 31, 200, 2, 3, 1, 0, 1, 1, 1, ParamAct::Clip, true}, seed++, true);
  check_tc_layer({3, 96, 7, 7, 1, 7, 7, 1, 3, 3, 3, 3, ParamAct::Tanh}, seed++, true);
  TcLayer deep{1, 512, 7, 7, 64, 3, 3, 1, 1, 1, 1, 1, ParamAct::None};
  deep.positive = true;
  check_tc_layer(deep, seed++, true);
  check_tc_layer({2, 256, 14, 14, 256, 5, 5, 1, 2, 2, 2, 2, ParamAct::Relu, true, true}, seed++, true);
  MESSAGE(wg_variants_checked << " wg variant checks in all");
}
