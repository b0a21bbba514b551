// The lab programs' CUDA error check: names the call, the error, the file and line, and exits (the lab
// programs are tools, not the library, so they may exit); and their random device data.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#define LAB_CHECK(call)                                                                                    \
  do {                                                                                                     \
    cudaError_t lab_err_ = (call);                                                                         \
    if (lab_err_ != cudaSuccess) {                                                                         \
      std::fprintf(stderr, "%s failed: %s (%s:%d)\n", #call, cudaGetErrorString(lab_err_), __FILE__, __LINE__); \
      std::exit(1);                                                                                        \
    }                                                                                                      \
  } while (0)

namespace cnnrt::kernels::lab {

// `count` random floats in [-0.5, 0.5) on the device (never freed: the programs exit).
inline float* device_random(size_t count, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
  std::vector<float> host(count);
  for (float& v : host) v = dist(rng);
  float* d = nullptr;
  LAB_CHECK(cudaMalloc(&d, count * sizeof(float)));
  LAB_CHECK(cudaMemcpy(d, host.data(), count * sizeof(float), cudaMemcpyHostToDevice));
  return d;
}

// Median microseconds a launch of what `enqueue` puts on `s`, captured `launches` times back to back in one CUDA
// graph and replayed 9 times between two events.
template <class Enqueue>
double median_graph_us(cudaStream_t s, int launches, Enqueue&& enqueue) {
  cudaGraph_t graph;
  LAB_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < launches; ++i) enqueue();
  LAB_CHECK(cudaStreamEndCapture(s, &graph));
  cudaGraphExec_t exec;
  LAB_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t e0, e1;
  LAB_CHECK(cudaEventCreate(&e0));
  LAB_CHECK(cudaEventCreate(&e1));
  std::vector<double> times;
  for (int r = 0; r < 9; ++r) {
    LAB_CHECK(cudaEventRecord(e0, s));
    LAB_CHECK(cudaGraphLaunch(exec, s));
    LAB_CHECK(cudaEventRecord(e1, s));
    LAB_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    LAB_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    times.push_back(ms * 1000.0 / launches);
  }
  std::sort(times.begin(), times.end());
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return times[times.size() / 2];
}

}  // namespace cnnrt::kernels::lab
