// The inverted residual block kernel (kernels/mbconv.cuh): every variant against the CPU backend's own Convs,
// gate and Mul with their epilogues on random inputs into poisoned outputs, twice (bit for bit: every sum in a fixed
// order); and the planner's choice between it and the block's steps on the zoo's MobileNets and EfficientNet.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "cnnrt/cnnrt.hpp"
#include "conv_test_util.hpp"
#include "gpu/device_info.hpp"
#include "gpu_test_util.hpp"
#include "kernel_test_util.hpp"
#include "kernels/mbconv.cuh"

namespace cnnrt::testing {

namespace {

using kernels::ParamAct;

struct BlockCase {
  int batch, channels, hidden, filters, h, w, k, stride, dilation;
  int pad_top, pad_left, pad_bottom, pad_right;
  bool expand;
  int squeeze;  // 0: no gate
  ParamAct exp_act, dw_act, se_act, gate, pj_act;
  bool biases, residual;
};

ir::Attributes conv_attrs(int k, int stride, int dilation, std::vector<int64_t> pads, int groups) {
  return make_attrs({{"kernel_shape", std::vector<int64_t>{k, k}},
                     {"strides", std::vector<int64_t>{stride, stride}},
                     {"dilations", std::vector<int64_t>{dilation, dilation}},
                     {"pads", std::move(pads)},
                     {"group", int64_t(groups)}});
}

int split_ran = 0;  // how many of the checks below ran a two-launch (`_split`) variant
int tile_ran = 0;   // and a tile (`_tile`) variant

// Runs every variant the device offers for `bc`; returns how many ran.
int check_mbconv(const BlockCase& bc, uint32_t seed) {
  const int B = bc.batch, C = bc.channels, HD = bc.expand ? bc.hidden : bc.channels, F = bc.filters, K = bc.k;
  const int s = bc.stride, dil = bc.dilation, S = bc.squeeze;
  const int OH = (bc.h + bc.pad_top + bc.pad_bottom - dil * (K - 1) - 1) / s + 1;
  const int OW = (bc.w + bc.pad_left + bc.pad_right - dil * (K - 1) - 1) / s + 1;
  const ir::HostTensor x = random_tensor({B, C, bc.h, bc.w}, seed);
  const ir::HostTensor we = random_tensor({HD, C, 1, 1}, seed + 1, -0.5f, 0.5f);
  const ir::HostTensor be = random_tensor({HD}, seed + 2, -0.3f, 0.3f);
  const ir::HostTensor wd = random_tensor({HD, 1, K, K}, seed + 3, -0.5f, 0.5f);
  const ir::HostTensor bd = random_tensor({HD}, seed + 4, -0.3f, 0.3f);
  const ir::HostTensor w1 = random_tensor({std::max(S, 1), HD, 1, 1}, seed + 5, -0.5f, 0.5f);
  const ir::HostTensor b1 = random_tensor({std::max(S, 1)}, seed + 6, -0.3f, 0.3f);
  const ir::HostTensor w2 = random_tensor({HD, std::max(S, 1), 1, 1}, seed + 7, -0.5f, 0.5f);
  const ir::HostTensor b2 = random_tensor({HD}, seed + 8, -0.3f, 0.3f);
  const ir::HostTensor wp = random_tensor({F, HD, 1, 1}, seed + 9, -0.5f, 0.5f);
  const ir::HostTensor bp = random_tensor({F}, seed + 10, -0.3f, 0.3f);
  const ir::HostTensor res = random_tensor({B, F, OH, OW}, seed + 11);
  // The reference: the CPU backend's kernels one after the other, as the unfused graph runs them.
  const ir::Attributes one = conv_attrs(1, 1, 1, {0, 0, 0, 0}, 1);
  ir::HostTensor hidden = x;
  if (bc.expand) {
    std::vector<const ir::HostTensor*> in = {&x, &we};
    if (bc.biases) in.push_back(&be);
    hidden = cpu_reference("Conv", one, in, {B, HD, bc.h, bc.w});
    apply_test_epilogue(hidden, nullptr, bc.exp_act);
  }
  std::vector<const ir::HostTensor*> in_dw = {&hidden, &wd};
  if (bc.biases) in_dw.push_back(&bd);
  ir::HostTensor mid = cpu_reference("Conv", conv_attrs(K, s, dil, {bc.pad_top, bc.pad_left, bc.pad_bottom, bc.pad_right}, HD),
                                     in_dw, {B, HD, OH, OW});
  apply_test_epilogue(mid, nullptr, bc.dw_act);
  if (S > 0) {
    const ir::HostTensor pooled = cpu_reference("GlobalAveragePool", {}, {&mid}, {B, HD, 1, 1});
    ir::HostTensor z = cpu_reference("Conv", one, {&pooled, &w1, &b1}, {B, S, 1, 1});
    apply_test_epilogue(z, nullptr, bc.se_act);
    ir::HostTensor gate = cpu_reference("Conv", one, {&z, &w2, &b2}, {B, HD, 1, 1});
    apply_test_epilogue(gate, nullptr, bc.gate);
    mid = cpu_reference("Mul", {}, {&mid, &gate}, mid.shape());
  }
  std::vector<const ir::HostTensor*> in_pj = {&mid, &wp};
  if (bc.biases) in_pj.push_back(&bp);
  ir::HostTensor want = cpu_reference("Conv", one, in_pj, {B, F, OH, OW});
  apply_test_epilogue(want, bc.residual ? &res : nullptr, bc.pj_act);

  kernels::MbconvDesc d;
  d.batch = B;
  d.C = C;
  d.H = bc.h;
  d.W = bc.w;
  d.hidden = HD;
  d.expand = bc.expand;
  d.dw = kernels::ConvGeometry{B, HD, bc.h, bc.w, HD, K, K, OH, OW, s, s, bc.pad_top, bc.pad_left, bc.pad_bottom,
                               bc.pad_right, dil, dil, HD};
  set_test_activation(d.exp_epilogue, bc.exp_act);
  set_test_activation(d.dw_epilogue, bc.dw_act);
  set_test_activation(d.pj_epilogue, bc.pj_act);
  kernels::Epilogue se, gate;
  set_test_activation(se, bc.se_act);
  set_test_activation(gate, bc.gate);
  d.squeeze = S;
  d.se_act = se.param_act;
  d.se_alpha = se.alpha;
  d.se_beta = se.beta;
  d.se_gate = gate.param_act;
  d.gate_alpha = gate.alpha;
  d.gate_beta = gate.beta;
  d.F = F;
  d.residual = bc.residual;
  const DeviceBuffer dwe(we.float_values()), dbe(be.float_values()), dwd(wd.float_values()), dbd(bd.float_values());
  const DeviceBuffer dw1(w1.float_values()), db1(b1.float_values()), dw2(w2.float_values()), db2(b2.float_values());
  const DeviceBuffer dwp(wp.float_values()), dbp(bp.float_values()), dx(x.float_values()), dres(res.float_values());
  d.w_exp = dwe.get();
  d.exp_epilogue.bias = bc.biases ? dbe.get() : nullptr;
  d.w_dw = dwd.get();
  d.dw_epilogue.bias = bc.biases ? dbd.get() : nullptr;
  d.w_se1 = dw1.get();
  d.b_se1 = db1.get();
  d.w_se2 = dw2.get();
  d.b_se2 = db2.get();
  d.w_pj = dwp.get();
  d.pj_epilogue.bias = bc.biases ? dbp.get() : nullptr;
  const DeviceBuffer dsplit(
      kernels::mbconv_split_pack(wp.float_values(), S > 0 ? w2.float_values() : std::vector<float>{}, d));
  d.w_split = dsplit.get();
  const int optin = static_cast<int>(gpu::current_device().smem_per_block_optin);
  int ran = 0;
  for (const kernels::MbconvVariant& v : kernels::mbconv_variants(d, optin, gpu::current_device().arch())) {
    if (v.ranks > max_cluster_size()) continue;
    const std::string what = v.name + " batch " + std::to_string(B) + " C " + std::to_string(C) + " hidden " +
                             std::to_string(HD) + " F " + std::to_string(F) + " map " + std::to_string(bc.h) + "x" +
                             std::to_string(bc.w) + " k" + std::to_string(K) + " s" + std::to_string(s) + " squeeze " +
                             std::to_string(S);
    note_check_point(what);
    DeviceBuffer y(static_cast<size_t>(want.numel()));
    const int64_t scratch = kernels::mbconv_workspace_floats(v, d);
    DeviceBuffer workspace(static_cast<size_t>(std::max<int64_t>(scratch, 1)));
    check_twice(what, y, want, [&] {
      kernels::launch_mbconv(v, dx.get(), bc.residual ? dres.get() : nullptr, y.get(), d, optin, nullptr,
                             scratch > 0 ? workspace.get() : nullptr);
    });
    if (v.split_channels > 0) ++split_ran;
    if (v.tile_h > 0) ++tile_ran;
    ++ran;
  }
  return ran;
}


// A block of random weights (biases on every layer) over [batch, C, map, map], for the chain test.
struct RandomBlock {
  kernels::MbconvDesc d;
  std::vector<DeviceBuffer> weights;

  RandomBlock(int batch, int C, int hidden, int F, int map, int k, int stride, int squeeze, bool expand, bool residual,
              uint32_t seed) {
    const int HD = expand ? hidden : C, pad = k / 2, out = (map + 2 * pad - k) / stride + 1;
    auto upload = [&](std::vector<int64_t> shape, float lo, float hi) {
      weights.emplace_back(random_tensor(shape, seed++, lo, hi).float_values());
      return weights.back().get();
    };
    weights.reserve(12);
    d.batch = batch;
    d.C = C;
    d.H = d.W = map;
    d.hidden = HD;
    d.expand = expand;
    d.dw = kernels::ConvGeometry{batch, HD, map, map, HD, k, k, out, out, stride, stride, pad, pad, pad, pad, 1, 1, HD};
    d.w_exp = upload({HD, C}, -0.5f, 0.5f);
    d.exp_epilogue.bias = upload({HD}, -0.3f, 0.3f);
    set_test_activation(d.exp_epilogue, ParamAct::Swish);
    d.w_dw = upload({HD, k * k}, -0.5f, 0.5f);
    d.dw_epilogue.bias = upload({HD}, -0.3f, 0.3f);
    set_test_activation(d.dw_epilogue, ParamAct::Clip);
    d.squeeze = squeeze;
    if (squeeze > 0) {
      d.w_se1 = upload({squeeze, HD}, -0.5f, 0.5f);
      d.b_se1 = upload({squeeze}, -0.3f, 0.3f);
      d.se_act = ParamAct::Relu;
      d.w_se2 = upload({HD, squeeze}, -0.5f, 0.5f);
      d.b_se2 = upload({HD}, -0.3f, 0.3f);
      d.se_gate = ParamAct::Sigmoid;
    }
    d.F = F;
    d.w_pj = upload({F, HD}, -0.5f, 0.5f);
    d.pj_epilogue.bias = upload({F}, -0.3f, 0.3f);
    d.residual = residual;
  }
  int64_t out_floats() const { return int64_t(d.batch) * d.F * d.dw.OH * d.dw.OW; }
};

}  // namespace

// The zoo's blocks: mobilenet_v2's (ReLU6, a residual, stride 1 and 2), mobilenet_v3_small's (ReLU or HardSwish, 5x5,
// HardSigmoid gates; one without an expand layer) and efficientnet_b0_small's (SiLU, Sigmoid gates; its 64x64 block),
// batches 1, 7, 16.
TEST_CASE("inverted residual block: zoo blocks, every variant, batches 1, 7 and 16") {
  using P = ParamAct;
  int ran = 0;
  for (int batch : {1, 7, 16}) {
    const uint32_t s = 20 * static_cast<uint32_t>(batch);
    ran += check_mbconv({batch, 24, 144, 24, 6, 6, 3, 1, 1, 1, 1, 1, 1, true, 0, P::Clip, P::Clip, P::None, P::None,
                         P::None, true, true}, s + 1);
    ran += check_mbconv({batch, 16, 96, 24, 12, 12, 3, 2, 1, 1, 1, 1, 1, true, 0, P::Clip, P::Clip, P::None, P::None,
                         P::None, true, false}, s + 2);
    ran += check_mbconv({batch, 8, 8, 8, 64, 64, 3, 2, 1, 1, 1, 1, 1, false, 8, P::None, P::Relu, P::Relu,
                         P::HardSigmoid, P::None, true, false}, s + 3);
    ran += check_mbconv({batch, 24, 120, 24, 8, 8, 5, 1, 1, 2, 2, 2, 2, true, 32, P::HardSwish, P::HardSwish, P::Relu,
                         P::HardSigmoid, P::None, true, true}, s + 4);
    ran += check_mbconv({batch, 48, 288, 48, 4, 4, 5, 1, 1, 2, 2, 2, 2, true, 72, P::Swish, P::Swish, P::Swish,
                         P::Sigmoid, P::None, true, true}, s + 5);
    // 8 channels of 64x64: only clusters of 16 hold it, and the expand layer's input no longer fits beside the partial
    // sums (read from L2)
    const int big = check_mbconv({batch, 8, 48, 16, 64, 64, 3, 2, 1, 1, 1, 1, 1, true, 2, P::Swish, P::Swish, P::Swish,
                                  P::Sigmoid, P::None, true, false}, s + 6);
    if (gpu::current_device().arch() >= 90 && max_cluster_size() >= 16) CHECK(big > 0);
    // mobilenet_v2's first blocks: 48x48 with stride 2, 24x24 with a residual (edge tiles of 8x8 past the map)
    ran += check_mbconv({batch, 8, 48, 8, 48, 48, 3, 2, 1, 1, 1, 1, 1, true, 0, P::Clip, P::Clip, P::None, P::None,
                         P::None, true, false}, s + 7);
    ran += check_mbconv({batch, 8, 48, 8, 20, 20, 3, 1, 1, 1, 1, 1, 1, true, 0, P::Clip, P::Clip, P::None, P::None,
                         P::None, true, true}, s + 8);
  }
  CHECK(ran >= 15);  // one block an image at least (clusters too on compute capability 9.0)
}

// Odd sizes: one channel, one hidden channel and one filter on a 1x1 map; 7 -> 33 -> 31 on 7x7 with unequal padding,
// stride 2, dilation 2; 31 -> 1000 hidden channels on 3x3 (beyond a block's threads); 33x31 maps; 7x7 filters, stride
// 3; every other activation; no biases.
TEST_CASE("inverted residual block: odd sizes, strides, dilation, activations, without biases") {
  using P = ParamAct;
  int ran = 0;
  ran += check_mbconv({1, 1, 1, 1, 1, 1, 3, 1, 1, 1, 1, 1, 1, true, 1, P::None, P::None, P::None, P::Sigmoid, P::Relu,
                       true, false}, 301);
  ran += check_mbconv({7, 7, 33, 31, 7, 7, 3, 2, 2, 0, 1, 2, 3, true, 7, P::LeakyRelu, P::Tanh, P::Gelu, P::HardSigmoid,
                       P::Clip, false, false}, 302);
  ran += check_mbconv({1, 31, 1000, 7, 3, 3, 3, 1, 1, 1, 1, 1, 1, true, 0, P::Relu, P::Relu, P::None, P::None,
                       P::HardSwish, true, false}, 303);
  ran += check_mbconv({3, 33, 33, 33, 33, 31, 7, 3, 1, 3, 3, 3, 3, false, 0, P::None, P::Swish, P::None, P::None,
                       P::Relu, true, true}, 304);
  ran += check_mbconv({2, 5, 31, 5, 1, 33, 1, 1, 1, 0, 0, 0, 0, true, 3, P::Sigmoid, P::LeakyRelu, P::Relu, P::Tanh,
                       P::None, false, true}, 305);
  // no gate: 7 -> 33 -> 31 on 7x7 with unequal padding, stride 2, dilation 2 (the tile's window in every form)
  ran += check_mbconv({3, 7, 33, 31, 7, 7, 3, 2, 2, 0, 1, 2, 3, true, 0, P::LeakyRelu, P::Tanh, P::None, P::None,
                       P::Clip, false, true}, 306);
  CHECK(ran >= 6);
  CHECK(split_ran >= 6);  // the split runs on every device, and each case here has at least one
  CHECK(tile_ran >= 3);   // the tile on every case without a gate that fits (not 1000 hidden channels)
}

// Three blocks as one chain (expand, stride 2 and a gate; the input as residual; no expand, 5x5 and a gate) at batches
// 1, 3 and 16: every chain variant's outputs, each block's included, equal bit for bit those of the blocks launched one
// by one with the same cluster size (which the cases above check against the CPU backend).
TEST_CASE("inverted residual block: chains of blocks equal the blocks launched one by one") {
  const int arch = gpu::current_device().arch();
  const int optin = static_cast<int>(gpu::current_device().smem_per_block_optin);
  int ran = 0;
  for (int batch : {1, 3, 16}) {
    std::vector<RandomBlock> blocks;
    blocks.emplace_back(batch, 16, 96, 24, 12, 3, 2, 8, true, false, 500u + batch);
    blocks.emplace_back(batch, 24, 144, 24, 6, 3, 1, 0, true, true, 600u + batch);
    blocks.emplace_back(batch, 24, 24, 32, 6, 5, 1, 8, false, false, 700u + batch);
    std::vector<kernels::MbconvDesc> descs;
    for (const RandomBlock& b : blocks) descs.push_back(b.d);
    const DeviceBuffer x(random_tensor({batch, 16, 12, 12}, 800u + batch).float_values());
    for (const kernels::MbconvVariant& v : kernels::mbconv_chain_variants(descs, optin, arch)) {
      if (v.ranks > max_cluster_size()) continue;
      note_check_point(v.name + " batch " + std::to_string(batch));
      std::vector<DeviceBuffer> one_by_one, chained;
      kernels::MbconvChainTensors t;
      const float* in = x.get();
      const float* chained_in = x.get();
      for (size_t b = 0; b < blocks.size(); ++b) {
        one_by_one.emplace_back(static_cast<size_t>(blocks[b].out_floats()));
        chained.emplace_back(static_cast<size_t>(blocks[b].out_floats()));
        kernels::MbconvVariant single{"", v.ranks, v.stage_x};
        kernels::launch_mbconv(single, in, blocks[b].d.residual ? in : nullptr, one_by_one.back().get(), descs[b],
                               optin, nullptr);
        finish_launch();
        t.x[b] = chained_in;
        t.residual[b] = blocks[b].d.residual ? chained_in : nullptr;
        t.y[b] = chained.back().get();
        in = one_by_one.back().get();
        chained_in = chained.back().get();
      }
      const std::vector<unsigned char> table = kernels::mbconv_chain_table(v, descs);
      std::vector<float> words(table.size() / sizeof(float));
      std::memcpy(words.data(), table.data(), words.size() * sizeof(float));
      const DeviceBuffer dtable(words);
      kernels::launch_mbconv_chain(v, descs, dtable.get(), t, optin, nullptr);
      finish_launch();
      for (size_t b = 0; b < blocks.size(); ++b) {
        CHECK_MESSAGE(chained[b].download() == one_by_one[b].download(), v.name << " block " << b << " batch " << batch);
      }
      ++ran;
    }
  }
  if (arch >= 90 && max_cluster_size() >= 16) CHECK(ran == 6);
}

// The zoo's blocks through the planner: forced to the kernel, each block is one step (mobilenet_v2's sixteen with an
// expand layer and its first without; mobilenet_v3_small's eleven; efficientnet_b0_small's ten) and the networks
// match the CPU backend; forced to their steps, none is. (Every block fits a rank's shared memory in clusters of 16.)
TEST_CASE("inverted residual block: the planner runs zoo models' blocks as one step each, or as their steps") {
  if (gpu::current_device().arch() < 90 || max_cluster_size() < 16) {
    skip_test_case("the zoo's early blocks fit shared memory only split over clusters of 16 (compute capability 9.0)");
    return;
  }
  check_fused_plans({"mobilenet_v2", 96, "mbconv", "inverted residual block", 17, {1, 5, 16}});
  check_fused_plans({"mobilenet_v3_small", 128, "mbconv", "inverted residual block", 11, {1, 5, 16}});
  check_fused_plans({"efficientnet_b0_small", 128, "mbconv", "inverted residual block", 10, {1, 5, 16}});
}

// Forced to the split (any compute capability), every block of efficientnet_b0_small and mobilenet_v2 runs as its two
// launches, and the networks match the CPU backend.
TEST_CASE("inverted residual block: the planner runs the split, forced") {
  check_fused_plans({"efficientnet_b0_small", 128, "mbconv_split", "inverted residual block", 10, {1, 5}});
  check_fused_plans({"mobilenet_v2", 96, "mbconv_split", "inverted residual block", 17, {1, 5}});
}

// Forced to the tile (any compute capability), mobilenet_v2's blocks (none has a gate) run as one launch over their
// output tiles, all but the last (56 -> 336 -> 112: its weights, 238 KB, staged whole by every block, exceed shared
// memory on an H100), and the network matches the CPU backend.
TEST_CASE("inverted residual block: the planner runs the tile, forced") {
  if (gpu::current_device().smem_per_block_optin < 227 * 1024) {
    skip_test_case("which of mobilenet_v2's blocks fit a block's shared memory is counted for an H100's 227 KB");
    return;
  }
  check_fused_plans({"mobilenet_v2", 96, "mbconv_tile", "inverted residual block", 17, {1, 5}, INT64_MAX, 31, 16});
}

// Forced to chains, the zoo's consecutive block steps run as chains of blocks in one launch, and the networks still
// match the CPU backend.
TEST_CASE("inverted residual block: the planner runs consecutive blocks as one chain, forced") {
  if (gpu::current_device().arch() < 90 || max_cluster_size() < 16) {
    skip_test_case("chains of blocks run in clusters (compute capability 9.0)");
    return;
  }
  Options cpu_options;
  cpu_options.device = Device::Cpu;
  for (const std::string& name : {std::string("mobilenet_v2"), std::string("mobilenet_v3_small")}) {
    const std::string path = repo_path("models/zoo/" + name + "/model.onnx");
    const int64_t size = name == "mobilenet_v2" ? 96 : 128;
    const Model cpu_model = Model::load(path, cpu_options);
    set_log_level(LogLevel::Off);
    const Model model = Model::load(path, forced_gpu_options("mbchain"));
    for (int64_t batch : {1, 3}) {
      const std::string what = name + " batch " + std::to_string(batch);
      const std::string plan = model.describe_plan(batch);
      CHECK_MESSAGE(plan.find("one launch, mbchain_cl") != std::string::npos, what << ":\n" << plan);
      const Tensor x{{batch, 3, size, size}, random_floats(static_cast<size_t>(batch * 3 * size * size), 41u)};
      CHECK_MESSAGE(relative_error(Context(model).run({x})[0].data, Context(cpu_model).run({x})[0].data) < kTolerance,
                    what);
    }
    set_log_level(LogLevel::Warn);
  }
}

}  // namespace cnnrt::testing
