// GPU time of a piece of stream work, without host launch gaps: `runs` back-to-back repetitions are
// captured into one CUDA graph, the graph is replayed once to warm up, then `samples` times between two
// events. Used by the tuner, the executor's benchmark hook and the bench library alike.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <vector>

namespace cnnrt::gpu {

// Microseconds per run, one value per sample (not sorted). `enqueue_one_run` must only enqueue work on
// `stream` (it is called during stream capture).
std::vector<double> time_captured_runs(cudaStream_t stream, int runs, int samples,
                                       const std::function<void()>& enqueue_one_run);

// Microseconds of each of `samples` replays of `exec` on `stream`, each between two events (not sorted).
std::vector<double> time_graph_replays(cudaGraphExec_t exec, cudaStream_t stream, int samples);

double median(std::vector<double> values);

}  // namespace cnnrt::gpu
