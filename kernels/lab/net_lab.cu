// What one op of the network kernel (kernels/net.cuh) costs: chains of 1 and 33 identical ops between two tensors,
// timed as CUDA graphs of back-to-back launches; the difference over 32 is one op's cost (barrier, staging,
// compute). For copies with and without the barrier, a channel affine map, a depthwise 3x3 and a pointwise
// convolution (staged and not) of MobileNet's 6x6 maps of 144 channels.
//
//   cmake --build --preset release --target net_lab
//   build/release/bin/net_lab
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/lab/lab_check.cuh"
#include "kernels/net.cuh"

namespace {

using namespace cnnrt::kernels;

using lab::device_random;

// Median microseconds a launch of `n` copies of `op` (alternating between tensors 0 and 1).
double time_chain(const NetOp& op, int n, const NetVariant& v, float* a, float* b, int budget) {
  std::vector<NetOp> ops;
  NetStaging most;
  for (int k = 0; k < n; ++k) {
    NetOp o = op;
    o.in0 = k % 2;
    o.out = 1 - k % 2;
    o.barrier = k > 0 ? op.barrier : 0;
    if (o.kind == NetOpKind::Conv) {
      const bool stage = op.stage;
      const NetStaging s = configure_net_conv(o, v.ranks, stage ? budget : 0);
      most.x_floats = std::max(most.x_floats, s.total());
    }
    ops.push_back(o);
  }
  NetOp* d_ops = nullptr;
  LAB_CHECK(cudaMalloc(&d_ops, ops.size() * sizeof(NetOp)));
  LAB_CHECK(cudaMemcpy(d_ops, ops.data(), ops.size() * sizeof(NetOp), cudaMemcpyHostToDevice));
  const float* tensors[] = {a, b};
  cudaStream_t s;
  LAB_CHECK(cudaStreamCreate(&s));
  constexpr int kLaunches = 20;
  cudaGraph_t graph;
  LAB_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < kLaunches; ++i) launch_net(v, d_ops, n, tensors, 2, 1, most.x_floats, s);
  LAB_CHECK(cudaStreamEndCapture(s, &graph));
  cudaGraphExec_t exec;
  LAB_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<double> times;
  for (int r = 0; r < 9; ++r) {
    cudaEventRecord(e0, s);
    LAB_CHECK(cudaGraphLaunch(exec, s));
    cudaEventRecord(e1, s);
    LAB_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    times.push_back(ms * 1000.0 / kLaunches);
  }
  std::sort(times.begin(), times.end());
  if (n > 1) {
    // One traced launch: the phases of ops 1 .. n-1 in block 0, averaged.
    unsigned long long* d_trace = nullptr;
    LAB_CHECK(cudaMalloc(&d_trace, n * 6 * sizeof(unsigned long long)));
    launch_net(v, d_ops, n, tensors, 2, 1, most.x_floats, s, d_trace);
    LAB_CHECK(cudaStreamSynchronize(s));
    std::vector<unsigned long long> tr(static_cast<size_t>(n) * 6);
    LAB_CHECK(cudaMemcpy(tr.data(), d_trace, tr.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
    double phase[6] = {};
    for (int k = 1; k + 1 < n; ++k) {
      const unsigned long long* t = &tr[static_cast<size_t>(k) * 6];
      phase[0] += double(t[1] - t[0]);  // weights issued + barrier
      phase[1] += double(t[2] - t[1]);  // the op
      phase[2] += double(t[3] - t[2]);  // the block barrier after it
      phase[3] += double(t[6] - t[3]);  // to the next op
      if (op.kind == NetOpKind::Conv && op.stage) {
        phase[4] += double(t[4] - t[1]);  // staging issued
        phase[5] += double(t[5] - t[4]);  // staging waited for
      }
    }
    std::printf("    trace (ns an op): barrier %.0f, op %.0f (staging issue %.0f, wait %.0f), block sync %.0f, loop %.0f\n",
                phase[0] / (n - 2), phase[1] / (n - 2), phase[4] / (n - 2), phase[5] / (n - 2), phase[2] / (n - 2),
                phase[3] / (n - 2));
    cudaFree(d_trace);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
  cudaFree(d_ops);
  return times[times.size() / 2];
}

}  // namespace

int main() {
  int device = 0, optin = 0;
  LAB_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  constexpr int C = 144, H = 6, W = 6;
  float* a = device_random(C * H * W, 1);
  float* b = device_random(C * H * W, 2);
  const float* w_pw = device_random(C * C, 3);
  const float* w_dw = device_random(C * 9, 4);
  const float* bias = device_random(C, 5);

  struct Case {
    std::string name;
    NetOp op;
  };
  std::vector<Case> cases;
  {
    NetOp o;
    o.kind = NetOpKind::Copy;
    o.count = 1;
    o.barrier = 1;
    cases.push_back({"copy 1 float + barrier", o});
    o.barrier = 0;
    cases.push_back({"copy 1 float, no barrier", o});
    o.count = C * H * W;
    o.barrier = 1;
    cases.push_back({"copy 144x6x6 + barrier", o});
  }
  {
    NetOp o;
    o.kind = NetOpKind::Affine;
    o.count = C * H * W;
    o.inner = H * W;
    o.w = bias;
    o.bias = bias;
    o.act = ParamAct::Clip;
    o.alpha = 0.0f;
    o.beta = 6.0f;
    cases.push_back({"affine 144x6x6 + clip", o});
    o.barrier = 0;
    cases.push_back({"  the same, no barrier (racy)", o});
  }
  NetOp conv;
  conv.kind = NetOpKind::Conv;
  conv.in0_stride = conv.out_stride = C * H * W;
  conv.bias = bias;
  conv.act = ParamAct::Clip;
  conv.alpha = 0.0f;
  conv.beta = 6.0f;
  {
    NetOp o = conv;
    o.g = ConvGeometry{1, C, H, W, C, 3, 3, H, W, 1, 1, 1, 1, 1, 1, 1, 1, C};
    o.w = w_dw;
    o.stage = 1;
    cases.push_back({"depthwise 3x3 144x6x6 staged", o});
    o.barrier = 0;
    cases.push_back({"  the same, no barrier (racy)", o});
    o.barrier = 1;
    o.bias = nullptr;
    o.act = ParamAct::None;
    cases.push_back({"  staged, no bias, no activation", o});
    o.stage = 0;
    cases.push_back({"depthwise 3x3 144x6x6 unstaged", o});
  }
  {
    NetOp o = conv;
    o.g = ConvGeometry{1, C, H, W, C, 1, 1, H, W, 1, 1, 0, 0, 0, 0, 1, 1, 1};
    o.w = w_pw;
    o.stage = 1;
    cases.push_back({"pointwise 144->144 6x6 staged", o});
    o.barrier = 0;
    cases.push_back({"  the same, no barrier (racy)", o});
    o.barrier = 1;
    o.g.F = 16;
    o.g.groups = 1;
    cases.push_back({"pointwise 144->16 6x6 staged", o});
    o.g.F = C;
    o.stage = 0;
    cases.push_back({"pointwise 144->144 6x6 unstaged", o});
  }
  const int budget = net_staging_floats(33, optin);
  std::printf("%-36s %6s %10s %10s %10s\n", "op", "ranks", "1 op us", "33 ops us", "per op us");
  for (const NetVariant& v : net_variants(90, 16)) {
    if (v.ranks == 4) continue;
    for (const Case& c : cases) {
      const double t1 = time_chain(c.op, 1, v, a, b, budget);
      const double t33 = time_chain(c.op, 33, v, a, b, budget);
      std::printf("%-36s %6d %10.2f %10.2f %10.3f\n", c.name.c_str(), v.ranks, t1, t33, (t33 - t1) / 32.0);
    }
  }
  return 0;
}
