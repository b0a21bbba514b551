#include "gpu/graph_timing.hpp"

#include <algorithm>

#include "gpu/cuda_check.hpp"

namespace cnnrt::gpu {

std::vector<double> time_captured_runs(cudaStream_t stream, int runs, int samples,
                                       const std::function<void()>& enqueue_one_run) {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  CNNRT_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  try {
    for (int r = 0; r < runs; ++r) enqueue_one_run();
  } catch (...) {
    cudaStreamEndCapture(stream, &graph);
    if (graph) cudaGraphDestroy(graph);
    throw;
  }
  CNNRT_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  CNNRT_CUDA_CHECK(instantiated);
  struct ExecGuard {
    cudaGraphExec_t exec;
    ~ExecGuard() { cudaGraphExecDestroy(exec); }
  } guard{exec};
  CNNRT_CUDA_CHECK(cudaGraphLaunch(exec, stream));  // warm-up
  std::vector<double> us = time_graph_replays(exec, stream, samples);
  for (double& u : us) u /= runs;
  return us;
}

std::vector<double> time_graph_replays(cudaGraphExec_t exec, cudaStream_t stream, int samples) {
  cudaEvent_t start = nullptr, stop = nullptr;
  CNNRT_CUDA_CHECK(cudaEventCreate(&start));
  CNNRT_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> us;
  cudaError_t err = cudaSuccess;
  for (int s = 0; s < samples && err == cudaSuccess; ++s) {
    float ms = 0;
    if ((err = cudaEventRecord(start, stream)) != cudaSuccess) break;
    if ((err = cudaGraphLaunch(exec, stream)) != cudaSuccess) break;
    if ((err = cudaEventRecord(stop, stream)) != cudaSuccess) break;
    if ((err = cudaEventSynchronize(stop)) != cudaSuccess) break;
    if ((err = cudaEventElapsedTime(&ms, start, stop)) != cudaSuccess) break;
    us.push_back(ms * 1000.0);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  CNNRT_CUDA_CHECK(err);
  return us;
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace cnnrt::gpu
