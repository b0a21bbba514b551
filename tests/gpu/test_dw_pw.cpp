// The depthwise + pointwise kernel (kernels/dw_pw.cuh): every variant against the CPU backend's own two Convs
// with their epilogues on random inputs into poisoned outputs, twice (bit for bit); and the planner's choice
// between it and the pair's two steps on the zoo's MobileNets.
#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "cnnrt/cnnrt.hpp"
#include "conv_test_util.hpp"
#include "gpu/device_info.hpp"
#include "gpu_test_util.hpp"
#include "kernel_test_util.hpp"
#include "kernels/dw_pw.cuh"

namespace cnnrt::testing {

namespace {

using kernels::ParamAct;

struct PairCase {
  int batch, channels, filters, h, w, k, stride;
  int pad_top, pad_left, pad_bottom, pad_right;
  ParamAct dw_act, pw_act;
  bool biases, residual;
};

// Runs every variant the device offers for `pc`; returns how many ran.
int check_dw_pw(const PairCase& pc, uint32_t seed) {
  const int B = pc.batch, C = pc.channels, F = pc.filters, K = pc.k, s = pc.stride;
  const int OH = (pc.h + pc.pad_top + pc.pad_bottom - K) / s + 1, OW = (pc.w + pc.pad_left + pc.pad_right - K) / s + 1;
  const ir::HostTensor x = random_tensor({B, C, pc.h, pc.w}, seed);
  const ir::HostTensor wd = random_tensor({C, 1, K, K}, seed + 1, -0.5f, 0.5f);
  const ir::HostTensor bd = random_tensor({C}, seed + 2, -0.3f, 0.3f);
  const ir::HostTensor wp = random_tensor({F, C, 1, 1}, seed + 3, -0.5f, 0.5f);
  const ir::HostTensor bp = random_tensor({F}, seed + 4, -0.3f, 0.3f);
  const ir::HostTensor res = random_tensor({B, F, OH, OW}, seed + 5);
  // The reference: the CPU backend's convolutions one after the other, as the unfused graph runs them.
  const ir::Attributes dw_attrs = make_attrs({{"kernel_shape", std::vector<int64_t>{K, K}},
                                              {"strides", std::vector<int64_t>{s, s}},
                                              {"dilations", std::vector<int64_t>{1, 1}},
                                              {"pads", std::vector<int64_t>{pc.pad_top, pc.pad_left, pc.pad_bottom,
                                                                            pc.pad_right}},
                                              {"group", int64_t(C)}});
  const ir::Attributes pw_attrs = make_attrs({{"kernel_shape", std::vector<int64_t>{1, 1}},
                                              {"strides", std::vector<int64_t>{1, 1}},
                                              {"dilations", std::vector<int64_t>{1, 1}},
                                              {"pads", std::vector<int64_t>{0, 0, 0, 0}},
                                              {"group", int64_t(1)}});
  std::vector<const ir::HostTensor*> in1 = {&x, &wd};
  if (pc.biases) in1.push_back(&bd);
  ir::HostTensor mid = cpu_reference("Conv", dw_attrs, in1, {B, C, OH, OW});
  apply_test_epilogue(mid, nullptr, pc.dw_act);
  std::vector<const ir::HostTensor*> in2 = {&mid, &wp};
  if (pc.biases) in2.push_back(&bp);
  ir::HostTensor want = cpu_reference("Conv", pw_attrs, in2, {B, F, OH, OW});
  apply_test_epilogue(want, pc.residual ? &res : nullptr, pc.pw_act);

  kernels::DwPwDesc d;
  d.dw = kernels::ConvGeometry{B, C, pc.h, pc.w, C, K, K, OH, OW, s, s, pc.pad_top, pc.pad_left, pc.pad_bottom,
                               pc.pad_right, 1, 1, C};
  d.F = F;
  set_test_activation(d.dw_epilogue, pc.dw_act);
  set_test_activation(d.pw_epilogue, pc.pw_act);
  d.residual = pc.residual;
  const DeviceBuffer dwd(wd.float_values()), dbd(bd.float_values()), dwp(wp.float_values()), dbp(bp.float_values());
  const DeviceBuffer dx(x.float_values()), dres(res.float_values());
  d.w_dw = dwd.get();
  d.dw_epilogue.bias = pc.biases ? dbd.get() : nullptr;
  d.w_pw = dwp.get();
  d.pw_epilogue.bias = pc.biases ? dbp.get() : nullptr;
  const int optin = static_cast<int>(gpu::current_device().smem_per_block_optin);
  int ran = 0;
  for (const kernels::DwPwVariant& v : kernels::dw_pw_variants(d, optin, gpu::current_device().arch())) {
    if (v.ranks > max_cluster_size()) continue;
    const std::string what = v.name + " batch " + std::to_string(B) + " C " + std::to_string(C) + " F " +
                             std::to_string(F) + " map " + std::to_string(pc.h) + "x" + std::to_string(pc.w) + " k" +
                             std::to_string(K) + " s" + std::to_string(s);
    note_check_point(what);
    DeviceBuffer y(static_cast<size_t>(want.numel()));
    check_twice(what, y, want, [&] {
      kernels::launch_dw_pw(v, dx.get(), pc.residual ? dres.get() : nullptr, y.get(), d, optin, nullptr);
    });
    ++ran;
  }
  return ran;
}

}  // namespace

// mobilenet_v1's pairs (64x64 8 -> 16, 32x32 stride 2, 8x8 128 -> 128, 4x4 256 -> 256) and a mobilenet_v2 pair with
// its residual (ReLU6 after the depthwise layer, none after the pointwise one), batches 1, 7 and 16.
TEST_CASE("depthwise + pointwise: MobileNet pairs, every variant, batches 1, 7 and 16") {
  int ran = 0;
  for (int batch : {1, 7, 16}) {
    const uint32_t s = 10 * static_cast<uint32_t>(batch);
    ran += check_dw_pw({batch, 8, 16, 64, 64, 3, 1, 1, 1, 1, 1, ParamAct::Relu, ParamAct::Relu, true, false}, s + 1);
    ran += check_dw_pw({batch, 32, 64, 32, 32, 3, 2, 1, 1, 1, 1, ParamAct::Relu, ParamAct::Relu, true, false}, s + 2);
    ran += check_dw_pw({batch, 128, 128, 8, 8, 3, 1, 1, 1, 1, 1, ParamAct::Relu, ParamAct::Relu, true, false}, s + 3);
    ran += check_dw_pw({batch, 256, 256, 4, 4, 3, 1, 1, 1, 1, 1, ParamAct::Relu, ParamAct::Relu, true, false}, s + 4);
    ran += check_dw_pw({batch, 96, 16, 12, 12, 3, 1, 1, 1, 1, 1, ParamAct::Clip, ParamAct::None, true, true}, s + 5);
  }
  CHECK(ran >= 15);
}

// Odd sizes: one channel and one filter on a 1x1 map; 7 channels to 33 filters, 5x5 stride 2 on 7x7; 31 channels
// to 7 filters on 33x33; 33 channels to 100 filters on 31x17, stride 2 with unequal padding; 1000 channels on 3x3
// (beyond a block's threads); 7x7 filters; every other activation; no biases.
TEST_CASE("depthwise + pointwise: odd sizes, strides, paddings and activations") {
  int ran = 0;
  ran += check_dw_pw({1, 1, 1, 1, 1, 3, 1, 1, 1, 1, 1, ParamAct::None, ParamAct::Sigmoid, true, false}, 201);
  ran += check_dw_pw({7, 7, 33, 7, 7, 5, 2, 2, 2, 2, 2, ParamAct::LeakyRelu, ParamAct::Tanh, false, true}, 202);
  ran += check_dw_pw({2, 31, 7, 33, 33, 3, 1, 1, 1, 1, 1, ParamAct::HardSwish, ParamAct::Swish, true, false}, 203);
  ran += check_dw_pw({3, 33, 100, 31, 17, 3, 2, 0, 1, 1, 0, ParamAct::Gelu, ParamAct::HardSigmoid, true, true}, 204);
  ran += check_dw_pw({1, 1000, 24, 3, 3, 3, 1, 1, 1, 1, 1, ParamAct::Relu, ParamAct::Clip, true, false}, 205);
  ran += check_dw_pw({2, 24, 40, 20, 20, 7, 1, 3, 3, 3, 3, ParamAct::Swish, ParamAct::None, false, false}, 206);
  CHECK(ran >= 6);
}

// mobilenet_v1's 13 pairs and mobilenet_v2's 17: forced to the kernel they run as one step each and match the CPU
// backend; forced to their steps, two steps each; batch 64 leaves every pair apart (beyond the kernel's batches).
TEST_CASE("depthwise + pointwise: the planner runs the zoo MobileNets' pairs as one step each, or as their steps") {
  check_fused_plans({"mobilenet_v1", 128, "dw_pw", "depthwise + pointwise", 13, {1, 5, 64}, 16, 41});
  check_fused_plans({"mobilenet_v2", 96, "dw_pw", "depthwise + pointwise", 17, {1, 5, 64}, 16, 41});
}

}  // namespace cnnrt::testing
