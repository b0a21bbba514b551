// Where the time of one chain-kernel launch goes (kernels/conv_chain.cuh): this program compiles the kernel
// with CNNRT_CHAIN_TRACE, so that thread 0 of every block records clock64() at the end of each phase, and
// prints each phase's cycles (mean over blocks; the rank-0 phase over rank-0 blocks) for every cluster size,
// beside the time of one launch back to back (median of 200 launches in a row on one stream, plain and
// with the trace).
//
//   cmake --build --preset release --target chain_trace
//   build/release/bin/chain_trace [batch]          LeNet shapes (models/fashion_lenet.onnx), default batch 1
#define CNNRT_CHAIN_TRACE 1
#include "kernels/conv_chain.cu"
#include "kernels/launch.cu"
#include "kernels/lab/lab_check.cuh"

#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace {

using namespace cnnrt::kernels;

const float* device_random(size_t count, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
  std::vector<float> host(count);
  for (float& v : host) v = dist(rng);
  float* d = nullptr;
  LAB_CHECK(cudaMalloc(&d, count * sizeof(float)));
  LAB_CHECK(cudaMemcpy(d, host.data(), count * sizeof(float), cudaMemcpyHostToDevice));
  return d;
}

PoolGeometry max_pool(int k, int out) {
  PoolGeometry p;
  p.kind = FusedPool::Max;
  p.kh = p.kw = p.sh = p.sw = k;
  p.PH = p.PW = out;
  return p;
}

const char* const kPhases[] = {"weights issued, B input zeroed", "prior grid waited", "image in, cluster barrier",
                               "A rows (conv)", "A pool, pushed, cluster barrier", "B partial sums",
                               "B group sums + pool (lane groups)", "dense partials, cluster barrier",
                               "rank 0 output"};

}  // namespace

int main(int argc, char** argv) {
  const int batch = argc > 1 ? std::atoi(argv[1]) : 1;
  ConvChainDesc d;
  d.batch = batch;
  d.a.C = 1; d.a.H = d.a.W = 28; d.a.F = 8; d.a.K = 5; d.a.OH = d.a.OW = 28; d.a.pad_top = d.a.pad_left = 2;
  d.a.act = ParamAct::Relu; d.a.pool = max_pool(2, 14);
  d.b.C = 8; d.b.H = d.b.W = 14; d.b.F = 16; d.b.K = 5; d.b.OH = d.b.OW = 14; d.b.pad_top = d.b.pad_left = 2;
  d.b.act = ParamAct::Relu; d.b.pool = max_pool(3, 4);
  d.fc.N = 10;
  d.a.weights = device_random(8 * 25, 1); d.a.bias = device_random(8, 2);
  d.b.weights = device_random(16 * 8 * 25, 3); d.b.bias = device_random(16, 4);
  d.fc.weights = device_random(10 * 256, 5); d.fc.bias = device_random(10, 6);
  const float* x = device_random(size_t(batch) * 784, 7);
  float* y = nullptr;
  LAB_CHECK(cudaMalloc(&y, size_t(batch) * 10 * sizeof(float)));
  int device = 0, optin = 0, clock_khz = 0;
  LAB_CHECK(cudaGetDevice(&device));
  LAB_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  LAB_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device));
  const double cycles_per_us = clock_khz / 1000.0;
  cudaStream_t stream = nullptr;
  LAB_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::printf("# chain_trace: LeNet shapes, batch %d, SM clock %.0f MHz (cycles -> us at that clock)\n", batch,
              cycles_per_us);
  for (const ConvChainVariant& v : conv_chain_variants(d, optin)) {
    const int blocks = batch * v.layout.ranks;
    long long* trace = nullptr;
    LAB_CHECK(cudaMalloc(&trace, size_t(blocks) * kChainTracePhases * sizeof(long long)));
    cudaEvent_t start, stop;
    LAB_CHECK(cudaEventCreate(&start));
    LAB_CHECK(cudaEventCreate(&stop));
    auto launch_time_us = [&](bool traced) {
      long long* on = traced ? trace : nullptr;
      LAB_CHECK(cudaMemcpyToSymbol(g_chain_trace, &on, sizeof(on)));
      constexpr int kLaunches = 200;
      for (int i = 0; i < 10; ++i) launch_conv_chain(v, x, y, d, stream);
      LAB_CHECK(cudaEventRecord(start, stream));
      for (int i = 0; i < kLaunches; ++i) launch_conv_chain(v, x, y, d, stream);
      LAB_CHECK(cudaEventRecord(stop, stream));
      LAB_CHECK(cudaEventSynchronize(stop));
      float ms = 0;
      LAB_CHECK(cudaEventElapsedTime(&ms, start, stop));
      return ms * 1000.0 / kLaunches;
    };
    const double plain_us = launch_time_us(false);
    const double traced_us = launch_time_us(true);  // the trace now holds the last launch's stamps
    std::vector<long long> t(size_t(blocks) * kChainTracePhases);
    LAB_CHECK(cudaMemcpy(t.data(), trace, t.size() * sizeof(long long), cudaMemcpyDeviceToHost));
    std::printf("\n%s: %.2f us per launch back to back (%.2f us with the trace)\n", v.name.c_str(), plain_us, traced_us);
    double total = 0;
    for (int phase = 1; phase <= 9; ++phase) {
      double sum = 0;
      int count = 0;
      for (int b = 0; b < blocks; ++b) {
        if (phase == 9 && b % v.layout.ranks != 0) continue;  // only rank 0 writes the output
        const long long* s = &t[size_t(b) * kChainTracePhases];
        sum += double(s[phase] - s[phase - 1]);
        ++count;
      }
      const double cycles = count ? sum / count : 0;
      total += cycles;
      std::printf("  %-36s %8.0f cycles %6.2f us\n", kPhases[phase - 1], cycles, cycles / cycles_per_us);
    }
    std::printf("  %-36s %8.0f cycles %6.2f us\n", "total (first stamp to output)", total, total / cycles_per_us);
    cudaFree(trace);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  return 0;
}
