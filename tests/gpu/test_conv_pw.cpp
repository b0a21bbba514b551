// A convolution and the 1x1 convolution after it in one launch (kernels/conv_pw.cuh): every variant against the CPU
// backend's two Convs with their epilogues on random inputs into poisoned outputs, twice (bit for bit), over odd
// maps, batches, filter counts, kernels, strides and paddings; and the planner's choice between it and the pair's
// steps on SqueezeNet (its expand layers merged, then the next fire module's squeeze layer).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "conv_test_util.hpp"
#include "gpu/device_info.hpp"
#include "gpu_test_util.hpp"
#include "kernel_test_util.hpp"
#include "kernels/conv2d_wg.cuh"
#include "kernels/conv_pw.cuh"

namespace cnnrt::testing {

namespace {

using kernels::ParamAct;

struct PairCase {
  int batch, channels, filters, h, w, k, stride, pad;
  int pw_filters;
  ParamAct pw_act;
  bool biases;
};

// Runs every variant the device offers for `pc`; returns how many ran.
int check_conv_pw(const PairCase& pc, uint32_t seed) {
  const int B = pc.batch, C = pc.channels, F = pc.filters, K = pc.k, s = pc.stride, S = pc.pw_filters;
  const int OH = (pc.h + 2 * pc.pad - K) / s + 1, OW = (pc.w + 2 * pc.pad - K) / s + 1;
  const ir::HostTensor x = random_tensor({B, C, pc.h, pc.w}, seed);
  const ir::HostTensor w1 = random_tensor({F, C, K, K}, seed + 1, -0.5f, 0.5f);
  const ir::HostTensor b1 = random_tensor({F}, seed + 2, -0.3f, 0.3f);
  const ir::HostTensor w2 = random_tensor({S, F, 1, 1}, seed + 3, -0.5f, 0.5f);
  const ir::HostTensor b2 = random_tensor({S}, seed + 4, -0.3f, 0.3f);
  const ir::Attributes a1 = make_attrs({{"kernel_shape", std::vector<int64_t>{K, K}},
                                        {"strides", std::vector<int64_t>{s, s}},
                                        {"dilations", std::vector<int64_t>{1, 1}},
                                        {"pads", std::vector<int64_t>{pc.pad, pc.pad, pc.pad, pc.pad}},
                                        {"group", int64_t(1)}});
  const ir::Attributes a2 = make_attrs({{"kernel_shape", std::vector<int64_t>{1, 1}},
                                        {"strides", std::vector<int64_t>{1, 1}},
                                        {"dilations", std::vector<int64_t>{1, 1}},
                                        {"pads", std::vector<int64_t>{0, 0, 0, 0}},
                                        {"group", int64_t(1)}});
  std::vector<const ir::HostTensor*> in1 = {&x, &w1};
  if (pc.biases) in1.push_back(&b1);
  ir::HostTensor mid = cpu_reference("Conv", a1, in1, {B, F, OH, OW});
  apply_test_epilogue(mid, nullptr, ParamAct::Relu);
  std::vector<const ir::HostTensor*> in2 = {&mid, &w2};
  if (pc.biases) in2.push_back(&b2);
  ir::HostTensor want = cpu_reference("Conv", a2, in2, {B, S, OH, OW});
  apply_test_epilogue(want, nullptr, pc.pw_act);

  kernels::ConvPwDesc d;
  d.conv = kernels::ConvGeometry{B, C, pc.h, pc.w, F, K, K, OH, OW, s, s, pc.pad, pc.pad, pc.pad, pc.pad, 1, 1, 1};
  d.pw_filters = S;
  set_test_activation(d.conv_epilogue, ParamAct::Relu);
  set_test_activation(d.pw_epilogue, pc.pw_act);
  const DeviceBuffer dx(x.float_values()), db1(b1.float_values()), db2(b2.float_values());
  const DeviceBuffer dw1(kernels::pack_wg_filters(w1.f32(), F, C, K, K));
  d.w_conv = dw1.get();
  d.conv_epilogue.bias = pc.biases ? db1.get() : nullptr;
  d.pw_epilogue.bias = pc.biases ? db2.get() : nullptr;
  int ran = 0;
  for (const kernels::ConvPwVariant& v : kernels::conv_pw_variants(d, gpu::current_device().arch())) {
    if (v.ranks > max_cluster_size()) continue;
    const DeviceBuffer dw2(kernels::pack_conv_pw_weights(w2.f32(), S, F, v.n2));
    kernels::ConvPwDesc dv = d;
    dv.w_pw = dw2.get();
    const std::string what = v.name + " batch " + std::to_string(B) + " C " + std::to_string(C) + " F " +
                             std::to_string(F) + " S " + std::to_string(S) + " map " + std::to_string(pc.h) + "x" +
                             std::to_string(pc.w) + " k" + std::to_string(K) + " s" + std::to_string(s) + " pad " +
                             std::to_string(pc.pad);
    note_check_point(what);
    DeviceBuffer y(static_cast<size_t>(want.numel()));
    check_twice(what, y, want, [&] { kernels::launch_conv_pw(v, dx.get(), y.get(), dv, nullptr); });
    ++ran;
  }
  return ran;
}

bool runs_here() { return gpu::current_device().arch() == 90; }

}  // namespace

// SqueezeNet's five pairs (its expand layers merged into a 3x3 layer of 128-512 filters, then the next squeeze
// layer of 16-64 filters) at batches 1 and 7.
TEST_CASE("convolution + 1x1: SqueezeNet's pairs, every variant, batches 1 and 7") {
  if (!runs_here()) return;
  int ran = 0;
  for (int batch : {1, 7}) {
    const uint32_t s = 100 * static_cast<uint32_t>(batch);
    ran += check_conv_pw({batch, 16, 128, 55, 55, 3, 1, 1, 16, ParamAct::Relu, true}, s + 1);
    ran += check_conv_pw({batch, 32, 256, 27, 27, 3, 1, 1, 32, ParamAct::Relu, true}, s + 2);
    ran += check_conv_pw({batch, 48, 384, 13, 13, 3, 1, 1, 48, ParamAct::Relu, true}, s + 3);
    ran += check_conv_pw({batch, 48, 384, 13, 13, 3, 1, 1, 64, ParamAct::Relu, true}, s + 4);
    ran += check_conv_pw({batch, 64, 512, 13, 13, 3, 1, 1, 64, ParamAct::Relu, true}, s + 5);
  }
  CHECK(ran == 20);  // each with and without the reduction split
}

// Odd sizes: a 1x1 map, one 1x1 filter; 7x7 and 31x33 maps (pixel tiles off 64), a 5x5 stride-2 layer with
// padding 2, a 1x1 first layer, 64 filters (one rank, no cluster); 1, 7, 33 and 63 outputs (columns past them
// zero); every activation of the 1x1 layer; no biases; a cluster of 14 (7 filter tiles, split 2).
TEST_CASE("convolution + 1x1: odd sizes, strides, paddings and activations") {
  if (!runs_here()) return;
  int ran = 0;
  ran += check_conv_pw({1, 16, 64, 1, 1, 3, 1, 1, 1, ParamAct::Sigmoid, true}, 201);
  ran += check_conv_pw({7, 32, 192, 7, 7, 3, 1, 1, 7, ParamAct::None, false}, 202);
  ran += check_conv_pw({2, 48, 128, 31, 33, 5, 2, 2, 33, ParamAct::Tanh, true}, 203);
  ran += check_conv_pw({1, 1008, 64, 3, 3, 1, 1, 0, 63, ParamAct::LeakyRelu, true}, 204);
  ran += check_conv_pw({3, 16, 320, 33, 31, 3, 2, 0, 24, ParamAct::Clip, true}, 205);
  ran += check_conv_pw({1, 64, 448, 13, 13, 3, 1, 1, 40, ParamAct::HardSwish, false}, 206);
  CHECK(ran == 12);
}

// What the kernel does not take, and why.
TEST_CASE("convolution + 1x1: eligibility") {
  kernels::ConvPwDesc d;
  d.conv = kernels::ConvGeometry{1, 16, 8, 8, 128, 3, 3, 8, 8, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  d.pw_filters = 16;
  d.conv_epilogue.param_act = ParamAct::Relu;
  std::string why;
  CHECK(kernels::conv_pw_supports(d, 90, &why));
  CHECK_FALSE(kernels::conv_pw_supports(d, 89, &why));
  CHECK(why.find("9.0") != std::string::npos);
  d.conv.F = 96;
  CHECK_FALSE(kernels::conv_pw_supports(d, 90, &why));
  CHECK(why.find("multiple of 64") != std::string::npos);
  d.conv.F = 576;
  CHECK_FALSE(kernels::conv_pw_supports(d, 90, &why));
  d.conv.F = 128;
  d.pw_filters = 65;
  CHECK_FALSE(kernels::conv_pw_supports(d, 90, &why));
  CHECK(why.find("more than 64") != std::string::npos);
  d.pw_filters = 16;
  d.conv_epilogue.param_act = ParamAct::Tanh;
  CHECK_FALSE(kernels::conv_pw_supports(d, 90, &why));
  CHECK(why.find("ReLU") != std::string::npos);
  d.conv_epilogue.param_act = ParamAct::Relu;
  d.conv.C = 24;
  CHECK_FALSE(kernels::conv_pw_supports(d, 90, &why));
  CHECK(why.find("multiple of 16") != std::string::npos);
  // SqueezeNet's 13x13 layer of 512 filters: 8 filter tiles, a cluster of 16 with the reduction split; a 1x1 layer of
  // 64 filters takes the 64-column product.
  d.conv = kernels::ConvGeometry{1, 64, 13, 13, 512, 3, 3, 13, 13, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  d.pw_filters = 64;
  const std::vector<kernels::ConvPwVariant> v = kernels::conv_pw_variants(d, 90);
  REQUIRE(v.size() == 2);
  CHECK(v[0].name == "wgr_pw_n64");
  CHECK(v[0].ranks == 8);
  CHECK(v[1].name == "wgr_pw_n64_split2");
  CHECK(v[1].ranks == 16);
  // A 1x1 first layer of 16 channels has one stage: no split.
  d.conv = kernels::ConvGeometry{1, 16, 13, 13, 512, 1, 1, 13, 13, 1, 1, 0, 0, 0, 0, 1, 1, 1};
  CHECK(kernels::conv_pw_variants(d, 90).size() == 1);
}

// SqueezeNet: five expand pairs are read only by the next squeeze layer (the other three go to a pool or the
// classifier). Forced, all five run fused at batches 1 and 2; forced to the separate steps, none; the output matches
// the CPU backend's either way.
TEST_CASE("convolution + 1x1: SqueezeNet's fire modules, forced and not") {
  if (!runs_here()) return;
  check_fused_plans({"squeezenet", 224, "wgr_pw", "convolution + 1x1", 5, {1, 2}, INT64_MAX, 47});
}

}  // namespace cnnrt::testing
