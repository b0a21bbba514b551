// The squeeze-and-excitation kernel (kernels/squeeze_excite.cuh): every variant against the CPU backend's own
// GlobalAveragePool, Conv, activation, Conv, gate and Mul on random inputs into poisoned outputs, twice (bit for
// bit: the sums run in a fixed order); and the planner's choice between it and the gate's steps on a zoo model.
#include <doctest/doctest.h>

#include <string>
#include <utility>
#include <vector>

#include "cnnrt/cnnrt.hpp"
#include "conv_test_util.hpp"
#include "gpu/device_info.hpp"
#include "gpu_test_util.hpp"
#include "kernel_test_util.hpp"
#include "kernels/squeeze_excite.cuh"

namespace cnnrt::testing {

namespace {

using kernels::ParamAct;

struct SeCase {
  int batch, channels, hidden, h, w;
  ParamAct act, gate;
  bool bias1, bias2;
};

// Runs every variant the device offers for `sc`; returns how many ran.
int check_squeeze_excite(const SeCase& sc, uint32_t seed) {
  const int B = sc.batch, C = sc.channels, H = sc.hidden;
  const ir::HostTensor x = random_tensor({B, C, sc.h, sc.w}, seed);
  const ir::HostTensor w1 = random_tensor({H, C, 1, 1}, seed + 1, -0.5f, 0.5f);
  const ir::HostTensor b1 = random_tensor({H}, seed + 2, -0.3f, 0.3f);
  const ir::HostTensor w2 = random_tensor({C, H, 1, 1}, seed + 3, -0.5f, 0.5f);
  const ir::HostTensor b2 = random_tensor({C}, seed + 4, -0.3f, 0.3f);
  // The reference: the CPU backend's kernels one after the other, as the unfused graph runs them.
  const ir::HostTensor pooled = cpu_reference("GlobalAveragePool", {}, {&x}, {B, C, 1, 1});
  const ir::Attributes conv = make_attrs({{"kernel_shape", std::vector<int64_t>{1, 1}},
                                          {"strides", std::vector<int64_t>{1, 1}},
                                          {"dilations", std::vector<int64_t>{1, 1}},
                                          {"pads", std::vector<int64_t>{0, 0, 0, 0}},
                                          {"group", int64_t(1)}});
  std::vector<const ir::HostTensor*> in1 = {&pooled, &w1};
  if (sc.bias1) in1.push_back(&b1);
  ir::HostTensor hidden = cpu_reference("Conv", conv, in1, {B, H, 1, 1});
  apply_test_epilogue(hidden, nullptr, sc.act);
  std::vector<const ir::HostTensor*> in2 = {&hidden, &w2};
  if (sc.bias2) in2.push_back(&b2);
  ir::HostTensor gate = cpu_reference("Conv", conv, in2, {B, C, 1, 1});
  apply_test_epilogue(gate, nullptr, sc.gate);
  const ir::HostTensor want = cpu_reference("Mul", {}, {&x, &gate}, x.shape());

  kernels::SqueezeExciteDesc d;
  d.batch = B;
  d.channels = C;
  d.hidden = H;
  d.spatial = sc.h * sc.w;
  kernels::Epilogue e1, e2;
  set_test_activation(e1, sc.act);
  set_test_activation(e2, sc.gate);
  d.act = e1.param_act;
  d.act_alpha = e1.alpha;
  d.act_beta = e1.beta;
  d.gate = e2.param_act;
  d.gate_alpha = e2.alpha;
  d.gate_beta = e2.beta;
  const DeviceBuffer dw1(w1.float_values()), dw2(w2.float_values());
  const DeviceBuffer db1(b1.float_values()), db2(b2.float_values()), dx(x.float_values());
  d.w1 = dw1.get();
  d.w2 = dw2.get();
  d.b1 = sc.bias1 ? db1.get() : nullptr;
  d.b2 = sc.bias2 ? db2.get() : nullptr;
  int ran = 0;
  for (const kernels::SqueezeExciteVariant& v : kernels::squeeze_excite_variants(d, gpu::current_device().arch())) {
    if (v.ranks > max_cluster_size()) continue;
    const std::string what = v.name + " batch " + std::to_string(B) + " C " + std::to_string(C) + " hidden " +
                             std::to_string(H) + " map " + std::to_string(sc.h) + "x" + std::to_string(sc.w);
    note_check_point(what);
    DeviceBuffer y(static_cast<size_t>(x.numel()));
    check_twice(what, y, want, [&] { kernels::launch_squeeze_excite(v, dx.get(), y.get(), d, nullptr); });
    ++ran;
  }
  return ran;
}

}  // namespace

// MobileNet v3 Small's gates (0.5x at 128x128: 8 channels on 32x32, 48 on 8x8, 288 on 4x4) at batches 1, 7 and 33
// (clusters up to 16, then one block an image); an EfficientNet gate's Swish + Sigmoid.
TEST_CASE("squeeze-excitation: MobileNet v3 gates, every variant, batches 1, 7 and 33") {
  int ran = 0;
  for (int batch : {1, 7, 33}) {
    const uint32_t s = 10 * static_cast<uint32_t>(batch);
    ran += check_squeeze_excite({batch, 8, 8, 32, 32, ParamAct::Relu, ParamAct::HardSigmoid, true, true}, s + 1);
    ran += check_squeeze_excite({batch, 48, 16, 8, 8, ParamAct::Relu, ParamAct::HardSigmoid, true, true}, s + 2);
    ran += check_squeeze_excite({batch, 288, 72, 4, 4, ParamAct::Relu, ParamAct::HardSigmoid, true, true}, s + 3);
    ran += check_squeeze_excite({batch, 96, 4, 12, 12, ParamAct::Swish, ParamAct::Sigmoid, true, true}, s + 4);
  }
  CHECK(ran >= 12);  // every case runs one block an image at least (clusters too on compute capability 9.0)
}

// Odd sizes: one channel and one hidden output on a 1x1 map; maps of 7x7, 31x1 and 33x33 (not whole float4s;
// more than a warp a channel); 1000 channels (more than a block's threads); every other activation; no biases.
TEST_CASE("squeeze-excitation: odd sizes, activations, without biases") {
  int ran = 0;
  ran += check_squeeze_excite({1, 1, 1, 1, 1, ParamAct::None, ParamAct::Sigmoid, true, false}, 201);
  ran += check_squeeze_excite({7, 7, 5, 7, 7, ParamAct::LeakyRelu, ParamAct::Tanh, false, true}, 202);
  ran += check_squeeze_excite({33, 33, 31, 31, 1, ParamAct::Clip, ParamAct::HardSigmoid, true, true}, 203);
  ran += check_squeeze_excite({2, 31, 7, 33, 33, ParamAct::HardSwish, ParamAct::Sigmoid, false, false}, 204);
  ran += check_squeeze_excite({1, 1000, 250, 3, 1, ParamAct::Gelu, ParamAct::None, true, true}, 205);
  ran += check_squeeze_excite({16, 1000, 7, 1, 3, ParamAct::Relu, ParamAct::Sigmoid, true, true}, 206);
  CHECK(ran >= 6);
}

// mobilenet_v3_small's nine gates (ReLU, HardSigmoid) and efficientnet_b0_small's ten (SiLU, Sigmoid): forced to
// the kernel they run as one step each and match the CPU backend; forced to their steps, four steps each.
TEST_CASE("squeeze-excitation: the planner runs zoo models' gates as one step each, or as their steps") {
  check_fused_plans({"mobilenet_v3_small", 128, "squeeze_excite", "squeeze-excitation", 9});
  check_fused_plans({"efficientnet_b0_small", 128, "squeeze_excite", "squeeze-excitation", 10});
}

}  // namespace cnnrt::testing
