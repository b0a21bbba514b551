// The network kernel (kernels/net.cuh): its convolution, pooling and global pooling ops against the CPU backend on
// random inputs into poisoned outputs, twice (bit for bit), for every variant, staged and not, with several lanes an
// output; and the
// planner running whole zoo networks through it, forced, against the CPU backend.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "cnnrt/cnnrt.hpp"
#include "conv_test_util.hpp"
#include "gpu/device_info.hpp"
#include "gpu_test_util.hpp"
#include "kernel_test_util.hpp"
#include "kernels/net.cuh"

namespace cnnrt::testing {

namespace {

using kernels::NetOp;
using kernels::NetOpKind;
using kernels::ParamAct;
using kernels::FusedPool;

// A device copy of an op table.
class DeviceOps {
 public:
  explicit DeviceOps(const std::vector<NetOp>& ops) : n_(static_cast<int>(ops.size())) {
    GPU_CHECK(cudaMalloc(&data_, ops.size() * sizeof(NetOp)));
    GPU_CHECK(cudaMemcpy(data_, ops.data(), ops.size() * sizeof(NetOp), cudaMemcpyHostToDevice));
  }
  ~DeviceOps() { cudaFree(data_); }
  DeviceOps(const DeviceOps&) = delete;
  DeviceOps& operator=(const DeviceOps&) = delete;
  const NetOp* get() const { return data_; }
  int size() const { return n_; }

 private:
  NetOp* data_ = nullptr;
  int n_ = 0;
};

// How a test configures the Conv op beyond configure_net_conv's choice.
enum class Mode { Configured, Lanes32, Unstaged1, Unstaged4, PointwiseRp1 };

// Runs layer `L` as a Conv op into a tensor of its own, then a Pool op (a pooled layer) or a GlobalPool op on it, the
// Conv configured as `mode` says; returns how many variants ran.
int check_layer(const Layer& L, Mode mode, uint32_t seed) {
  const kernels::ConvLayer layer = describe_layer(L);
  const kernels::ConvGeometry& g = layer.g;
  const ir::HostTensor x = random_tensor({L.N, L.C, L.H, L.W}, seed);
  const ir::HostTensor w = random_tensor({L.F, L.C / L.groups, L.K, L.KW()}, seed + 1, -0.5f, 0.5f);
  const ir::HostTensor b = random_tensor({L.F}, seed + 2, -0.3f, 0.3f);
  const ir::HostTensor res = random_tensor({L.N, L.F, g.OH, g.OW}, seed + 3);
  const Reference want = reference(L, x, w, b, L.residual ? &res : nullptr);
  Layer unpooled = L;
  unpooled.pool = FusedPool::None;
  const ir::HostTensor conv_out = reference(unpooled, x, w, b, L.residual ? &res : nullptr).output;
  const ir::HostTensor gap = cpu_reference("GlobalAveragePool", {}, {&conv_out}, {L.N, L.F, 1, 1});

  const DeviceBuffer dx(x.float_values()), dw(w.float_values()), db(b.float_values()), dres(res.float_values());
  DeviceBuffer conv(static_cast<size_t>(conv_out.numel())), pooled(static_cast<size_t>(want.output.numel()));
  DeviceBuffer dgap(static_cast<size_t>(gap.numel()));
  const bool pool = L.pool != FusedPool::None;
  NetOp c;
  c.kind = NetOpKind::Conv;
  c.g = g;
  c.w = dw.get();
  c.bias = db.get();
  c.act = want.e.param_act;
  c.alpha = want.e.alpha;
  c.beta = want.e.beta;
  c.in0 = 0;
  c.in0_stride = L.C * L.H * L.W;
  c.out = 1;
  c.out_stride = L.F * g.OH * g.OW;
  if (L.residual) {
    c.in1 = 2;
    c.in1_stride = c.out_stride;
  }
  c.barrier = 0;
  NetOp p;
  p.in0 = 1;
  p.in0_stride = c.out_stride;
  p.barrier = 1;
  if (pool) {
    p.kind = NetOpKind::Pool;
    p.g.C = L.F;
    p.g.H = g.OH;
    p.g.W = g.OW;
    p.g.OH = want.e.pool.PH;
    p.g.OW = want.e.pool.PW;
    p.pool = want.e.pool;
    p.out = 3;
    p.out_stride = L.F * p.g.OH * p.g.OW;
  } else {
    p.kind = NetOpKind::GlobalPool;
    p.g.C = L.F;
    p.g.H = g.OH * g.OW;
    p.pool.kind = FusedPool::Avg;
    p.out = 4;
    p.out_stride = L.F;
    p.lanes = 8;
  }
  const float* tensors[] = {dx.get(), conv.get(), dres.get(), pooled.get(), dgap.get()};
  const int optin = static_cast<int>(gpu::current_device().smem_per_block_optin);
  int ran = 0;
  for (const kernels::NetVariant& v : kernels::net_variants(gpu::current_device().arch(), max_cluster_size())) {
    kernels::configure_net_conv(c, v.ranks, kernels::net_staging_floats(2, optin));
    if (mode == Mode::Lanes32) c.lanes = 32;
    if (mode == Mode::Unstaged1 || mode == Mode::Unstaged4) {
      c.stage = 0;
      c.pointwise = 0;
      c.lanes = mode == Mode::Unstaged1 ? 1 : 4;
    }
    if (mode == Mode::PointwiseRp1) {
      if (!c.pointwise) continue;
      c.rp = 1;
      c.lanes = 2;
    }
    const kernels::NetStaging staging = c.stage ? kernels::net_conv_staging(c, v.ranks) : kernels::NetStaging{};
    const DeviceOps ops({c, p});
    const std::string what = v.name + " mode " + std::to_string(static_cast<int>(mode)) + " (stage " +
                             std::to_string(c.stage) + ", pointwise " + std::to_string(c.pointwise) + ", lanes " +
                             std::to_string(c.lanes) + "): batch " + std::to_string(L.N) + " C " +
                             std::to_string(L.C) + " F " + std::to_string(L.F) + " map " + std::to_string(L.H) + "x" +
                             std::to_string(L.W) + " k" + std::to_string(L.K) + "x" + std::to_string(L.KW()) + " groups " +
                             std::to_string(L.groups);
    note_check_point(what);
    std::vector<std::vector<float>> first;
    for (int run = 0; run < 2; ++run) {
      conv.poison();
      pooled.poison();
      dgap.poison();
      kernels::launch_net(v, ops.get(), ops.size(), tensors, 5, L.N, staging.total(), nullptr);
      finish_launch();
      std::vector<std::vector<float>> got = {conv.download(), pool ? pooled.download() : dgap.download()};
      if (run == 0) {
        CHECK_MESSAGE(relative_error(got[0], conv_out.float_values()) < kTolerance, what << ": convolution");
        CHECK_MESSAGE(relative_error(got[1], (pool ? want.output : gap).float_values()) < kTolerance,
                      what << (pool ? ": pooling" : ": global pooling"));
        first = std::move(got);
      } else {
        CHECK_MESSAGE(got == first, what << ": a second run differs");
      }
    }
    ++ran;
  }
  return ran;
}

}  // namespace

// Odd sizes (1, 7, 31, 33, 1000 channels or pixels), unequal paddings, non-square and large filters, strides 1 to 4,
// dilation, grouped and depthwise layers, every activation kind, residuals, max and average pooling after the
// convolution, batches 1 to 16; each as configured for the cluster (staged in shared memory, the GEMM layout for
// pointwise layers), with 32 lanes an output, unstaged with one and four, and pointwise at one pixel a group.
TEST_CASE("network kernel: convolutions, pooling and global pooling against the CPU backend") {
  if (kernels::net_variants(gpu::current_device().arch()).empty()) {
    skip_test_case("the network kernel needs thread-block clusters (compute capability 9.0)");
    return;
  }
  const std::vector<Layer> layers = {
      {1, 1, 33, 31, 7, 5, 1, 2, 2, 2, 2, 1, ParamAct::Relu},
      {3, 7, 31, 33, 31, 3, 2, 1, 0, 0, 1, 1, ParamAct::Clip, true, FusedPool::None, 2, 2, 0, false, 1, false, 1},
      {2, 33, 7, 7, 33, 3, 2, 1, 1, 1, 1, 33, ParamAct::None},
      {1, 32, 9, 9, 16, 3, 1, 2, 2, 2, 2, 4, ParamAct::HardSwish, false, FusedPool::None, 2, 2, 0, false, 0, false, 0, 2},
      {1, 1000, 1, 1, 7, 1, 1, 0, 0, 0, 0, 1, ParamAct::Sigmoid},
      {16, 64, 3, 3, 64, 1, 1, 0, 0, 0, 0, 1, ParamAct::Relu, true},
      {1, 3, 33, 33, 1, 11, 4, 0, 0, 0, 0, 1, ParamAct::LeakyRelu},
      {3, 16, 31, 31, 8, 3, 1, 1, 1, 1, 1, 1, ParamAct::Swish, false, FusedPool::Max, 3, 2, 1},
      {1, 8, 12, 12, 24, 1, 1, 0, 0, 0, 0, 1, ParamAct::HardSigmoid, false, FusedPool::Avg, 2, 2, 0},
      {2, 24, 7, 7, 48, 1, 1, 0, 0, 0, 0, 3, ParamAct::Tanh},
      {7, 33, 7, 5, 31, 1, 1, 0, 0, 0, 0, 1, ParamAct::Relu, true},
      {1, 64, 48, 48, 8, 3, 1, 1, 1, 1, 1, 1, ParamAct::Relu},  // beyond shared memory: unstaged as configured
  };
  uint32_t seed = 900;
  for (const Layer& L : layers) {
    for (Mode mode : {Mode::Configured, Mode::Lanes32, Mode::Unstaged1, Mode::Unstaged4}) CHECK(check_layer(L, mode, seed) > 0);
    check_layer(L, Mode::PointwiseRp1, seed);
    seed += 10;
  }
}

// Zoo networks planned with the network kernel forced (the earliest cut it is offered: every node from there on), at
// batches 1 and 3, against the CPU backend: every kind of op it runs (strided, grouped and depthwise convolutions,
// pooled ones, pools, global pools, Gemm, the squeeze-excitation Mul, BatchNormalization, ReLU, Concat copies at
// batch 3 and in place at 1, ShuffleNet's Transpose).
TEST_CASE("network kernel: zoo networks forced through it match the CPU backend") {
  if (kernels::net_variants(gpu::current_device().arch(), max_cluster_size()).empty()) {
    skip_test_case("the network kernel needs thread-block clusters of 16 (compute capability 9.0)");
    return;
  }
  struct ZooCase {
    std::string model;
    std::vector<int64_t> image;  // input shape after the batch axis
    std::string forced;
  };
  const std::vector<ZooCase> cases = {
      {"mobilenet_v2", {3, 96, 96}, "net"},         {"mobilenet_v3_small", {3, 128, 128}, "net"},
      {"efficientnet_b0_small", {3, 128, 128}, "net"}, {"densenet_bc", {3, 32, 32}, "net"},
      {"shufflenet_v1", {3, 224, 224}, "net"},      {"mobilenet_v1", {3, 128, 128}, "net_cl8"},
      {"resnet20", {3, 32, 32}, "net_cl8"},         {"ts_cnn1d", {9, 128}, "net"},
      {"vgg_small", {1, 64, 64}, "net"},
  };
  Options cpu_options;
  cpu_options.device = Device::Cpu;
  uint32_t seed = 77;
  for (const ZooCase& zc : cases) {
    const std::string path = repo_path("models/zoo/" + zc.model + "/model.onnx");
    const Model cpu_model = Model::load(path, cpu_options);
    set_log_level(LogLevel::Off);
    const Model model = Model::load(path, forced_gpu_options(zc.forced));
    for (int64_t batch : {1, 3}) {
      const std::string what = zc.model + " " + zc.forced + " batch " + std::to_string(batch);
      note_check_point(what);
      const std::string plan = model.describe_plan(batch);
      CHECK_MESSAGE(plan.find("one launch, " + zc.forced) != std::string::npos, what << ":\n" << plan);
      std::vector<int64_t> shape = {batch};
      shape.insert(shape.end(), zc.image.begin(), zc.image.end());
      const Tensor x{shape, random_floats(static_cast<size_t>(product(shape)), seed++)};
      const Tensor gpu = Context(model).run({x})[0];
      const Tensor cpu = Context(cpu_model).run({x})[0];
      CHECK_MESSAGE(relative_error(gpu.data, cpu.data) < kTolerance, what);
    }
    set_log_level(LogLevel::Warn);
  }
}

}  // namespace cnnrt::testing
