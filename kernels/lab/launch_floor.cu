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
#include <chrono>
#include <cstring>
#include <string>
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

// Reads `n` floats of `x` (mapped pinned memory in the host-to-host rows), writes their sum to y[0..9], then,
// when `flag` is given, publishes `seq` there (a host-visible store after a system-wide fence).
__global__ void io_kernel(const float* x, int n, float* y, volatile unsigned* flag, unsigned seq) {
  __shared__ float sum[32];
  float s = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) s += x[i];
  for (int off = 16; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
  if (threadIdx.x % 32 == 0) sum[threadIdx.x / 32] = s;
  __syncthreads();
  if (threadIdx.x < 10) y[threadIdx.x] = sum[0] + threadIdx.x;
  if (flag) {
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence_system();
      *flag = seq;
    }
  }
}

// Host-clock medians of `reps` runs of `body` (each returns once its results are on the host).
double host_median_us(int reps, const std::function<void()>& body) {
  for (int i = 0; i < 200; ++i) body();
  std::vector<double> us;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    body();
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  return median(us);
}

// What an application waits for at batch 1, host to host: the launch (a kernel or a one-kernel graph), the
// input read and output written in mapped pinned memory or copied, and the wait (cudaStreamSynchronize, or
// spinning on a flag the kernel writes to mapped memory).
void host_to_host(cudaStream_t stream, const ConvChainDesc& d, const ConvChainVariant* chain) {
  std::printf("\n## host to host (host clock, median of 2000)\n");
  float *hx = nullptr, *hy = nullptr, *dx = nullptr, *dy = nullptr, *mx = nullptr, *my = nullptr;
  unsigned* hflag = nullptr;
  unsigned* mflag = nullptr;
  LAB_CHECK(cudaHostAlloc(&hx, 784 * sizeof(float), cudaHostAllocMapped));
  LAB_CHECK(cudaHostAlloc(&hy, 16 * sizeof(float), cudaHostAllocMapped));
  LAB_CHECK(cudaHostAlloc(&hflag, sizeof(unsigned), cudaHostAllocMapped));
  LAB_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&mx), hx, 0));
  LAB_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&my), hy, 0));
  LAB_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&mflag), hflag, 0));
  LAB_CHECK(cudaMalloc(&dx, 784 * sizeof(float)));
  LAB_CHECK(cudaMalloc(&dy, 16 * sizeof(float)));
  for (int i = 0; i < 784; ++i) hx[i] = 0.001f * float(i % 97);
  *hflag = 0;
  std::vector<float> user_in(784, 0.5f), user_out(16);
  auto sync = [&] { LAB_CHECK(cudaStreamSynchronize(stream)); };
  auto line = [](const char* name, double us) { std::printf("%-60s %6.2f us\n", name, us); };
  auto io = [&](const float* x, float* y, volatile unsigned* flag, unsigned seq) {
    io_kernel<<<1, 256, 0, stream>>>(x, 784, y, flag, seq);
  };
  line("empty kernel: launch + cudaStreamSynchronize", host_median_us(2000, [&] {
         empty_kernel<<<1, 32, 0, stream>>>(nullptr);
         sync();
       }));
  cudaGraphExec_t empty = capture(stream, [&] { empty_kernel<<<1, 32, 0, stream>>>(nullptr); });
  line("empty kernel: one-node graph + cudaStreamSynchronize", host_median_us(2000, [&] {
         LAB_CHECK(cudaGraphLaunch(empty, stream));
         sync();
       }));
  line("io kernel, mapped in/out: launch + sync (+ host memcpys)", host_median_us(2000, [&] {
         std::memcpy(hx, user_in.data(), 784 * sizeof(float));
         io(mx, my, nullptr, 0);
         sync();
         std::memcpy(user_out.data(), hy, 10 * sizeof(float));
       }));
  line("io kernel, device in/out: H2D + kernel + D2H + sync", host_median_us(2000, [&] {
         LAB_CHECK(cudaMemcpyAsync(dx, hx, 784 * sizeof(float), cudaMemcpyHostToDevice, stream));
         io(dx, dy, nullptr, 0);
         LAB_CHECK(cudaMemcpyAsync(hy, dy, 10 * sizeof(float), cudaMemcpyDeviceToHost, stream));
         sync();
       }));
  unsigned seq = 0;
  line("io kernel, mapped in/out: launch + spin on a mapped flag", host_median_us(2000, [&] {
         ++seq;
         io(mx, my, mflag, seq);
         while (*static_cast<volatile unsigned*>(hflag) != seq) {
         }
       }));
  LAB_CHECK(cudaStreamSynchronize(stream));
  if (chain) {
    cudaGraphExec_t on_device = capture(stream, [&] { launch_conv_chain(*chain, dx, dy, d, stream); });
    cudaGraphExec_t mapped = capture(stream, [&] { launch_conv_chain(*chain, mx, my, d, stream); });
    std::string name = chain->name + ", device buffers: graph + sync";
    line(name.c_str(), host_median_us(2000, [&] {
           LAB_CHECK(cudaGraphLaunch(on_device, stream));
           sync();
         }));
    name = chain->name + ", mapped in/out: graph + sync";
    line(name.c_str(), host_median_us(2000, [&] {
           LAB_CHECK(cudaGraphLaunch(mapped, stream));
           sync();
         }));
    cudaGraphExec_t mapped_once = capture(stream, [&] { launch_conv_chain(*chain, mx, my, d, stream, true); });
    name = chain->name + ", mapped in/out, image read once: graph + sync";
    line(name.c_str(), host_median_us(2000, [&] {
           LAB_CHECK(cudaGraphLaunch(mapped_once, stream));
           sync();
         }));
    cudaGraphExecDestroy(mapped_once);
    *hflag = 0;
    cudaGraphExec_t mapped_done =
        capture(stream, [&] { launch_conv_chain(*chain, mx, my, d, stream, true, mflag); });
    name = chain->name + ", mapped in/out, image read once: graph + spin on its done flag";
    line(name.c_str(), host_median_us(2000, [&] {
           *static_cast<volatile unsigned*>(hflag) = 0;
           LAB_CHECK(cudaGraphLaunch(mapped_done, stream));
           while (*static_cast<volatile unsigned*>(hflag) != 1u) {
           }
         }));
    LAB_CHECK(cudaStreamSynchronize(stream));
    cudaGraphExecDestroy(mapped_done);
    name = chain->name + ", mapped in/out: kernel launch + sync";
    line(name.c_str(), host_median_us(2000, [&] {
           launch_conv_chain(*chain, mx, my, d, stream);
           sync();
         }));
    cudaGraphExecDestroy(on_device);
    cudaGraphExecDestroy(mapped);
  }
  cudaGraphExecDestroy(empty);
  cudaFreeHost(hx);
  cudaFreeHost(hy);
  cudaFreeHost(hflag);
  cudaFree(dx);
  cudaFree(dy);
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
  set_programmatic_launch(false);
  const ConvChainVariant* best = nullptr;
  for (const ConvChainVariant& v : variants) {
    if (v.name == "chain_k5k5_cl16_aw_bw") best = &v;
  }
  host_to_host(stream, d, best ? best : (variants.empty() ? nullptr : &variants.front()));
  return 0;
}
