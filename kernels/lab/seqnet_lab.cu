// Where the time of the sequence kernel (kernels/seqnet.cuh) goes, on the time-series network's layers (9x128 ->
// Conv1d k7 32 + pool 2 -> k5 64 + pool 2 -> k3 128 -> global pool -> dense 6): per variant and batch, the median of
// back-to-back launches in a CUDA graph, and one traced launch's phases in its first block (start, staging issued,
// the grid before waited for, input and start barrier, then each layer's sums, its share sent to the other ranks, and
//
//   cmake --build --preset release --target seqnet_lab
//   build/release/bin/seqnet_lab
//   build/release/bin/seqnet_lab identical RANKS LAYERS LAUNCHES   (only those launches: for a profiler)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/lab/lab_check.cuh"
#include "kernels/seqnet.cuh"

namespace {

using namespace cnnrt::kernels;

NetOp conv1d(int in, int out, int C, int L, int F, int K, int pad, unsigned seed) {
  NetOp o;
  o.kind = NetOpKind::Conv;
  o.in0 = in;
  o.out = out;
  o.g.C = C, o.g.H = 1, o.g.W = L, o.g.F = F, o.g.KH = 1, o.g.KW = K;
  o.g.pad_left = o.g.pad_right = pad;
  o.g.OH = 1, o.g.OW = L + 2 * pad - K + 1;
  o.w = lab::device_random(static_cast<size_t>(F) * C * K, seed);
  o.bias = lab::device_random(static_cast<size_t>(F), seed + 1);
  o.act = ParamAct::Relu;
  o.in0_stride = C * L;
  o.out_stride = F * o.g.OW;
  return o;
}

NetOp pool1d(int in, int out, int C, int L) {
  NetOp o;
  o.kind = NetOpKind::Pool;
  o.in0 = in;
  o.out = out;
  o.g.C = C, o.g.H = 1, o.g.W = L, o.g.OH = 1, o.g.OW = L / 2;
  o.pool.kind = FusedPool::Max;
  o.pool.kw = o.pool.sw = 2;
  o.pool.PH = 1, o.pool.PW = L / 2;
  o.out_stride = C * (L / 2);
  return o;
}

std::vector<NetOp> series() {
  NetOp gap;
  gap.kind = NetOpKind::GlobalPool;
  gap.in0 = 5, gap.out = 6, gap.g.C = 128, gap.g.H = 32, gap.pool.kind = FusedPool::Avg, gap.out_stride = 128;
  NetOp fc;
  fc.kind = NetOpKind::Conv;
  fc.in0 = 6, fc.out = 7, fc.g.C = 128, fc.g.F = 6, fc.out_stride = 6;
  fc.w = lab::device_random(128 * 6, 50);
  fc.bias = lab::device_random(6, 51);
  return {conv1d(0, 1, 9, 128, 32, 7, 3, 10), pool1d(1, 2, 32, 128), conv1d(2, 3, 32, 64, 64, 5, 2, 20),
          pool1d(3, 4, 64, 64),               conv1d(4, 5, 64, 32, 128, 3, 1, 30), gap, fc};
}

}  // namespace

// Median microseconds a launch of `n` identical layers (64 -> 64 channels, k3, length 32) at batch 1, clusters of
// `ranks`: the difference between n and 1 over n - 1 is what one more layer costs once its code has run.
double time_identical(int n, int ranks, int optin, int launches = 21) {
  std::vector<NetOp> ops;
  for (int k = 0; k < n; ++k) ops.push_back(conv1d(k, k + 1, 64, 32, 64, 3, 1, 60 + k));
  std::string why;
  auto prog = build_seqnet(ops, ranks, optin, &why);
  if (!prog) return -1;
  if (launches != 21) {
    const SeqLayer& l = prog->layers.back();
    std::printf("identical layers, cl%d: fb %d pb %d ks %d lanes %d, smem %zu B\n", ranks, l.fb, l.pb, l.ks, l.lanes,
                prog->smem_bytes());
  }
  const std::vector<float> packed = seqnet_packed_weights(*prog);
  float *d_packed = nullptr, *x = lab::device_random(64 * 32, 3), *y = nullptr;
  SeqLayer* d_layers = nullptr;
  LAB_CHECK(cudaMalloc(&d_packed, packed.size() * sizeof(float) + 16));
  LAB_CHECK(cudaMemcpy(d_packed, packed.data(), packed.size() * sizeof(float), cudaMemcpyHostToDevice));
  prog->packed = d_packed;
  LAB_CHECK(cudaMalloc(&d_layers, prog->layers.size() * sizeof(SeqLayer)));
  LAB_CHECK(cudaMemcpy(d_layers, prog->layers.data(), prog->layers.size() * sizeof(SeqLayer), cudaMemcpyHostToDevice));
  LAB_CHECK(cudaMalloc(&y, 64 * 32 * sizeof(float)));
  cudaStream_t s;
  LAB_CHECK(cudaStreamCreate(&s));
  std::vector<double> times;
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int r = 0; r < launches; ++r) {
    cudaEventRecord(e0, s);
    launch_seqnet(*prog, d_layers, x, y, 1, s);
    cudaEventRecord(e1, s);
    LAB_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    times.push_back(ms * 1000.0);
  }
  std::sort(times.begin(), times.end());
  cudaFree(d_packed);
  cudaFree(d_layers);
  cudaFree(x);
  cudaFree(y);
  cudaStreamDestroy(s);
  return times[times.size() / 2];
}

int main(int argc, char** argv) {
  int optin = 0;
  cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0);
  if (argc == 5 && std::string(argv[1]) == "identical") {
    // `seqnet_lab identical RANKS LAYERS LAUNCHES`: only those launches (for a profiler).
    const int ranks = std::stoi(argv[2]), n = std::stoi(argv[3]), launches = std::stoi(argv[4]);
    std::printf("%d identical layers, cl%d: %.2f us median of %d launches\n", n, ranks,
                time_identical(n, ranks, optin, launches), launches);
    return 0;
  }
  for (int ranks : {16, 4, 1}) {
    const double one = time_identical(1, ranks, optin), two = time_identical(2, ranks, optin);
    const double ten = time_identical(10, ranks, optin);
    std::printf("identical layers, cl%d, single launches: 1 layer %.2f us, 2: %.2f, 10: %.2f (%.2f a layer after the "
                "second)\n", ranks, one, two, ten, (ten - two) / 8);
  }
  const std::vector<NetOp> ops = series();
  for (int variant = 0; variant < 6; ++variant) {
    // Variants 0-4: clusters of 16, 8, 4, 2, 1; 5: 16 without the activations (what their calls cost).
    const int ranks = variant < 5 ? 16 >> variant : 16;
    std::string why;
    auto prog = build_seqnet(ops, ranks, optin, &why);
    if (prog && variant == 5) {
      for (SeqLayer& l : prog->layers) l.act = ParamAct::None;
      std::printf("without activations: ");
    }
    if (prog) {
      const std::vector<float> packed = seqnet_packed_weights(*prog);
      float* d_packed = nullptr;
      LAB_CHECK(cudaMalloc(&d_packed, packed.size() * sizeof(float) + 16));
      LAB_CHECK(cudaMemcpy(d_packed, packed.data(), packed.size() * sizeof(float), cudaMemcpyHostToDevice));
      prog->packed = d_packed;
    }
    if (!prog) {
      std::printf("cl%d: %s\n", ranks, why.c_str());
      continue;
    }
    SeqLayer* d_layers = nullptr;
    LAB_CHECK(cudaMalloc(&d_layers, prog->layers.size() * sizeof(SeqLayer)));
    LAB_CHECK(cudaMemcpy(d_layers, prog->layers.data(), prog->layers.size() * sizeof(SeqLayer), cudaMemcpyHostToDevice));
    std::printf("cl%d: smem %zu B;", ranks, prog->smem_bytes());
    for (const SeqLayer& l : prog->layers) std::printf(" [fb %d pb %d ks %d lanes %d]", l.fb, l.pb, l.ks, l.lanes);
    std::printf("\n");
    for (int batch : {1, 16}) {
      float* x = lab::device_random(static_cast<size_t>(batch) * 9 * 128, 1);
      float* y = nullptr;
      LAB_CHECK(cudaMalloc(&y, static_cast<size_t>(batch) * 6 * sizeof(float)));
      cudaStream_t s;
      LAB_CHECK(cudaStreamCreate(&s));
      const double median_us =
          lab::median_graph_us(s, 20, [&] { launch_seqnet(*prog, d_layers, x, y, batch, s); });
      const size_t n_trace = 4 + 5 * prog->layers.size();
      unsigned long long* d_trace = nullptr;
      LAB_CHECK(cudaMalloc(&d_trace, n_trace * sizeof(unsigned long long)));
      launch_seqnet(*prog, d_layers, x, y, batch, s, d_trace);
      LAB_CHECK(cudaStreamSynchronize(s));
      std::vector<unsigned long long> t(n_trace);
      LAB_CHECK(cudaMemcpy(t.data(), d_trace, n_trace * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
      std::printf("  batch %2d: %6.2f us a launch back to back; phases (us): issue %.2f wait %.2f input %.2f |", batch,
                  median_us, (t[1] - t[0]) / 1e3, (t[2] - t[1]) / 1e3, (t[3] - t[2]) / 1e3);
      for (size_t k = 0; k < prog->layers.size(); ++k) {
        const unsigned long long* q = &t[4 + 3 * k];
        const unsigned long long before = k == 0 ? t[3] : t[3 + 3 * k];
        std::printf(" L%zu sums %.2f share %.2f barrier %.2f |", k, (q[0] - before) / 1e3, (q[1] - q[0]) / 1e3,
                    k + 1 < prog->layers.size() ? (q[2] - q[1]) / 1e3 : 0.0);
      }
      std::printf(" total %.2f\n", (t[4 + 3 * prog->layers.size() - 2] - t[0]) / 1e3);
      std::printf("    convolutions: (own sums, then block barrier, epilogue from the layer's start, us)");
      for (size_t k = 0; k < prog->layers.size(); ++k) {
        if (prog->layers[k].kind != NetOpKind::Conv) continue;
        const unsigned long long before = k == 0 ? t[3] : t[3 + 3 * k];
        const unsigned long long* c = &t[4 + 3 * prog->layers.size() + 2 * k];
        std::printf(" L%zu %.2f %.2f %.2f |", k, (c[0] - before) / 1e3, (c[1] - c[0]) / 1e3, (t[4 + 3 * k] - c[1]) / 1e3);
      }
      std::printf("\n");
      cudaFree(d_trace);
      cudaStreamDestroy(s);
      cudaFree(x);
      cudaFree(y);
    }
    cudaFree(d_layers);
  }
  return 0;
}
