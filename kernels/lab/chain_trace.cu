// Where the time of one chain-kernel launch goes (kernels/conv_chain.cuh): this program compiles the kernel
// with CNNRT_CHAIN_TRACE, so that thread 0 of every block records clock64() at the end of each phase, and
// prints each phase's cycles (mean over blocks; the rank-0 phase over rank-0 blocks) for every cluster size,
// beside the time of one launch back to back (median of 200 launches in a row on one stream, plain and
// with the trace), for the last of those launches and for isolated launches (the stream idle before each,
// mean of 20), whose phases are one batch-1 inference's critical path.
//
//   cmake --build --preset release --target chain_trace
//   build/release/bin/chain_trace [batch [variant]]  LeNet shapes (models/fashion_lenet.onnx), default batch 1,
//                                                    every variant unless one is named
#define CNNRT_CHAIN_TRACE 1
#include "kernels/conv_chain.cu"
#include "kernels/launch.cu"
#include "kernels/lab/lab_check.cuh"
#include "kernels/lab/lab_lenet_chain.cuh"

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace cnnrt::kernels;
using cnnrt::kernels::lab::device_random;

const char* const kPhases[] = {"weights issued, prior grid waited", "image loads issued",
                               "B margins, mbarriers, image in, cl. wait", "A rows (_aw: + pooled, pushed)",
                               "A pool, pushed, all landed", "B partial sums (_wl: B whole)",
                               "B group sums + pool (_wl: none)", "dense partials (rank 0: all landed)",
                               "rank 0 output"};

}  // namespace

int main(int argc, char** argv) {
  const int batch = argc > 1 ? std::atoi(argv[1]) : 1;
  const std::string only = argc > 2 ? argv[2] : "";  // one variant's name, or every variant
  const ConvChainDesc d = lab::lenet_chain(batch);
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
    if (!only.empty() && v.name != only) continue;
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
    // Each phase's cycles in the launch the trace holds (mean over blocks).
    std::vector<double> back_to_back(10), isolated(10);
    double sub[2][3] = {};  // the first phase's parts, back to back and isolated
    auto add_phases = [&](std::vector<double>& into, double weight) {
      std::vector<long long> t(size_t(blocks) * kChainTracePhases);
      LAB_CHECK(cudaMemcpy(t.data(), trace, t.size() * sizeof(long long), cudaMemcpyDeviceToHost));
      for (int phase = 1; phase <= 9; ++phase) {
        double sum = 0;
        int count = 0;
        for (int b = 0; b < blocks; ++b) {
          if (phase == 9 && b % v.layout.ranks != 0) continue;  // only rank 0 writes the output
          const long long* s = &t[size_t(b) * kChainTracePhases];
          sum += double(s[phase] - s[phase - 1]);
          ++count;
        }
        into[phase] += weight * (count ? sum / count : 0);
      }
      const int from[] = {0, 2, 11}, to[] = {10, 11, 3};
      for (int p = 0; p < 3; ++p) {
        double sum = 0;
        for (int b = 0; b < blocks; ++b) {
          const long long* s = &t[size_t(b) * kChainTracePhases];
          sum += double(s[to[p]] - s[from[p]]);
        }
        sub[&into == &isolated ? 1 : 0][p] += weight * sum / blocks;
      }
    };
    const double plain_us = launch_time_us(false);
    const double traced_us = launch_time_us(true);  // the trace now holds the last launch's stamps
    add_phases(back_to_back, 1.0);
    // Isolated launches (the stream idle before each, as in one inference at batch 1): mean of 20.
    constexpr int kIsolated = 20;
    for (int i = 0; i < kIsolated; ++i) {
      LAB_CHECK(cudaStreamSynchronize(stream));
      launch_conv_chain(v, x, y, d, stream);
      LAB_CHECK(cudaStreamSynchronize(stream));
      add_phases(isolated, 1.0 / kIsolated);
    }
    std::printf("\n%s: %.2f us per launch back to back (%.2f us with the trace)\n", v.name.c_str(), plain_us, traced_us);
    std::printf("  %-36s %8s %6s  | isolated launch\n", "phase (back to back)", "cycles", "us");
    double total = 0, total_isolated = 0;
    for (int phase = 1; phase <= 9; ++phase) {
      total += back_to_back[phase];
      total_isolated += isolated[phase];
      std::printf("  %-36s %8.0f %6.2f  | %8.0f %6.2f\n", kPhases[phase - 1], back_to_back[phase],
                  back_to_back[phase] / cycles_per_us, isolated[phase], isolated[phase] / cycles_per_us);
    }
    std::printf("  %-36s %8.0f %6.2f  | %8.0f %6.2f\n", "total (first stamp to output)", total, total / cycles_per_us,
                total_isolated, total_isolated / cycles_per_us);
    // Parts of the first phases (stamps 10 and 11 within them).
    const char* const parts[] = {"  of it: weights' copies issued", "  of it: B input's margins zeroed",
                                 "  of it: mbarriers .. cluster wait"};
    for (int p = 0; p < 3; ++p) {
      std::printf("  %-36s %8.0f %6.2f  | %8.0f %6.2f\n", parts[p], sub[0][p], sub[0][p] / cycles_per_us, sub[1][p],
                  sub[1][p] / cycles_per_us);
    }

    cudaFree(trace);
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  return 0;
}
