// Every variant of the direct convolution families c1, c1stream, gen, small and dw of the kernel registry
// against the CPU reference backend (conv_family_check.hpp): random inputs (never zeros), poisoned outputs,
// odd sizes (1, 7, 31, 33, 1000), paddings, strides, activations, residual adds and fused pooling. Each test
// case requires that its family accepts every layer it is given, and at its end that every variant the
// registry lists for the family ran.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "conv_family_check.hpp"
#include "conv_test_util.hpp"
#include "gpu_test_util.hpp"
#include "kernel_test_util.hpp"
#include "kernels/conv2d_c1.cuh"

using namespace cnnrt;
using namespace cnnrt::testing;
using kernels::FusedPool;
using kernels::ParamAct;

TEST_CASE("c1: every variant, odd sizes, paddings, strides, activations, pooling") {
  FamilyCheck c1("c1");
  if (!c1.runs_here()) return;
  uint32_t seed = 100;
  for (const Layer& L : c1_layers()) c1.check(L, seed++);
  c1.covered_all();
}

TEST_CASE("c1stream: every variant, widths a multiple of 4, odd heights, paddings") {
  FamilyCheck stream("c1stream");
  if (!stream.runs_here()) return;
  uint32_t seed = 300;
  for (const Layer& L : c1stream_layers()) stream.check(L, seed++);
  // 3 K x 4 H x 3 W x 2 cases x (at least one row count each), and more: none of them may be missing.
  CHECK(stream.checked() >= 3 * 4 * 3 * 2);
  stream.covered_all();
}

// Buffers at an offset that is not a multiple of 4 floats (a caller's batch packed in one allocation): every
// c1 and c1stream variant (the streaming ones hand such an input to the tiled kernel), and the float4 stores
// of store_four, which must fall back to single floats there.
TEST_CASE("c1 and c1stream: every variant with input and output 4 bytes past 16-byte alignment") {
  const kernels::DeviceCaps dev = test_device_caps();
  int checked = 0, streaming = 0;
  uint32_t seed = 77;
  for (int K : {1, 3, 5}) {
    const int P = (K - 1) / 2;
    const Layer L{1, 1, 33, 132, 1, K, 1, P, P, P, P, 1, ParamAct::Relu};
    LayerCase c = make_layer_case(L, seed);
    seed += 4;
    std::vector<float> shifted(c.x.float_values().size() + 1, 1.0f);
    std::copy(c.x.float_values().begin(), c.x.float_values().end(), shifted.begin() + 1);
    DeviceBuffer dx(shifted), dw(c.w.float_values()), db(c.b.float_values());
    c.layer.e.bias = db.get();
    std::vector<DeviceBuffer> packed;
    for (const auto& fc : kernels::conv_candidates(c.layer, dev, c.w.f32(), c.b.f32(), dw.get(),
                                                   [&](const std::vector<float>& data, const std::string&) {
                                                     packed.emplace_back(data);
                                                     return static_cast<const float*>(packed.back().get());
                                                   })) {
      const std::string family = fc.family->name();
      if (family != "c1" && family != "c1stream") continue;
      REQUIRE_MESSAGE(fc.rejected.empty(), family << ": " << fc.rejected);
      for (const kernels::ConvVariant& v : fc.variants) {
        INFO(v.name);
        DeviceBuffer y(static_cast<size_t>(c.expected.numel()) + 1);  // poisoned
        kernels::ConvArgs args;
        args.x = dx.get() + 1;
        args.y = y.get() + 1;
        v.launch(args, nullptr);
        GPU_CHECK(cudaGetLastError());
        const std::vector<float> all = y.download();
        const std::vector<float> got(all.begin() + 1, all.end());
        CHECK(relative_error(got, c.expected.float_values()) < kTolerance);
        ++checked;
        streaming += family == "c1stream";
      }
    }
  }
  CHECK(streaming >= 3);
  CHECK(checked > streaming);
  MESSAGE(checked << " misaligned variant checks");
}

// One test case per filter size, so each runs in its own process: compute-sanitizer's racecheck takes minutes
// over each of them.
void check_general(int K, uint32_t seed) {
  FamilyCheck gen("gen");
  if (!gen.runs_here()) return;
  for (const Layer& L : gen_layers(K)) gen.check(L, seed++);
  gen.covered_all("gen_k" + std::to_string(K) + "_");
}

TEST_CASE("gen: every variant, 1x1") { check_general(1, 900); }
TEST_CASE("gen: every variant, 3x3") { check_general(3, 950); }
TEST_CASE("gen: every variant, 5x5") { check_general(5, 1000); }

TEST_CASE("small: LeNet layers, odd sizes, uneven channel slices, pools, activations, residual") {
  FamilyCheck small("small");
  if (!small.runs_here()) return;
  uint32_t seed = 1500;
  for (const Layer& L : small_layers()) small.check(L, seed++);
  CHECK(small.checked() >= 300);
  small.covered_all();
}

TEST_CASE("dw: every variant, multipliers, strides, odd sizes") {
  FamilyCheck dw("dw");
  if (!dw.runs_here()) return;
  uint32_t seed = 1700;
  for (const Layer& L : dw_layers()) dw.check(L, seed++);
  dw.covered_all();
}

TEST_CASE("dw: every variant reads its input through a channel shuffle; no other family is offered one") {
  FamilyCheck dw("dw");
  if (!dw.runs_here()) return;
  uint32_t seed = 1800;
  for (const Layer& L : dw_layers()) {
    // ShuffleNet's groups (3) where the channels allow, else 2, 5 or 11; prime channel counts have no shuffle.
    int shuffle = 1;
    for (int s : {3, 2, 5, 11}) {
      if (L.C % s == 0 && L.C / s >= 2) {
        shuffle = s;
        break;
      }
    }
    if (shuffle == 1) continue;
    dw.check_shuffled(L, seed++, shuffle);
  }
  dw.covered_all();
  // A shuffled pointwise layer: dw declines it (not depthwise), every other family naming the shuffle.
  kernels::ConvLayer layer;
  layer.g = kernels::conv_geometry(1, 12, 8, 1, {8, 8, 1}, {8, 8, 1});
  layer.in.shuffle = 3;
  const std::vector<float> w(12 * 8, 0.5f);
  for (const kernels::FamilyCandidates& fc :
       kernels::conv_candidates(layer, test_device_caps(), w.data(), nullptr, nullptr,
                                [](const std::vector<float>&, const std::string&) { return nullptr; })) {
    CAPTURE(std::string(fc.family->name()));
    CHECK(fc.variants.empty());
    if (std::string(fc.family->name()) != "dw" && kernels::device_lacks(test_device_caps(), fc.family->needs()).empty()) {
      CHECK(fc.rejected.find("channel shuffle") != std::string::npos);
    }
  }
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
