// The depthwise + pointwise kernel (kernels/dw_pw.cuh): every variant against the CPU backend's own two Convs
// with their epilogues on random inputs into poisoned outputs, twice (bit for bit), with a grouped pointwise layer
// and a channel shuffle in front too; and the planner's choice between it and the pair's steps on the zoo's
// MobileNets and ShuffleNet.
#include <doctest/doctest.h>

#include <algorithm>
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
  int pw_groups = 1, shuffle = 1;  // the pointwise layer's groups; the channel shuffle's groups in front (1: none)
};

// Runs every variant the device offers for `pc`; returns how many ran.
int check_dw_pw(const PairCase& pc, uint32_t seed) {
  const int B = pc.batch, C = pc.channels, F = pc.filters, K = pc.k, s = pc.stride;
  const int OH = (pc.h + pc.pad_top + pc.pad_bottom - K) / s + 1, OW = (pc.w + pc.pad_left + pc.pad_right - K) / s + 1;
  const ir::HostTensor x = random_tensor({B, C, pc.h, pc.w}, seed);
  const ir::HostTensor wd = random_tensor({C, 1, K, K}, seed + 1, -0.5f, 0.5f);
  const ir::HostTensor bd = random_tensor({C}, seed + 2, -0.3f, 0.3f);
  const int G = pc.pw_groups, S = pc.shuffle;
  const ir::HostTensor wp = random_tensor({F, C / G, 1, 1}, seed + 3, -0.5f, 0.5f);
  const ir::HostTensor bp = random_tensor({F}, seed + 4, -0.3f, 0.3f);
  const ir::HostTensor res = random_tensor({B, F, OH, OW}, seed + 5);
  // The reference: the shuffle on the host, then the CPU backend's convolutions one after the other, as the unfused
  // graph runs them. Channel c of the shuffled input is channel (c % S) * (C / S) + c / S of x.
  std::vector<float> shuffled(x.float_values().size());
  const size_t plane = static_cast<size_t>(pc.h) * static_cast<size_t>(pc.w);
  for (int n = 0; n < B; ++n) {
    for (int c = 0; c < C; ++c) {
      const float* from = x.f32() + (static_cast<size_t>(n) * C + static_cast<size_t>((c % S) * (C / S) + c / S)) * plane;
      std::copy(from, from + plane, shuffled.begin() + static_cast<std::ptrdiff_t>((static_cast<size_t>(n) * C + c) * plane));
    }
  }
  const ir::HostTensor xs = ir::HostTensor::floats({B, C, pc.h, pc.w}, std::move(shuffled));
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
                                              {"group", int64_t(G)}});
  std::vector<const ir::HostTensor*> in1 = {&xs, &wd};
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
  d.pw_groups = G;
  d.shuffle = S;
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
                             std::to_string(F) + " groups " + std::to_string(G) + " shuffle " + std::to_string(S) + " map " + std::to_string(pc.h) + "x" + std::to_string(pc.w) + " k" +
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

// ShuffleNet's units (shuffle of 3 groups, depthwise 3x3 without activation, 1x1 of 3 groups with the unit's residual
// and ReLU): 28x28 30 -> 120, stride 2 60 -> 120 from 28x28, 7x7 120 -> 480, batches 1, 7 and 16; odd groups: 12
// channels of 4 groups to 8 filters (groups of 3 channels, not whole float4s) with a shuffle of 2, 5x5 stride 2 with
// unequal padding on 9x7; 6 groups of 1 channel to 30 filters, no shuffle; 33 channels of 3 groups to 99 filters on
// 31x17 with a shuffle of 11.
TEST_CASE("depthwise + pointwise: grouped pointwise layers and a channel shuffle in front") {
  int ran = 0;
  for (int batch : {1, 7, 16}) {
    const uint32_t s = 300 + 10 * static_cast<uint32_t>(batch);
    ran += check_dw_pw({batch, 30, 120, 28, 28, 3, 1, 1, 1, 1, 1, ParamAct::None, ParamAct::Relu, true, true, 3, 3}, s + 1);
    ran += check_dw_pw({batch, 60, 120, 28, 28, 3, 2, 1, 1, 1, 1, ParamAct::None, ParamAct::None, true, false, 3, 3}, s + 2);
    ran += check_dw_pw({batch, 120, 480, 7, 7, 3, 1, 1, 1, 1, 1, ParamAct::None, ParamAct::Relu, true, true, 3, 3}, s + 3);
  }
  ran += check_dw_pw({3, 12, 8, 9, 7, 5, 2, 1, 2, 2, 1, ParamAct::Relu, ParamAct::Tanh, true, true, 4, 2}, 401);
  ran += check_dw_pw({2, 6, 30, 5, 5, 3, 1, 1, 1, 1, 1, ParamAct::Clip, ParamAct::None, false, false, 6, 1}, 402);
  ran += check_dw_pw({1, 33, 99, 31, 17, 3, 1, 1, 1, 1, 1, ParamAct::Swish, ParamAct::Relu, true, false, 3, 11}, 403);
  CHECK(ran >= 12);
}

// mobilenet_v1's 13 pairs and mobilenet_v2's 17: forced to the kernel they run as one step each and match the CPU
// backend; forced to their steps, two steps each; batch 64 leaves every pair apart (beyond the kernel's batches).
TEST_CASE("depthwise + pointwise: the planner runs the zoo MobileNets' pairs as one step each, or as their steps") {
  check_fused_plans({"mobilenet_v1", 128, "dw_pw", "depthwise + pointwise", 13, {1, 5, 64}, 16, 41});
  check_fused_plans({"mobilenet_v2", 96, "dw_pw", "depthwise + pointwise", 17, {1, 5, 64}, 16, 41});
}

// ShuffleNet's sixteen units: forced to the pair kernel, every unit whose pointwise output is not a block of an
// in-place Concat (the stride-2 units' where their Concat runs in place) is one step reading through the shuffle;
// forced to their steps, none is; both match the CPU backend.
TEST_CASE("depthwise + pointwise: the planner runs ShuffleNet's units through the shuffle as one step each") {
  Options cpu_options;
  cpu_options.device = Device::Cpu;
  const std::string path = repo_path("models/zoo/shufflenet_v1/model.onnx");
  const Model cpu_model = Model::load(path, cpu_options);
  for (const std::string forced : {"dw_pw", "separate_steps"}) {
    set_log_level(LogLevel::Off);  // --force-kernel warns for every conv it cannot force
    const Model model = Model::load(path, forced_gpu_options(forced));
    for (int64_t batch : {1, 16}) {
      CAPTURE(forced);
      CAPTURE(batch);
      const std::string plan = model.describe_plan(batch);
      INFO(plan);
      const size_t units = occurrences(plan, "note: shuffled depthwise + pointwise");
      CHECK(units >= 13);
      CHECK(units <= 16);
      CHECK(occurrences(plan, "one launch, dw_pw") == (forced == "dw_pw" ? units : 0u));
      const size_t n = static_cast<size_t>(batch * 3 * 224 * 224);
      const Tensor x{{batch, 3, 224, 224}, random_floats(n, 61 + static_cast<uint32_t>(batch))};
      const Tensor gpu = Context(model).run({x})[0];
      const Tensor cpu = Context(cpu_model).run({x})[0];
      CHECK(relative_error(gpu.data, cpu.data) < kTolerance);
    }
    set_log_level(LogLevel::Warn);
  }
}

}  // namespace cnnrt::testing
