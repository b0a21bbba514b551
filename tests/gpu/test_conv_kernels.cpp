// Every instantiated variant of the fast convolution kernels (single-input-channel, general,
// depthwise) against the CPU reference backend: random inputs (never zeros), poisoned outputs, odd sizes
// (1, 7, 31, 33, 1000), paddings, strides, activations, residual adds and fused pooling.
#include <doctest/doctest.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "conv_test_util.hpp"
#include "gpu_test_util.hpp"
#include "kernel_test_util.hpp"
#include "ir/window.hpp"
#include "kernels/conv2d_c1.cuh"
#include "kernels/conv2d_depthwise.cuh"
#include "kernels/conv2d_general.cuh"
#include "kernels/conv2d_small.cuh"

using namespace cnnrt;
using namespace cnnrt::testing;
using kernels::ConvGeometry;
using kernels::Epilogue;

namespace {

using Launch = std::function<void(const float* x, float* y, const Epilogue& e)>;

// Runs one variant on poisoned output and compares with the reference.
void check_variant(const std::string& name, const Reference& ref, const DeviceBuffer& x, const float* residual,
                   const Launch& launch) {
  INFO(name);
  note_check_point(name);
  DeviceBuffer y(static_cast<size_t>(ref.output.numel()));  // poisoned (NaN) until written
  Epilogue e = ref.e;
  e.residual = residual;
  launch(x.get(), y.get(), e);
  GPU_CHECK(cudaGetLastError());
  const std::vector<float> got = y.download();
  const double err = relative_error(got, ref.output.float_values());
  CHECK_MESSAGE(err < 1e-5, name << ": relative error " << err);
}

int variants_checked = 0;
int stream_variants_checked = 0;  // the single-filter streaming variants among them
int small_variants_checked = 0;   // the small-map variants among them

void check_layer(const Layer& L, uint32_t seed) {
  const int64_t cpg = L.C / L.groups;
  auto x = ir::HostTensor::floats({L.N, L.C, L.H, L.W}, random_floats(size_t(L.N) * L.C * L.H * L.W, seed));
  auto w = ir::HostTensor::floats({L.F, cpg, L.K, L.K}, random_floats(size_t(L.F) * cpg * L.K * L.K, seed + 1));
  auto b = ir::HostTensor::floats({L.F}, random_floats(size_t(L.F), seed + 2));
  // The residual has the conv output's shape: compute it once without one to learn the shape.
  Layer plain = L;
  plain.residual = false;
  plain.pool = kernels::FusedPool::None;
  const Reference shape_ref = reference(plain, x, w, b, nullptr);
  ir::HostTensor res;
  if (L.residual) res = ir::HostTensor::floats(shape_ref.output.shape(), random_floats(size_t(shape_ref.output.numel()), seed + 3));
  const Reference ref = reference(L, x, w, b, L.residual ? &res : nullptr);

  DeviceBuffer dx(x.float_values()), dw(w.float_values()), db(b.float_values());
  DeviceBuffer dres(L.residual ? res.float_values() : std::vector<float>{0.0f});
  const float* residual = L.residual ? dres.get() : nullptr;
  Reference with_bias = ref;
  with_bias.e.bias = db.get();
  const std::string where = "N" + std::to_string(L.N) + " C" + std::to_string(L.C) + " " + std::to_string(L.H) + "x" +
                            std::to_string(L.W) + " F" + std::to_string(L.F) + " K" + std::to_string(L.K) + " s" +
                            std::to_string(L.stride) + " pads " + std::to_string(L.pad_top) + "," +
                            std::to_string(L.pad_left) + "," + std::to_string(L.pad_bottom) + "," +
                            std::to_string(L.pad_right) + " g" + std::to_string(L.groups);

  kernels::C1Filters filters;
  DeviceBuffer smem_filters(std::vector<float>{0.0f});
  if (kernels::conv2d_c1_supports(ref.g, with_bias.e)) {
    kernels::pack_c1_filters(w.f32(), b.f32(), L.F, L.K, L.K, &filters);
    smem_filters = DeviceBuffer(kernels::pack_c1_smem_filters(w.f32(), b.f32(), L.F, L.K));
  }
  for (const auto& v : kernels::conv2d_c1_variants(ref.g, with_bias.e)) {
    check_variant(v.name + " @ " + where, with_bias, dx, residual, [&](const float* xp, float* yp, const Epilogue& e) {
      v.launch(xp, yp, ref.g, e, filters, smem_filters.get(), nullptr);
    });
    ++variants_checked;
    if (v.name.find("_stream_") != std::string::npos) ++stream_variants_checked;
  }
  const bool general = kernels::conv2d_general_supports(ref.g, with_bias.e);
  const bool small = kernels::conv2d_small_supports(ref.g, with_bias.e);
  DeviceBuffer packed(general || small ? kernels::pack_general_filters(w.f32(), L.F, L.C, L.K, L.K)
                                       : std::vector<float>{0.0f});
  for (const auto& v : kernels::conv2d_small_variants(ref.g, with_bias.e, 132)) {
    check_variant(v.name + " @ " + where, with_bias, dx, residual, [&](const float* xp, float* yp, const Epilogue& e) {
      v.launch(xp, yp, packed.get(), ref.g, e, v.config, nullptr);
    });
    ++variants_checked;
    ++small_variants_checked;
  }
  if (general) {
    for (const auto& v : kernels::conv2d_general_variants(ref.g, with_bias.e, 132)) {
      check_variant(v.name + " @ " + where, with_bias, dx, residual, [&](const float* xp, float* yp, const Epilogue& e) {
        v.launch(xp, yp, packed.get(), ref.g, e, v.split, nullptr);
      });
      ++variants_checked;
    }
  }
  for (const auto& v : kernels::conv2d_depthwise_variants(ref.g, with_bias.e)) {
    check_variant(v.name + " @ " + where, with_bias, dx, residual, [&](const float* xp, float* yp, const Epilogue& e) {
      v.launch(xp, yp, dw.get(), ref.g, e, nullptr);
    });
    ++variants_checked;
  }
}

}  // namespace

TEST_CASE("conv2d_c1: every variant, odd sizes, paddings, strides, activations") {
  uint32_t seed = 100;
  for (int K : {1, 3, 5, 2, 7}) {
    for (int size : {1, 7, 31, 33}) {
      for (int F : {1, 3, 8, 17, 32}) {  // 17: a partial last filter group (the _fg variants)
        const int pad = K / 2;
        check_layer({1, 1, size, size + 2, F, K, 1, pad, pad, pad, pad, 1}, seed++);
        // Asymmetric padding (top/right only), where the padded extent still holds one window.
        if (size + pad >= K) check_layer({2, 1, size, size, F, K, 2, pad, 0, 0, pad, 1, kernels::ParamAct::Relu}, seed++);
      }
    }
  }
  check_layer({1, 1, 1000, 33, 8, 5, 1, 2, 2, 2, 2, 1, kernels::ParamAct::Relu}, seed++);
  check_layer({1, 1, 31, 1000, 32, 3, 1, 1, 1, 1, 1, 1}, seed++);
  // Stride 1 with ReLU and more filters than one group holds.
  check_layer({2, 1, 33, 70, 32, 5, 1, 2, 2, 2, 2, 1, kernels::ParamAct::Relu}, seed++);
  check_layer({1, 1, 67, 31, 17, 3, 1, 1, 0, 1, 0, 1, kernels::ParamAct::Relu}, seed++);
  for (auto act : {kernels::ParamAct::LeakyRelu, kernels::ParamAct::Clip, kernels::ParamAct::Sigmoid, kernels::ParamAct::Tanh}) {
    check_layer({2, 1, 33, 31, 8, 3, 1, 1, 1, 1, 1, 1, act}, seed++);
  }
  Layer res{2, 1, 31, 33, 8, 5, 1, 2, 2, 2, 2, 1, kernels::ParamAct::Relu, true};
  check_layer(res, seed++);
  // A residual with more filters than one group holds (the _fg tiles offset it by their first filter).
  check_layer({2, 1, 33, 35, 32, 5, 1, 2, 2, 2, 2, 1, kernels::ParamAct::Relu, true}, seed++);
  check_layer({1, 1, 31, 9, 17, 3, 1, 1, 1, 1, 1, 1, kernels::ParamAct::None, true}, seed++);
  // Output widths a multiple of 4: the tiles' stores without per-filter checks (rows inside the image and a
  // full group of filters), next to tiles cut by the right and bottom edges and a short last filter group.
  for (int K : {1, 3, 5}) {
    for (int F : {3, 8, 17, 32}) {
      const auto act = F % 2 ? kernels::ParamAct::Relu : kernels::ParamAct::None;
      check_layer({2, 1, 37, 68, F, K, 1, K / 2, K / 2, K / 2, K / 2, 1, act}, seed++);
    }
  }
  MESSAGE(variants_checked << " variant checks so far");
}

// The single-filter streaming kernel needs W % 4 == 0 and left padding (K - 1) / 2; the sizes above rarely
// have both. Odd heights (chunks of rows that end early), strips that end inside the image, the right and
// bottom padding free (outputs narrower than the input: the scalar stores), residual, and batch 2.
TEST_CASE("conv2d_c1: single-filter streaming variants, widths a multiple of 4, odd heights, paddings") {
  uint32_t seed = 300;
  const int before = stream_variants_checked;
  for (int K : {1, 3, 5}) {
    const int P = (K - 1) / 2;
    for (int H : {1, 7, 31, 33}) {
      for (int W : {4, 132, 260}) {
        check_layer({2, 1, H, W, 1, K, 1, P, P, P, P, 1}, seed++);
        check_layer({1, 1, H, W, 1, K, 1, 0, P, K - 1, 0, 1, kernels::ParamAct::Relu}, seed++);
      }
    }
    check_layer({1, 1, 1000, 132, 1, K, 1, P, P, P, P, 1, kernels::ParamAct::Relu, true}, seed++);
    check_layer({1, 1, 33, 1000, 1, K, 1, P, P, P + 1, P + 3, 1}, seed++);
  }
  check_layer({1, 1, 1000, 1000, 1, 5, 1, 2, 2, 2, 2, 1, kernels::ParamAct::Relu}, seed++);
  // 3 K x 4 H x 3 W x 2 cases x (at least one row count each), and more: none of them may be missing.
  CHECK(stream_variants_checked - before >= 3 * 4 * 3 * 2);
  MESSAGE((stream_variants_checked - before) << " streaming variant checks");
}

// Buffers at an offset that is not a multiple of 4 floats (a caller's batch packed in one allocation): every
// c1 variant, the streaming ones (float4 loads: they hand such an input to the tiled kernel) among them, and
// the float4 stores of store_four, which must fall back to single floats there.
TEST_CASE("conv2d_c1: every variant with input and output 4 bytes past 16-byte alignment") {
  int checked = 0, streaming = 0;
  uint32_t seed = 77;
  for (int K : {1, 3, 5}) {
    const int P = (K - 1) / 2;
    const Layer L{1, 1, 33, 132, 1, K, 1, P, P, P, P, 1, kernels::ParamAct::Relu};
    auto x = ir::HostTensor::floats({1, 1, L.H, L.W}, random_floats(size_t(L.H) * L.W, seed++));
    auto w = ir::HostTensor::floats({1, 1, K, K}, random_floats(size_t(K) * K, seed++));
    auto b = ir::HostTensor::floats({1}, random_floats(1, seed++));
    Reference ref = reference(L, x, w, b, nullptr);
    std::vector<float> shifted(x.float_values().size() + 1, 1.0f);
    std::copy(x.float_values().begin(), x.float_values().end(), shifted.begin() + 1);
    DeviceBuffer dx(shifted), db(b.float_values());
    ref.e.bias = db.get();
    kernels::C1Filters filters;
    kernels::pack_c1_filters(w.f32(), b.f32(), 1, K, K, &filters);
    DeviceBuffer packed(kernels::pack_c1_smem_filters(w.f32(), b.f32(), 1, K));
    for (const auto& v : kernels::conv2d_c1_variants(ref.g, ref.e)) {
      INFO(v.name);
      DeviceBuffer y(static_cast<size_t>(ref.output.numel()) + 1);  // poisoned
      v.launch(dx.get() + 1, y.get() + 1, ref.g, ref.e, filters, packed.get(), nullptr);
      GPU_CHECK(cudaGetLastError());
      const std::vector<float> all = y.download();
      const std::vector<float> got(all.begin() + 1, all.end());
      CHECK(relative_error(got, ref.output.float_values()) < 1e-5);
      ++checked;
      if (v.name.find("_stream_") != std::string::npos) ++streaming;
    }
  }
  CHECK(streaming >= 3);
  MESSAGE(checked << " misaligned variant checks");
}

TEST_CASE("conv2d_c1: fused max and average pooling, overlapping and ceil_mode windows") {
  uint32_t seed = 500;
  // LeNet conv1: 28x28, 1->8, 5x5 pad 2, 2x2/2 max pool.
  Layer lenet{3, 1, 28, 28, 8, 5, 1, 2, 2, 2, 2, 1, kernels::ParamAct::Relu, false, kernels::FusedPool::Max, 2, 2};
  check_layer(lenet, seed++);
  for (int size : {7, 31, 33}) {
    for (auto pool : {kernels::FusedPool::Max, kernels::FusedPool::Avg}) {
      check_layer({2, 1, size, size, 8, 3, 1, 1, 1, 1, 1, 1, kernels::ParamAct::Relu, false, pool, 3, 2, 1, true}, seed++);
      check_layer({1, 1, size, size + 4, 32, 5, 1, 2, 2, 2, 2, 1, kernels::ParamAct::Tanh, false, pool, 3, 3}, seed++);
      // LeNet's first layer at other sizes, and 6 filters: a partial last group of the _fg4 tile.
      check_layer({1, 1, size, size, 8, 5, 1, 2, 2, 2, 2, 1, kernels::ParamAct::Relu, false, pool, 2, 2}, seed++);
      check_layer({2, 1, size, size + 1, 6, 5, 1, 2, 2, 2, 2, 1, kernels::ParamAct::Relu, false, pool, 2, 2}, seed++);
    }
  }
}

// Three test cases per filter size (odd sizes; wide layers and splits; 256 channels), so each runs in its
// own process: compute-sanitizer's racecheck takes minutes over each of them.
static void check_general_sizes(int K, uint32_t seed) {
  const int pad = K / 2;
  for (int size : {1, 7, 14, 33}) {
    check_layer({1, 7, size, size, 9, K, 1, pad, pad, pad, pad, 1}, seed++);
    check_layer({2, 32, size, size + 3, 64, K, 1, pad, pad, pad, pad, 1, kernels::ParamAct::Relu}, seed++);
    check_layer({1, 33, size, size, 31, K, 2, pad, pad, pad, pad, 1, kernels::ParamAct::Relu}, seed++);
  }
  MESSAGE(variants_checked << " variant checks so far");
}

static void check_general_256(int K, uint32_t seed) {
  const int pad = K / 2;
  check_layer({1, 256, 14, 14, 256, K, 1, pad, pad, pad, pad, 1}, seed++);
  MESSAGE(variants_checked << " variant checks so far");
}

static void check_general_wide(int K, uint32_t seed) {
  const int pad = K / 2;
  check_layer({2, 64, 31, 31, 128, K, 1, pad, pad, pad, pad, 1, kernels::ParamAct::Clip, true}, seed++);
  // 70 channels over a split of 16: 8 channels a rank, so ranks 9 to 15 reduce nothing.
  check_layer({1, 70, 9, 9, 64, K, 1, pad, pad, pad, pad, 1, kernels::ParamAct::Relu}, seed++);
  MESSAGE(variants_checked << " variant checks so far");
}

TEST_CASE("conv2d_general: every variant, odd sizes, channels, strides, 1x1") { check_general_sizes(1, 900); }
TEST_CASE("conv2d_general: every variant, odd sizes, channels, strides, 3x3") { check_general_sizes(3, 920); }
TEST_CASE("conv2d_general: every variant, odd sizes, channels, strides, 5x5") { check_general_sizes(5, 940); }
TEST_CASE("conv2d_general: every variant, wide layers and splits up to 16, 1x1") { check_general_wide(1, 960); }
TEST_CASE("conv2d_general: every variant, wide layers and splits up to 16, 3x3") { check_general_wide(3, 970); }
TEST_CASE("conv2d_general: every variant, wide layers and splits up to 16, 5x5") { check_general_wide(5, 980); }
TEST_CASE("conv2d_general: every variant, 256 channels and filters at 14x14, 1x1") { check_general_256(1, 990); }
TEST_CASE("conv2d_general: every variant, 256 channels and filters at 14x14, 3x3") { check_general_256(3, 995); }
TEST_CASE("conv2d_general: every variant, 256 channels and filters at 14x14, 5x5") { check_general_256(5, 999); }

TEST_CASE("conv2d_general: fused pooling (LeNet conv2: 8->16, 5x5, 14x14, 3x3/3 max)") {
  uint32_t seed = 1300;
  check_layer({4, 8, 14, 14, 16, 5, 1, 2, 2, 2, 2, 1, kernels::ParamAct::Relu, false, kernels::FusedPool::Max, 3, 3}, seed++);
  check_layer({1, 8, 14, 14, 16, 5, 1, 2, 2, 2, 2, 1, kernels::ParamAct::Relu, false, kernels::FusedPool::Max, 3, 3}, seed++);
  check_layer({2, 16, 15, 15, 24, 3, 1, 1, 1, 1, 1, 1, kernels::ParamAct::Relu, false, kernels::FusedPool::Avg, 3, 2, 1, true}, seed++);
  // The pooled split variants with 9 channels: slices of 5+4 (split 2), 3+3+3+0 (split 4) and
  // 2+2+2+2+1+0+0+0 (split 8), so some ranks reduce nothing; and with 7 (4+3, 2+2+2+1).
  check_layer({1, 9, 13, 13, 16, 5, 1, 2, 2, 2, 2, 1, kernels::ParamAct::Relu, false, kernels::FusedPool::Max, 2, 2}, seed++);
  check_layer({1, 7, 13, 13, 16, 5, 1, 2, 2, 2, 2, 1, kernels::ParamAct::Relu, false, kernels::FusedPool::Max, 2, 2}, seed++);
}

// The small-map kernel (every channel's input staged at once; one pixel a thread over a channel slice) on
// LeNet's layers at batches 1, 7 and 33, odd sizes and channel counts that leave slices uneven, asymmetric
// padding, overlapping and ceil-mode pools, every activation and the residual add.
TEST_CASE("conv2d_small: LeNet layers, odd sizes, uneven channel slices, pools, activations, residual") {
  uint32_t seed = 1500;
  const int before = small_variants_checked;
  using kernels::FusedPool;
  using kernels::ParamAct;
  for (int N : {1, 7, 33}) {
    check_layer({N, 1, 28, 28, 8, 5, 1, 2, 2, 2, 2, 1, ParamAct::Relu, false, FusedPool::Max, 2, 2}, seed++);
    check_layer({N, 8, 14, 14, 16, 5, 1, 2, 2, 2, 2, 1, ParamAct::Relu, false, FusedPool::Max, 3, 3}, seed++);
  }
  for (int size : {1, 7, 31, 33}) {
    check_layer({2, 7, size, size, 9, 3, 1, 1, 1, 1, 1, 1, ParamAct::LeakyRelu}, seed++);
    check_layer({1, 13, size, size + 2, 6, 5, 1, 2, 0, 2, 2, 1, ParamAct::None, true}, seed++);
    if (size >= 7) {
      check_layer({2, 5, size, size, 10, 3, 1, 1, 1, 1, 1, 1, ParamAct::Relu, false, FusedPool::Max, 3, 2, 1, true}, seed++);
      check_layer({1, 9, size, size + 1, 4, 5, 1, 2, 2, 2, 2, 1, ParamAct::Sigmoid, false, FusedPool::Avg, 2, 2}, seed++);
    }
  }
  check_layer({1, 3, 64, 64, 5, 3, 1, 1, 1, 1, 1, 1, ParamAct::Clip}, seed++);
  check_layer({1, 2, 1000, 17, 3, 3, 1, 1, 1, 1, 1, 1, ParamAct::Tanh}, seed++);
  CHECK(small_variants_checked - before >= 300);
  MESSAGE((small_variants_checked - before) << " small-map variant checks");
}

TEST_CASE("conv2d_depthwise: every variant, multipliers, strides, odd sizes") {
  uint32_t seed = 1700;
  for (int K : {3, 5}) {
    for (int size : {1, 7, 31, 33}) {
      check_layer({2, 16, size, size, 16, K, 1, K / 2, K / 2, K / 2, K / 2, 16}, seed++);
      check_layer({1, 8, size, size + 1, 16, K, 2, K / 2, K / 2, K / 2, K / 2, 8, kernels::ParamAct::Relu}, seed++);
      check_layer({1, 8, size, size, 8, K, 1, K / 2, K / 2, K / 2, K / 2, 8, kernels::ParamAct::Relu, true}, seed++);
    }
  }
  MESSAGE(variants_checked << " variant checks in all");
}

TEST_CASE("pack_c1_filters refuses layers larger than its parameter block") {
  // It once wrote 64 biases into a 32-entry block on the caller's stack.
  kernels::C1Filters filters;
  const std::vector<float> w(64 * 121, 0.5f), b(64, 0.25f);
  CHECK_THROWS_AS(kernels::pack_c1_filters(w.data(), b.data(), 33, 3, 3, &filters), std::length_error);
  CHECK_THROWS_AS(kernels::pack_c1_filters(w.data(), b.data(), 8, 12, 11, &filters), std::length_error);
  kernels::pack_c1_filters(w.data(), b.data(), 32, 11, 11, &filters);
  CHECK(filters.bias[31] == 0.25f);
}
