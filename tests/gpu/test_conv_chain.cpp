// The one-launch chain kernel (kernels/conv_chain.cuh) against the CPU reference: conv + epilogue, conv +
// epilogue, then the fully connected layer, each step the CPU backend's own kernels. Random inputs and
// weights (never zeros), poisoned outputs, odd sizes (1, 7, 31, 33, 1000), paddings, every activation kind,
// max and average pooling, every cluster size the variant list offers, each variant both as built and as
// compiled for the case's shapes (kernels/conv_chain_jit.hpp; CNNRT_TEST_JIT=0 leaves those out), each reading
// the image from device memory and, once a cluster, from mapped host memory; and, through the public API, the
// planner's choice of the chain for the shipped LeNet against the CPU backend (on host data and device data).
#include <doctest/doctest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cnnrt/cnnrt.hpp"
#include "conv_test_util.hpp"
#include "gpu/device_info.hpp"
#include "gpu_test_util.hpp"
#include "kernel_test_util.hpp"
#include "kernels/conv_chain.cuh"
#include "kernels/conv_chain_jit.hpp"
#include "kernels/dense_chain.cuh"
#include "tests/model_builder.hpp"

using namespace cnnrt;
using namespace cnnrt::testing;

namespace {

struct ChainCase {
  Layer a, b;        // a.N is the batch; b's input size follows from a's output
  int n = 10;        // dense outputs
  bool trans_b = true;
  float alpha = 1.0f, beta = 1.0f;
  int c_kind = 1;    // 0: no C, 1: C of shape [N], 2: scalar C
  kernels::ParamAct dense_act = kernels::ParamAct::None;
  struct Dense {
    int n;
    kernels::ParamAct act;
    bool bias;
  };
  std::vector<Dense> tail;  // dense layers after the first (ConvChainDesc::tail), each [N][K] with an optional bias
};

kernels::ChainConv chain_conv(const Reference& r, const DeviceBuffer& w, const DeviceBuffer& bias) {
  kernels::ChainConv c{r.g, r.e, w.get()};
  c.e.bias = bias.get();
  return c;
}

// The variant compiled for `d`'s shapes, compiled once per source (the batches of a case share it).
const kernels::ChainJitKernel& compiled_chain(const kernels::ConvChainDesc& d, const kernels::ConvChainVariant& v) {
  static std::map<std::string, std::unique_ptr<kernels::ChainJitKernel>> compiled;
  std::unique_ptr<kernels::ChainJitKernel>& k = compiled[kernels::conv_chain_jit_source(d, v)];
  if (!k) k = std::make_unique<kernels::ChainJitKernel>(d, v);
  return *k;
}

// Runs every variant of `cc` on poisoned outputs, as built and as compiled for its shapes; returns the names
// of the variants that ran. `unzeroed` (if given)
// counts those whose layout leaves B's margins unwritten (ChainLayout::zero_margins false).
std::vector<std::string> check_chain(ChainCase cc, uint32_t seed, int* unzeroed = nullptr) {
  const Layer& A = cc.a;
  const ir::HostTensor x = random_tensor({A.N, 1, A.H, A.W}, seed);
  const ir::HostTensor wa = random_tensor({A.F, 1, A.K, A.K}, seed + 1, -0.5f, 0.5f);
  const ir::HostTensor ba = random_tensor({A.F}, seed + 2, -0.2f, 0.2f);
  const Reference ra = reference(A, x, wa, ba, nullptr);
  Layer B = cc.b;
  B.N = A.N;
  B.C = A.F;
  B.H = static_cast<int>(ra.output.shape()[2]);
  B.W = static_cast<int>(ra.output.shape()[3]);
  const ir::HostTensor wb = random_tensor({B.F, B.C, B.K, B.K}, seed + 3, -0.3f, 0.3f);
  const ir::HostTensor bb = random_tensor({B.F}, seed + 4, -0.2f, 0.2f);
  const Reference rb = reference(B, ra.output, wb, bb, nullptr);
  const int64_t k = rb.output.numel() / A.N;
  const ir::HostTensor features = ir::HostTensor::floats({A.N, k}, rb.output.float_values());
  const ir::HostTensor wd = random_tensor(cc.trans_b ? ir::Shape{cc.n, k} : ir::Shape{k, cc.n}, seed + 5, -0.2f, 0.2f);
  const ir::HostTensor cd = random_tensor(cc.c_kind == 2 ? ir::Shape{} : ir::Shape{cc.n}, seed + 6);
  std::vector<const ir::HostTensor*> gemm_in = {&features, &wd};
  if (cc.c_kind != 0) gemm_in.push_back(&cd);
  ir::HostTensor want = cpu_reference("Gemm",
                                      make_attrs({{"alpha", cc.alpha}, {"beta", cc.beta}, {"transA", int64_t(0)},
                                                  {"transB", int64_t(cc.trans_b)}}),
                                      gemm_in, {A.N, cc.n});
  apply_test_epilogue(want, nullptr, cc.dense_act);
  std::vector<ir::HostTensor> tail_w, tail_b;
  for (size_t t = 0; t < cc.tail.size(); ++t) {
    const ChainCase::Dense& td = cc.tail[t];
    const int64_t tk = want.shape()[1];
    tail_w.push_back(random_tensor({td.n, tk}, seed + 7 + 2 * static_cast<uint32_t>(t), -0.3f, 0.3f));
    tail_b.push_back(random_tensor({td.n}, seed + 8 + 2 * static_cast<uint32_t>(t), -0.2f, 0.2f));
    std::vector<const ir::HostTensor*> in = {&want, &tail_w.back()};
    if (td.bias) in.push_back(&tail_b.back());
    ir::HostTensor next =
        cpu_reference("Gemm", make_attrs({{"transA", int64_t(0)}, {"transB", int64_t(1)}}), in, {A.N, td.n});
    apply_test_epilogue(next, nullptr, td.act);
    want = std::move(next);
  }
  const int64_t out_n = want.shape()[1];

  // The dense layer as the kernel takes it: [N][K] with alpha folded in, beta * C per output.
  std::vector<float> dense(static_cast<size_t>(cc.n * k)), dense_bias(static_cast<size_t>(cc.n));
  for (int64_t i = 0; i < cc.n; ++i) {
    for (int64_t p = 0; p < k; ++p) dense[i * k + p] = cc.alpha * wd.f32()[cc.trans_b ? i * k + p : p * cc.n + i];
    dense_bias[i] = cc.beta * cd.f32()[cc.c_kind == 2 ? 0 : i];
  }
  const MappedHostBuffer mapped_x(x.float_values()), done(std::vector<float>(1));
  const DeviceBuffer dx(x.float_values()), dwa(wa.float_values()), dba(ba.float_values()), dwb(wb.float_values()),
      dbb(bb.float_values()), dbd(dense_bias);
  kernels::ConvChainDesc d;
  d.batch = A.N;
  d.a = chain_conv(ra, dwa, dba);
  d.b = chain_conv(rb, dwb, dbb);
  d.fc.N = cc.n;
  const DeviceBuffer dwd(kernels::chain_fc_weights(dense, d));  // the kernel's layout of [N][K]
  d.fc.weights = dwd.get();
  d.fc.bias = cc.c_kind == 0 ? nullptr : dbd.get();
  kernels::Epilogue dense_epilogue;
  set_test_activation(dense_epilogue, cc.dense_act);
  d.fc.act = dense_epilogue.param_act;
  d.fc.alpha = dense_epilogue.alpha;
  d.fc.beta = dense_epilogue.beta;
  std::vector<DeviceBuffer> tail_buffers;
  tail_buffers.reserve(2 * cc.tail.size());
  d.tail_count = static_cast<int>(cc.tail.size());
  for (size_t t = 0; t < cc.tail.size(); ++t) {
    kernels::ChainDense& td = d.tail[t];
    td.N = cc.tail[t].n;
    // Padded to whole float4s (kernels::kChainTailAlign), as the planner uploads them.
    auto padded = [](std::vector<float> v) {
      v.resize((v.size() + kernels::kChainTailAlign - 1) / kernels::kChainTailAlign * kernels::kChainTailAlign, 0.0f);
      return v;
    };
    td.weights = tail_buffers.emplace_back(padded(tail_w[t].float_values())).get();
    td.bias = cc.tail[t].bias ? tail_buffers.emplace_back(padded(tail_b[t].float_values())).get() : nullptr;
    kernels::Epilogue e;
    set_test_activation(e, cc.tail[t].act);
    td.act = e.param_act;
    td.alpha = e.alpha;
    td.beta = e.beta;
  }

  int device = 0;
  GPU_CHECK(cudaGetDevice(&device));
  int smem_optin = 0;
  GPU_CHECK(cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  std::string why;
  const bool supported = kernels::conv_chain_supports(d, smem_optin, &why);
  REQUIRE_MESSAGE(supported, why);
  const auto variants = kernels::conv_chain_variants(d, smem_optin);
  std::vector<std::string> ran;
  for (const kernels::ConvChainVariant& v : variants) {
    if (v.layout.ranks > max_cluster_size()) continue;
    ran.push_back(v.name);
    if (unzeroed && !v.layout.zero_margins) ++*unzeroed;
    const std::string what = v.name + " batch " + std::to_string(A.N) + " image " + std::to_string(A.H) + "x" +
                             std::to_string(A.W) + " seed " + std::to_string(seed);
    note_check_point(what);
    DeviceBuffer y(static_cast<size_t>(A.N * out_n));
    kernels::launch_conv_chain(v, dx.get(), y.get(), d, nullptr);
    finish_launch();
    const std::vector<float> first = y.download();
    CHECK_MESSAGE(relative_error(first, want.float_values()) < kTolerance, what);
    y.poison();
    kernels::launch_conv_chain(v, dx.get(), y.get(), d, nullptr);
    finish_launch();
    CHECK_MESSAGE(y.download() == first, what << ": a second run differs (the sums must run in a fixed order)");
    // The image in mapped host memory, read once a cluster (a share a rank, passed to the others): the same
    // sums in the same order.
    // With the done flag (mapped host memory): set once y is written at batch 1; left alone at larger batches.
    y.poison();
    volatile unsigned* flag = reinterpret_cast<volatile unsigned*>(done.host());
    *flag = 0u;
    kernels::launch_conv_chain(v, mapped_x.device(), y.get(), d, nullptr, true, reinterpret_cast<unsigned*>(done.device()));
    finish_launch();
    CHECK_MESSAGE(y.download() == first, what << ": the image read once a cluster from host memory differs");
    CHECK_MESSAGE(*flag == (A.N == 1 ? 1u : 0u), what << ": the done flag");
    if (env_int("CNNRT_TEST_JIT", 1) == 0) continue;
    // Compiled for these shapes: the same code with the shapes as constants, so the same sums in the same
    // order. Equal to the built kernel's output up to the compilers' freedom to contract a*b+c differently.
    const kernels::ChainJitKernel& jit = compiled_chain(d, v);
    note_check_point(what + " (_jit)");
    y.poison();
    jit.launch(dx.get(), y.get(), d, nullptr);
    finish_launch();
    const std::vector<float> compiled = y.download();
    CHECK_MESSAGE(relative_error(compiled, want.float_values()) < kTolerance, what << " (_jit)");
    CHECK_MESSAGE(relative_error(compiled, first) < 1e-6, what << " (_jit) against the built kernel");
    y.poison();
    jit.launch(dx.get(), y.get(), d, nullptr);
    finish_launch();
    CHECK_MESSAGE(y.download() == compiled, what << " (_jit): a second run differs");
    y.poison();
    jit.launch(mapped_x.device(), y.get(), d, nullptr, true);
    finish_launch();
    CHECK_MESSAGE(y.download() == compiled, what << " (_jit): the image read once a cluster from host memory differs");
  }
  return ran;
}

using kernels::FusedPool;
using kernels::ParamAct;

Layer conv(int F, int K, int pad_begin, int pad_end, ParamAct act, FusedPool pool = FusedPool::None, int pool_k = 2,
           int pool_s = 2, int pool_pad = 0, bool ceil = false) {
  Layer l{1, 1, 1, 1, F, K, 1, pad_begin, pad_begin, pad_end, pad_end, 1, act, false, pool, pool_k, pool_s, pool_pad, ceil};
  return l;
}

// How many of `names` are window-lane variants (B pooled by one warp per output: the "_bw" suffix).
int window_lane_variants(const std::vector<std::string>& names) {
  int n = 0;
  for (const std::string& name : names) n += name.size() > 3 && name.compare(name.size() - 3, 3, "_bw") == 0 ? 1 : 0;
  return n;
}

// How many of `names` pool A in registers, lanes of a warp per pooled value ("_aw").
int a_window_variants(const std::vector<std::string>& names) {
  int n = 0;
  for (const std::string& name : names) n += name.find("_aw") != std::string::npos ? 1 : 0;
  return n;
}

}  // namespace

// CNNRT_TEST_MAX_BATCH=N leaves out the larger batches (compute-sanitizer's racecheck takes minutes on 1000).
// CNNRT_TEST_MAX_CLUSTER=N leaves out the variants of larger clusters (docs/reliability.md: synccheck reports
// false "divergent thread" errors on clusters of 16, also on kernels/lab/cluster_sync_check.cu, which has no
// divergent thread).
TEST_CASE("conv chain: LeNet shapes, every cluster size, batches 1, 7, 33 and 1000") {
  const int64_t max_batch = env_int("CNNRT_TEST_MAX_BATCH", 1000);
  int variants = 0, lanes = 0, a_windows = 0, batches = 0;
  for (int batch : {1, 7, 33, 1000}) {
    if (batch > max_batch) continue;
    ++batches;
    ChainCase cc;
    cc.a = conv(8, 5, 2, 2, ParamAct::Relu, FusedPool::Max, 2, 2);
    cc.a.N = batch;
    cc.a.H = cc.a.W = 28;
    cc.b = conv(16, 5, 2, 2, ParamAct::Relu, FusedPool::Max, 3, 3);
    const std::vector<std::string> ran = check_chain(cc, 100 + batch);
    variants += static_cast<int>(ran.size());
    lanes += window_lane_variants(ran);
    a_windows += a_window_variants(ran);
  }
  int sizes = 0;  // of the cluster sizes built (8, 16, 4, 2, 1), those tested
  for (int ranks : {8, 16, 4, 2, 1}) sizes += ranks <= max_cluster_size() ? 1 : 0;
  // Both ways of pooling (in registers: A's 2x2 windows 4 lanes each, B's 8 channels x 3 window rows a warp
  // each; and through maps in shared memory) at every cluster size.
  CHECK(variants == 2 * batches * sizes);
  CHECK(lanes == batches * sizes);
  CHECK(a_windows == batches * sizes);
}

TEST_CASE("conv chain: odd sizes, paddings, pooling kinds and activations") {
  int variants = 0;
  {  // 31x33, 3x3 with asymmetric padding, LeakyRelu + overlapping average pool, Clip without pooling; A^T B.
    ChainCase cc;
    cc.a = conv(5, 3, 0, 2, ParamAct::LeakyRelu, FusedPool::Avg, 3, 2, 1);
    cc.a.N = 7;
    cc.a.H = 31;
    cc.a.W = 33;
    cc.b = conv(4, 3, 1, 1, ParamAct::Clip);
    cc.n = 33;
    cc.trans_b = false;
    cc.alpha = 0.5f;
    cc.beta = 2.0f;
    cc.c_kind = 2;
    cc.dense_act = ParamAct::Sigmoid;
    variants += static_cast<int>(check_chain(cc, 7).size());
  }
  {  // 1x1 image: every window mostly padding; one filter in A, Tanh everywhere, no C.
    ChainCase cc;
    cc.a = conv(1, 3, 1, 1, ParamAct::Tanh);
    cc.a.H = cc.a.W = 1;
    cc.b = conv(2, 3, 1, 1, ParamAct::Tanh);
    cc.n = 1;
    cc.c_kind = 0;
    cc.dense_act = ParamAct::Tanh;
    variants += static_cast<int>(check_chain(cc, 1).size());
  }
  {  // 7x7, 5x5 without padding on A (3x3 out), ceil-mode max pool with padding, 16 filters of B.
    ChainCase cc;
    cc.a = conv(3, 5, 0, 0, ParamAct::Sigmoid, FusedPool::Max, 2, 2, 1, true);
    cc.a.N = 33;
    cc.a.H = cc.a.W = 7;
    cc.b = conv(16, 5, 2, 2, ParamAct::None, FusedPool::Avg, 2, 1);
    cc.n = 1000;
    variants += static_cast<int>(check_chain(cc, 33).size());
  }
  CHECK(variants > 0);
}

// The dense layers after the first (ConvChainDesc::tail), run by rank 0 from shared memory: LeNet-5's
// (120 -> 84 Tanh -> 10: four lanes an output), a single wide one (300 outputs: a thread each), and one
// output after a one-output layer; with and without bias, at every cluster size and batches 1, 7 and 33.
TEST_CASE("conv chain: dense layers after the first, as LeNet-5's F6 and output layers") {
  int variants = 0;
  for (int batch : {1, 7, 33}) {
    ChainCase cc;
    cc.a = conv(6, 5, 0, 0, ParamAct::Tanh, FusedPool::Avg, 2, 2);
    cc.a.N = batch;
    cc.a.H = cc.a.W = 32;
    cc.b = conv(16, 5, 0, 0, ParamAct::Tanh, FusedPool::Avg, 2, 2);
    cc.n = 120;
    cc.dense_act = ParamAct::Tanh;
    cc.tail = {{84, ParamAct::Tanh, true}, {10, ParamAct::None, batch != 7}};
    variants += static_cast<int>(check_chain(cc, 40 + batch).size());
  }
  {
    ChainCase cc;
    cc.a = conv(4, 3, 1, 1, ParamAct::Relu, FusedPool::Max, 2, 2);
    cc.a.N = 7;
    cc.a.H = 31;
    cc.a.W = 33;
    cc.b = conv(8, 3, 1, 1, ParamAct::Relu, FusedPool::Max, 2, 2);
    cc.n = 33;
    cc.dense_act = ParamAct::Relu;
    cc.tail = {{300, ParamAct::Sigmoid, true}};
    variants += static_cast<int>(check_chain(cc, 50).size());
    cc.n = 1;
    cc.tail = {{1, ParamAct::LeakyRelu, true}, {7, ParamAct::Tanh, false}};
    variants += static_cast<int>(check_chain(cc, 51).size());
  }
  CHECK(variants > 0);
}

// The pooling in registers at its edges. B's window lanes: every lane of the warp busy (11 channels -> 16
// channel lanes, some idle, x 2 window rows), padded and ceil-mode windows that leave the conv output (the
// lanes' row loads in the margins), overlapping 3x3/2 windows; a B too wide for a warp (16 channels x 3 rows),
// which only the grouped path may run. A's windows as lanes: none (no pooling, a lane a value), 2x2, ceil-mode
// 3x3/2 max and average windows that overhang the conv output, a 4x4/3 window (16 lanes, overlapping) and a
// 5x5/5 one (25 of a warp's 32 lanes); padded pools, which only the map path runs.
TEST_CASE("conv chain: pooling in registers with padded, ceil-mode and overlapping pools, and where it does not fit") {
  {
    ChainCase cc;
    cc.a = conv(11, 3, 1, 1, ParamAct::Relu);
    cc.a.N = 3;
    cc.a.H = 33;
    cc.a.W = 31;
    cc.b = conv(8, 3, 1, 1, ParamAct::LeakyRelu, FusedPool::Max, 2, 2, 1, true);
    const std::vector<std::string> ran = check_chain(cc, 11);
    CHECK(window_lane_variants(ran) > 0);
    CHECK(window_lane_variants(ran) < static_cast<int>(ran.size()));
    CHECK(a_window_variants(ran) == window_lane_variants(ran));
  }
  {
    ChainCase cc;
    cc.a = conv(8, 5, 2, 2, ParamAct::Relu, FusedPool::Max, 2, 2);
    cc.a.N = 7;
    cc.a.H = cc.a.W = 31;
    cc.b = conv(16, 5, 2, 2, ParamAct::Relu, FusedPool::Max, 3, 2, 1, true);
    CHECK(window_lane_variants(check_chain(cc, 12)) > 0);
  }
  {
    ChainCase cc;
    cc.a = conv(8, 5, 2, 2, ParamAct::None, FusedPool::Avg, 3, 3, 1);
    cc.a.N = 2;
    cc.a.H = cc.a.W = 28;
    cc.b = conv(4, 5, 1, 3, ParamAct::Sigmoid, FusedPool::Avg, 3, 2, 1, true);
    const std::vector<std::string> ran = check_chain(cc, 13);
    CHECK(window_lane_variants(ran) > 0);
    CHECK(a_window_variants(ran) == 0);  // A's pool is padded
  }
  {
    ChainCase cc;
    cc.a = conv(6, 5, 2, 2, ParamAct::Relu, FusedPool::Max, 3, 2, 0, true);
    cc.a.N = 2;
    cc.a.H = cc.a.W = 28;
    cc.b = conv(8, 5, 2, 2, ParamAct::Relu, FusedPool::Max, 2, 2);
    CHECK(a_window_variants(check_chain(cc, 15)) > 0);
  }
  {
    ChainCase cc;
    cc.a = conv(4, 3, 0, 0, ParamAct::Sigmoid, FusedPool::Avg, 3, 2, 0, true);
    cc.a.N = 5;
    cc.a.H = 30;
    cc.a.W = 32;
    cc.b = conv(4, 3, 1, 1, ParamAct::Tanh, FusedPool::Max, 3, 3);
    CHECK(a_window_variants(check_chain(cc, 16)) > 0);
  }
  {
    ChainCase cc;
    cc.a = conv(16, 3, 1, 1, ParamAct::Relu, FusedPool::Max, 2, 2);
    cc.a.N = 1;
    cc.a.H = cc.a.W = 28;
    cc.b = conv(8, 3, 1, 1, ParamAct::Relu, FusedPool::Max, 3, 3);
    const std::vector<std::string> ran = check_chain(cc, 14);
    CHECK(!ran.empty());
    CHECK(window_lane_variants(ran) == 0);
    CHECK(a_window_variants(ran) > 0);
  }
  // B unpadded with every pooling window inside its conv output: its window lanes read no margin, which is
  // then left unwritten; with a ceil-mode window past the conv output (or any pad) the margins are zeroed.
  for (const bool overhang : {false, true}) {
    ChainCase cc;
    cc.a = conv(6, 5, 2, 2, ParamAct::Relu, FusedPool::Max, 2, 2);
    cc.a.N = 7;
    cc.a.H = cc.a.W = 28;
    cc.b = conv(16, 5, 0, 0, ParamAct::Relu, FusedPool::Max, overhang ? 3 : 2, 2, 0, overhang);
    int unzeroed = 0;
    const std::vector<std::string> ran = check_chain(cc, overhang ? 24 : 23, &unzeroed);
    CHECK(window_lane_variants(ran) > 0);
    CHECK(unzeroed == (overhang ? 0 : window_lane_variants(ran)));
  }
  for (const int window : {4, 5}) {
    ChainCase cc;
    cc.a = conv(5, 3, 1, 1, ParamAct::Relu, window == 4 ? FusedPool::Max : FusedPool::Avg, window,
                window == 4 ? 3 : 5, 0, true);
    cc.a.N = 3;
    cc.a.H = 33;
    cc.a.W = 31;
    cc.b = conv(4, 3, 1, 1, ParamAct::Relu, FusedPool::Max, 2, 2);
    CHECK(a_window_variants(check_chain(cc, 17 + window)) > 0);
  }
}

TEST_CASE("conv chain: the planner runs LeNet as one launch when asked, and it matches the CPU backend") {
  if (gpu::current_device().arch() < 90) {
    testing::skip_test_case("the chain kernel needs thread-block clusters (compute capability 9.0)");
    return;
  }
  Options cpu_options;
  cpu_options.device = Device::Cpu;
  const Model cpu_model = Model::load(repo_path("models/fashion_lenet.onnx"), cpu_options);
  for (const std::string forced : {"chain", "chain_k5k5_cl16_aw_bw_jit", "separate_steps"}) {
    set_log_level(LogLevel::Off);  // --force-kernel warns for every conv it cannot force
    const Model model = Model::load(repo_path("models/fashion_lenet.onnx"), forced_gpu_options(forced));
    for (int64_t batch : {1, 7, 64}) {
      const std::string plan = model.describe_plan(batch);
      const bool one_launch = plan.find("chain_k5k5_cl") != std::string::npos;
      CHECK_MESSAGE(one_launch == (forced != "separate_steps"), forced << " batch " << batch << ":\n" << plan);
      CHECK_MESSAGE((plan.find("_jit") != std::string::npos) == (forced == "chain_k5k5_cl16_aw_bw_jit"), plan);
      Tensor x{{batch, 1, 28, 28}, random_floats(static_cast<size_t>(batch) * 784, 9 + static_cast<uint32_t>(batch))};
      Context context(model);
      const Tensor gpu = context.run({x})[0];  // small: the input read in place in mapped host memory
      const Tensor cpu = Context(cpu_model).run({x})[0];
      CHECK_MESSAGE(relative_error(gpu.data, cpu.data) < kTolerance, forced << " batch " << batch);
      // The same context on device buffers, then on host data again (the step bound both ways in turn).
      const DeviceBuffer dx(x.data);
      DeviceBuffer dy(cpu.data.size());
      const float* in = dx.get();
      float* out = dy.get();
      context.enqueue(&in, &out, batch);
      context.synchronize();
      CHECK_MESSAGE(dy.download() == gpu.data, forced << " batch " << batch << " on device buffers");
      CHECK_MESSAGE(context.run({x})[0].data == gpu.data, forced << " batch " << batch << " on host data again");
    }
    set_log_level(LogLevel::Warn);
  }
}

namespace {

struct DenseCase {
  int batch = 1;
  int k = 1;
  int pool = 1;  // values averaged into each input (a global average pool in front)
  struct Layer {
    int n;
    kernels::ParamAct act;
    bool bias;
  };
  std::vector<Layer> layers;
  int conv_channels = 0;  // a 1x1 convolution of that many channels to k filters in front of the pool, or 0
  kernels::ParamAct conv_act = kernels::ParamAct::None;
  bool conv_bias = true;
};

// Every variant of the dense chain kernel (kernels/dense_chain.cuh) against the CPU's Gemms, twice (the second
// run must match the first bit for bit: the partials are summed in a fixed order); returns the variants run.
int check_dense_chain(const DenseCase& dc, uint32_t seed) {
  const bool conv = dc.conv_channels > 0;
  const ir::HostTensor input = random_tensor({dc.batch, conv ? dc.conv_channels : dc.k, dc.pool, 1}, seed);
  const std::vector<float> x = input.float_values();
  // With a convolution in front: its filters [k][channels] and bias, its activated output the pool's input.
  const ir::HostTensor conv_w = random_tensor({dc.k, std::max(1, dc.conv_channels), 1, 1}, seed + 101, -0.3f, 0.3f);
  const ir::HostTensor conv_b = random_tensor({dc.k}, seed + 102, -0.2f, 0.2f);
  const ir::HostTensor pooled_in = conv ? [&] {
    std::vector<const ir::HostTensor*> in = {&input, &conv_w};
    if (dc.conv_bias) in.push_back(&conv_b);
    const ir::Attributes pointwise = make_attrs({{"kernel_shape", std::vector<int64_t>{1, 1}},
                                                 {"strides", std::vector<int64_t>{1, 1}},
                                                 {"dilations", std::vector<int64_t>{1, 1}},
                                                 {"pads", std::vector<int64_t>{0, 0, 0, 0}},
                                                 {"group", int64_t(1)}});
    ir::HostTensor y = cpu_reference("Conv", pointwise, in, {dc.batch, dc.k, dc.pool, 1});
    apply_test_epilogue(y, nullptr, dc.conv_act);
    return y;
  }() : input;
  ir::HostTensor want = dc.pool == 1 && !conv ? ir::HostTensor::floats({dc.batch, dc.k}, x) : [&] {
    ir::HostTensor pooled = cpu_reference("GlobalAveragePool", {}, {&pooled_in}, {dc.batch, dc.k, 1, 1});
    return ir::HostTensor::floats({dc.batch, dc.k}, pooled.float_values());
  }();
  kernels::DenseChainDesc d;
  d.batch = dc.batch;
  d.k = dc.k;
  d.pool = dc.pool;
  d.count = static_cast<int>(dc.layers.size());
  if (conv) {
    d.conv.channels = dc.conv_channels;
    kernels::Epilogue e;
    set_test_activation(e, dc.conv_act);
    d.conv.act = e.param_act;
    d.conv.alpha = e.alpha;
    d.conv.beta = e.beta;
  }
  std::vector<std::vector<float>> weights, biases;
  for (size_t t = 0; t < dc.layers.size(); ++t) {
    const DenseCase::Layer& l = dc.layers[t];
    const int64_t k = want.shape()[1];
    const ir::HostTensor w = random_tensor({l.n, k}, seed + 1 + 2 * static_cast<uint32_t>(t), -0.3f, 0.3f);
    const ir::HostTensor b = random_tensor({l.n}, seed + 2 + 2 * static_cast<uint32_t>(t), -0.2f, 0.2f);
    std::vector<const ir::HostTensor*> in = {&want, &w};
    if (l.bias) in.push_back(&b);
    ir::HostTensor next = cpu_reference("Gemm", make_attrs({{"transA", int64_t(0)}, {"transB", int64_t(1)}}), in,
                                        {dc.batch, l.n});
    apply_test_epilogue(next, nullptr, l.act);
    want = std::move(next);
    weights.push_back(w.float_values());
    biases.push_back(b.float_values());
    kernels::ChainDense& D = d.layers[t];
    D.N = l.n;
    kernels::Epilogue e;
    set_test_activation(e, l.act);
    D.act = e.param_act;
    D.alpha = e.alpha;
    D.beta = e.beta;
  }
  // Later layers and every bias padded to whole float4s (kernels::kChainTailAlign), as the planner uploads them.
  auto padded = [](std::vector<float> v) {
    v.resize((v.size() + kernels::kChainTailAlign - 1) / kernels::kChainTailAlign * kernels::kChainTailAlign, 0.0f);
    return v;
  };
  std::vector<DeviceBuffer> buffers;
  buffers.reserve(2 * dc.layers.size());
  for (size_t t = 0; t < dc.layers.size(); ++t) {
    if (t > 0) d.layers[t].weights = buffers.emplace_back(padded(weights[t])).get();
    d.layers[t].bias = dc.layers[t].bias ? buffers.emplace_back(padded(biases[t])).get() : nullptr;
  }
  const DeviceBuffer conv_bias(conv_b.float_values());
  if (conv && dc.conv_bias) d.conv.bias = conv_bias.get();
  int device = 0, smem_optin = 0;
  GPU_CHECK(cudaGetDevice(&device));
  GPU_CHECK(cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  std::string why;
  REQUIRE_MESSAGE(kernels::dense_chain_supports(d, smem_optin, &why), why);
  const DeviceBuffer dx(x);
  const MappedHostBuffer done(std::vector<float>(1));
  int ran = 0;
  for (const kernels::DenseChainVariant& v : kernels::dense_chain_variants(d, smem_optin)) {
    if (v.layout.ranks > max_cluster_size()) continue;
    const std::string what = v.name + " batch " + std::to_string(dc.batch) + " k " + std::to_string(dc.k) + " seed " +
                             std::to_string(seed);
    note_check_point(what);
    const DeviceBuffer w0(kernels::dense_chain_weights(weights[0], d, v.layout));
    const DeviceBuffer cw(conv ? kernels::dense_chain_conv_weights(conv_w.float_values(), d, v.layout)
                               : std::vector<float>(4, 0.0f));
    kernels::DenseChainDesc dv = d;
    dv.layers[0].weights = w0.get();
    if (conv) dv.conv.weights = cw.get();
    DeviceBuffer y(static_cast<size_t>(want.numel()));
    const std::vector<float> first =
        check_twice(what, y, want, [&] { kernels::launch_dense_chain(v, dx.get(), y.get(), dv, nullptr); });
    // With the done flag (mapped host memory): set once y is written at batch 1; left alone at larger batches.
    volatile unsigned* flag = reinterpret_cast<volatile unsigned*>(done.host());
    *flag = 0u;
    y.poison();
    kernels::launch_dense_chain(v, dx.get(), y.get(), dv, nullptr, reinterpret_cast<unsigned*>(done.device()));
    finish_launch();
    CHECK_MESSAGE(y.download() == first, what << ": with the done flag");
    CHECK_MESSAGE(*flag == (dc.batch == 1 ? 1u : 0u), what << ": the done flag");
    ++ran;
  }
  return ran;
}

}  // namespace

// kws_cnn's head (1920 -> 16 -> 128 ReLU -> 12) and vgg_small's (2048 -> 128 ReLU -> 10) at batches 1, 7 and 33;
// odd sizes: 1000 and 31 inputs (the last rank's slice partly past k), one input, one output, 33 outputs,
// every activation kind once, with and without biases.
TEST_CASE("dense chain: classifier heads, odd sizes, every cluster size") {
  using kernels::ParamAct;
  int ran = 0;
  for (int batch : {1, 7, 33}) {
    ran += check_dense_chain({batch, 1920, 1, {{16, ParamAct::None, true}, {128, ParamAct::Relu, true}, {12, ParamAct::None, true}}},
                             60 + batch);
    ran += check_dense_chain({batch, 2048, 1, {{128, ParamAct::Relu, true}, {10, ParamAct::None, true}}}, 70 + batch);
  }
  ran += check_dense_chain({3, 1000, 1, {{33, ParamAct::Sigmoid, false}, {7, ParamAct::Tanh, true}, {1, ParamAct::LeakyRelu, true}}}, 81);
  ran += check_dense_chain({5, 31, 1, {{1, ParamAct::Clip, true}, {33, ParamAct::HardSwish, false}}}, 82);
  ran += check_dense_chain({1, 1, 1, {{7, ParamAct::Gelu, true}, {31, ParamAct::Swish, true}}}, 83);
  CHECK(ran > 20);
}

// With a global average pool in front: resnet18_narrow's (128 x 7x7 -> 1000), resnet20's (64 x 8x8 -> 10),
// shufflenet_v1's (480 x 7x7 -> 100), at batches 1 and 7; odd sizes with two and three layers after it.
TEST_CASE("dense chain: a global average pool and one to three dense layers") {
  using kernels::ParamAct;
  int ran = 0;
  for (int batch : {1, 7}) {
    ran += check_dense_chain({batch, 128, 49, {{1000, ParamAct::None, true}}}, 90 + batch);
    ran += check_dense_chain({batch, 64, 64, {{10, ParamAct::None, true}}}, 100 + batch);
    ran += check_dense_chain({batch, 480, 49, {{100, ParamAct::None, true}}}, 110 + batch);
  }
  ran += check_dense_chain({3, 33, 7, {{31, ParamAct::Relu, false}, {5, ParamAct::Sigmoid, true}}}, 121);
  ran += check_dense_chain({2, 5, 100, {{3, ParamAct::Tanh, true}, {9, ParamAct::None, true}, {1, ParamAct::Relu, false}}}, 122);
  CHECK(ran > 15);
}

// With a 1x1 convolution and its activation in front of the pool: MobileNet v2's head (112 channels -> 1280 over
// 3x3, Clip, -> 100) and the start of mobilenet_v3_small's (48 -> 288 over 4x4, HardSwish, -> 512 HardSwish), at
// batches 1 and 7; odd sizes: one channel, one pixel, 7 and 33 channels, 31 and 1000 filters (the last rank's slice
// partly past k), no bias, a 7x7 map.
TEST_CASE("dense chain: a 1x1 convolution, its activation, a global average pool and dense layers") {
  using kernels::ParamAct;
  int ran = 0;
  for (int batch : {1, 7}) {
    ran += check_dense_chain({batch, 1280, 9, {{100, ParamAct::None, true}}, 112, ParamAct::Clip}, 130 + batch);
    ran += check_dense_chain({batch, 288, 16, {{512, ParamAct::HardSwish, true}}, 48, ParamAct::HardSwish},
                             140 + batch);
  }
  ran += check_dense_chain({3, 31, 49, {{5, ParamAct::None, true}}, 7, ParamAct::Relu, false}, 151);
  ran += check_dense_chain({1, 1000, 1, {{10, ParamAct::Sigmoid, false}}, 33, ParamAct::Swish}, 152);
  ran += check_dense_chain({2, 33, 7, {{31, ParamAct::Tanh, true}, {1, ParamAct::None, true}}, 1, ParamAct::LeakyRelu},
                           153);
  CHECK(ran > 15);
}

// A classifier's head from its last 1x1 convolution on (24 -> 200 channels over 3x3, ReLU, global average pool,
// 200 -> 37 + ReLU, 37 -> 10) through the planner: forced onto the dense chain kernel with the convolution, the
// plan runs it as one launch; forced apart and measured, as the planner chooses. The outputs match the CPU
// backend's at batches 1 and 3 every way.
TEST_CASE("dense chain: the planner runs a 1x1 convolution, its pool and the dense layers after them as one launch") {
  if (gpu::current_device().arch() < 90) {
    testing::skip_test_case("the dense chain kernel needs thread-block clusters (compute capability 9.0)");
    return;
  }
  ModelBuilder m;
  m.input("x", {-1, 24, 3, 3}).output("y");
  m.initializer("cw", {200, 24, 1, 1}, random_floats(200 * 24, 171, -0.3f, 0.3f));
  m.initializer("cb", {200}, random_floats(200, 172, -0.2f, 0.2f));
  m.initializer("w1", {37, 200}, random_floats(37 * 200, 173, -0.2f, 0.2f));
  m.initializer("b1", {37}, random_floats(37, 174));
  m.initializer("w2", {10, 37}, random_floats(10 * 37, 175, -0.3f, 0.3f));
  m.node("Conv", {"x", "cw", "cb"}, {"c"}, "conv");
  m.node("Relu", {"c"}, {"a"}, "relu");
  m.node("GlobalAveragePool", {"a"}, {"p"}, "gap");
  ModelBuilder::attr_int(m.node("Flatten", {"p"}, {"f"}, "flatten"), "axis", 1);
  ModelBuilder::attr_int(m.node("Gemm", {"f", "w1", "b1"}, {"h"}, "fc1"), "transB", 1);
  m.node("Relu", {"h"}, {"hr"}, "fc1_relu");
  ModelBuilder::attr_int(m.node("Gemm", {"hr", "w2"}, {"y"}, "fc2"), "transB", 1);
  const std::string bytes = m.bytes();
  Options cpu_options;
  cpu_options.device = Device::Cpu;
  const Model cpu_model = Model::load_from_memory(bytes.data(), bytes.size(), cpu_options, "head.onnx");
  for (const std::string forced : {"conv_dense_chain", "separate_steps", ""}) {
    set_log_level(LogLevel::Off);  // --force-kernel warns for every step it cannot force
    Options options = forced_gpu_options(forced);
    options.tuning = forced.empty();
    const Model model = Model::load_from_memory(bytes.data(), bytes.size(), options, "head.onnx");
    set_log_level(LogLevel::Warn);
    for (int64_t batch : {1, 3}) {
      const std::string plan = model.describe_plan(batch);
      INFO("forced '" << forced << "' batch " << batch << ":\n" << plan);
      if (forced == "conv_dense_chain") CHECK(plan.find("conv_dense_chain_cl") != std::string::npos);
      if (forced == "separate_steps") CHECK(plan.find("dense_chain_cl") == std::string::npos);
      const Tensor x{{batch, 24, 3, 3},
                     random_floats(static_cast<size_t>(batch) * 24 * 9, 176 + static_cast<uint32_t>(batch))};
      const Tensor cpu = Context(cpu_model).run({x})[0];
      Context context(model);
      for (int r = 0; r < 2; ++r) CHECK(relative_error(context.run({x})[0].data, cpu.data) < kTolerance);
    }
  }
}
