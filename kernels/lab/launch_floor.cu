// What one isolated launch costs before the kernel does any work: the floor under LeNet's batch-1 latency.
//
// `cnnrt bench MODEL --batch 1` reports latency as CUDA events around one CUDA graph replay (the host's
// launch call sits between the two events), and per-step time as events captured inside the graph around
// the step. This program times both ways, and back to back, for kernels that do nothing, kernels that do
// only the chain kernel's fixed parts (cluster launch, barriers, staging the weights), and the chain kernel
// itself, so that the chain's single-launch time splits into launch floor and work.
//
//   cmake --build --preset release --target launch_floor
//   build/release/bin/launch_floor
#include "kernels/conv_chain.cuh"
#include "kernels/launch.cuh"
#include "kernels/lab/lab_check.cuh"
#include "kernels/lab/lab_lenet_chain.cuh"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <random>
#include <vector>

namespace launch_floor {

using namespace cnnrt::kernels;
using cnnrt::kernels::lab::device_random;

__global__ void empty_kernel(float* sink) {
  wait_for_prior_grid();
  if (sink && threadIdx.x == 0 && blockIdx.x == 0 && blockIdx.z == 0) sink[0] = 1.0f;
}

// The chain's fixed parts: cluster barriers, and (when `weights` is given) `count` floats staged into shared
// memory with plain loads before the prior grid's wait, as the chain stages its weights.
__global__ void cluster_kernel(const float* weights, int count, int barriers, float* sink) {
  extern __shared__ float smem[];
  if (weights) {
    for (int i = threadIdx.x; i < count; i += blockDim.x) smem[i] = __ldg(weights + i);
  }
  wait_for_prior_grid();
  for (int b = 0; b < barriers; ++b) {
    asm volatile("barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;" ::: "memory");
  }
  __syncthreads();
  if (sink && threadIdx.x == 0 && blockIdx.x == 0 && blockIdx.z == 0) sink[0] = weights ? smem[count - 1] : 1.0f;
}

// Instruction fetch in a launch: 4096 FFMAs (8 independent chains) a thread, as straight-line code (64 KB of
// instructions, each fetched once a launch) or as a loop of 8 (a few hundred bytes). One warp a block: warm,
// both issue in ~4096 cycles (~2 us); the difference is what fetching fresh code costs.
template <bool kStraight>
__global__ void fetch_kernel(float* sink) {
  wait_for_prior_grid();
  float acc[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) acc[k] = threadIdx.x + k;
  const float a = 1.0001f, b = 0.999f;
  if constexpr (kStraight) {
#pragma unroll
    for (int i = 0; i < 512; ++i) {
#pragma unroll
      for (int k = 0; k < 8; ++k) acc[k] = fmaf(acc[k], a, b);
    }
  } else {
#pragma unroll 1
    for (int i = 0; i < 512; ++i) {
#pragma unroll
      for (int k = 0; k < 8; ++k) acc[k] = fmaf(acc[k], a, b);
    }
  }
  float s = 0;
#pragma unroll
  for (int k = 0; k < 8; ++k) s += acc[k];
  if (sink && s == 12345.0f) sink[0] = s;  // keeps the chains live
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

cudaGraphExec_t capture(cudaStream_t stream, const std::function<void()>& body) {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  LAB_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  body();
  LAB_CHECK(cudaStreamEndCapture(stream, &graph));
  LAB_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  LAB_CHECK(cudaGraphDestroy(graph));
  return exec;
}

// Times `launch` three ways (microseconds, medians): events inside a graph around one launch ("in graph",
// what `cnnrt bench` prints per step), events around one graph launch on the stream ("latency", what it
// prints as latency), and 20 launches back to back in one graph ("b2b", per launch).
void report(const char* name, cudaStream_t stream, const std::function<void()>& launch) {
  cudaEvent_t start, stop;
  LAB_CHECK(cudaEventCreate(&start));
  LAB_CHECK(cudaEventCreate(&stop));
  auto elapsed_us = [&] {
    float ms = 0;
    LAB_CHECK(cudaEventElapsedTime(&ms, start, stop));
    return double(ms) * 1000.0;
  };
  cudaGraphExec_t inside = capture(stream, [&] {
    LAB_CHECK(cudaEventRecordWithFlags(start, stream, cudaEventRecordExternal));
    launch();
    LAB_CHECK(cudaEventRecordWithFlags(stop, stream, cudaEventRecordExternal));
  });
  cudaGraphExec_t single = capture(stream, launch);
  constexpr int kRow = 20;
  cudaGraphExec_t row = capture(stream, [&] {
    for (int i = 0; i < kRow; ++i) launch();
  });
  // Median over `reps` of the events' time around `body` (synchronised after each), divided by `per`.
  auto median_us = [&](int reps, int per, const std::function<void()>& body) {
    std::vector<double> us;
    for (int rep = 0; rep < reps; ++rep) {
      body();
      LAB_CHECK(cudaEventSynchronize(stop));
      us.push_back(elapsed_us() / per);
    }
    return median(us);
  };
  const double in_graph = median_us(300, 1, [&] { LAB_CHECK(cudaGraphLaunch(inside, stream)); });
  auto around = [&](cudaGraphExec_t exec) {
    LAB_CHECK(cudaEventRecord(start, stream));
    LAB_CHECK(cudaGraphLaunch(exec, stream));
    LAB_CHECK(cudaEventRecord(stop, stream));
  };
  const double latency = median_us(300, 1, [&] { around(single); });
  const double b2b = median_us(30, kRow, [&] { around(row); });
  std::printf("%-44s in graph %6.2f us   latency %6.2f us   b2b %6.2f us\n", name, in_graph, latency, b2b);
  cudaGraphExecDestroy(inside);
  cudaGraphExecDestroy(single);
  cudaGraphExecDestroy(row);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

}  // namespace launch_floor

int main() {
  using namespace launch_floor;
  const ConvChainDesc d = lab::lenet_chain(1);
  const float* x = device_random(784, 7);
  const float* weights = device_random(8192, 8);
  float* y = nullptr;
  float* sink = nullptr;
  LAB_CHECK(cudaMalloc(&y, 10 * sizeof(float)));
  LAB_CHECK(cudaMalloc(&sink, sizeof(float)));
  int device = 0, optin = 0;
  LAB_CHECK(cudaGetDevice(&device));
  LAB_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  LAB_CHECK(cudaFuncSetAttribute(cluster_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 160 * 1024));
  LAB_CHECK(cudaFuncSetAttribute(cluster_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  cudaStream_t stream = nullptr;
  LAB_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const std::vector<ConvChainVariant> variants = conv_chain_variants(d, optin);
  const size_t chain_smem = variants.empty() ? 0 : size_t(variants.front().layout.floats) * sizeof(float);
  std::printf("# launch_floor: H100 single-launch costs (chain smem %zu bytes a block)\n", chain_smem);
  // The staged floats need their own room: the chain's smallest variants stage less than 24 KB.
  constexpr int kStaged = 6144;
  const size_t staged_smem = std::max(chain_smem, kStaged * sizeof(float));

  for (bool pdl : {false, true}) {
    set_programmatic_launch(pdl);
    std::printf("\n## PDL %s\n", pdl ? "on" : "off");
    report("empty, 1 block of 32", stream, [&] {
      LAB_CHECK(launch_overlapped(empty_kernel, dim3(1), dim3(32), 0, stream, 1, sink));
    });
    report("empty, 16 blocks of 512", stream, [&] {
      LAB_CHECK(launch_overlapped(empty_kernel, dim3(1, 1, 16), dim3(512), 0, stream, 1, sink));
    });
    report("fetch: 4096 FFMA straight-line, 16 x 32", stream, [&] {
      LAB_CHECK(launch_overlapped(fetch_kernel<true>, dim3(1, 1, 16), dim3(32), 0, stream, 1, sink));
    });
    report("fetch: 4096 FFMA as a loop, 16 x 32", stream, [&] {
      LAB_CHECK(launch_overlapped(fetch_kernel<false>, dim3(1, 1, 16), dim3(32), 0, stream, 1, sink));
    });
    for (int ranks : {8, 16}) {
      for (int barriers : {0, 1, 3}) {
        char name[96];
        std::snprintf(name, sizeof(name), "cluster %d x 512, chain smem, %d cl. barriers", ranks, barriers);
        report(name, stream, [&] {
          LAB_CHECK(launch_overlapped(cluster_kernel, dim3(1, 1, ranks), dim3(512), chain_smem, stream,
                                      unsigned(ranks), static_cast<const float*>(nullptr), 0, barriers, sink));
        });
      }
      char name[96];
      std::snprintf(name, sizeof(name), "cluster %d x 512, 6K floats staged, 3 barriers", ranks);
      report(name, stream, [&] {
        LAB_CHECK(launch_overlapped(cluster_kernel, dim3(1, 1, ranks), dim3(512), staged_smem, stream,
                                    unsigned(ranks), weights, kStaged, 3, sink));
      });
    }
    for (const ConvChainVariant& v : variants) {
      if (v.layout.ranks < 8) continue;
      report(v.name.c_str(), stream, [&] {
        launch_conv_chain(v, x, y, d, stream);
        LAB_CHECK(cudaGetLastError());
      });
    }
  }
  return 0;
}
