// What the hand-over from one step to the next costs inside a CUDA graph, by how the next grid learns that the
// previous one has written its outputs:
//   plain   no PDL: the next grid launches when the previous one has finished
//   pdl     PDL, `griddepcontrol.wait` then `launch_dependents` (launch.cuh's wait_for_prior_grid)
//   flag    PDL; each block of a grid publishes its end on a counter (fence, then an atomic add) and the next
//           grid's blocks spin on it (acquire) instead of waiting for the whole grid to complete and flush;
//           `launch_dependents` after the spin
//   flag0   as flag, `launch_dependents` first (every grid of the chain may be resident and spinning)
// A chain of L steps, each G blocks of 256 threads reading the previous step's output (a value of its own and one of
// another block's) and running `work` dependent FMAs a thread; the graph's median replay for L = 4 and L = 36, and
// the cost of a step as their slope (the graph's launch and the counters' reset cancel). Every mode's output is
// checked against the plain chain's.
//
//   cmake --build --preset release --target handoff_lab
//   build/release/bin/handoff_lab
#include "kernels/lab/lab_check.cuh"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

namespace {

using cnnrt::kernels::lab::device_random;

enum Mode { kPlain = 0, kPdl = 1, kFlag = 2, kFlagEarly = 3 };
const char* const kModeNames[] = {"plain", "pdl", "flag", "flag0"};
constexpr int kThreads = 256;

__device__ __forceinline__ unsigned load_acquire(const unsigned* p) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

template <int kMode>
__global__ void __launch_bounds__(kThreads) step_kernel(const float* in, float* out, unsigned* counters, int k,
                                                        unsigned prev_blocks, int work, int n) {
  if constexpr (kMode == kPdl) {
    asm volatile("griddepcontrol.wait;\n\tgriddepcontrol.launch_dependents;" ::: "memory");
  } else if constexpr (kMode == kFlag || kMode == kFlagEarly) {
    if constexpr (kMode == kFlagEarly) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    if (k > 0) {
      if (threadIdx.x == 0) {
        while (load_acquire(counters + k - 1) < prev_blocks) {
        }
      }
      __syncthreads();
    }
    if constexpr (kMode == kFlag) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  }
  const int i = static_cast<int>(blockIdx.x) * kThreads + static_cast<int>(threadIdx.x);
  float v = in[i] + 0.5f * in[(i * 7 + 13 * kThreads) % n];
  for (int w = 0; w < work; ++w) v = fmaf(v, 0.999f, 0.001f);
  out[i] = v;
  if constexpr (kMode == kFlag || kMode == kFlagEarly) {
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence();
      atomicAdd(counters + k, 1u);
    }
  }
}

void launch_step(int mode, int G, cudaStream_t s, const float* in, float* out, unsigned* counters, int k, int work) {
  cudaLaunchConfig_t c = {};
  c.gridDim = dim3(static_cast<unsigned>(G));
  c.blockDim = dim3(kThreads);
  c.stream = s;
  cudaLaunchAttribute a[1];
  a[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  a[0].val.programmaticStreamSerializationAllowed = 1;
  c.attrs = a;
  c.numAttrs = mode == kPlain ? 0 : 1;
  const int n = G * kThreads;
  const unsigned prev = static_cast<unsigned>(G);
  switch (mode) {
    case kPlain: LAB_CHECK(cudaLaunchKernelEx(&c, step_kernel<kPlain>, in, out, counters, k, prev, work, n)); break;
    case kPdl: LAB_CHECK(cudaLaunchKernelEx(&c, step_kernel<kPdl>, in, out, counters, k, prev, work, n)); break;
    case kFlag: LAB_CHECK(cudaLaunchKernelEx(&c, step_kernel<kFlag>, in, out, counters, k, prev, work, n)); break;
    default: LAB_CHECK(cudaLaunchKernelEx(&c, step_kernel<kFlagEarly>, in, out, counters, k, prev, work, n)); break;
  }
}

struct Result {
  double median_us = 0;
  std::vector<float> out;
};

// The chain of L steps as a graph (a counters' reset first), its median replay between two events.
Result run_chain(int mode, int G, int L, int work, const float* x, float* bufs, unsigned* counters, cudaStream_t s) {
  const int n = G * kThreads;
  cudaGraph_t graph;
  LAB_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  LAB_CHECK(cudaMemsetAsync(counters, 0, sizeof(unsigned) * 64, s));
  for (int k = 0; k < L; ++k) {
    const float* in = k == 0 ? x : bufs + static_cast<size_t>((k - 1) % 2) * n;
    launch_step(mode, G, s, in, bufs + static_cast<size_t>(k % 2) * n, counters, k, work);
  }
  LAB_CHECK(cudaStreamEndCapture(s, &graph));
  cudaGraphExec_t exec;
  LAB_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t e0, e1;
  LAB_CHECK(cudaEventCreate(&e0));
  LAB_CHECK(cudaEventCreate(&e1));
  for (int r = 0; r < 20; ++r) LAB_CHECK(cudaGraphLaunch(exec, s));
  std::vector<float> t;
  for (int r = 0; r < 300; ++r) {
    LAB_CHECK(cudaEventRecord(e0, s));
    LAB_CHECK(cudaGraphLaunch(exec, s));
    LAB_CHECK(cudaEventRecord(e1, s));
    LAB_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    LAB_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms * 1000.0f);
  }
  std::sort(t.begin(), t.end());
  Result r;
  r.median_us = t[t.size() / 2];
  LAB_CHECK(cudaMemset(bufs + static_cast<size_t>((L - 1) % 2) * n, 0xff, sizeof(float) * n));  // poison
  LAB_CHECK(cudaGraphLaunch(exec, s));
  LAB_CHECK(cudaStreamSynchronize(s));
  r.out.resize(static_cast<size_t>(n));
  LAB_CHECK(cudaMemcpy(r.out.data(), bufs + static_cast<size_t>((L - 1) % 2) * n, sizeof(float) * n,
                       cudaMemcpyDeviceToHost));
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return r;
}

}  // namespace

int main() {
  cudaDeviceProp p;
  LAB_CHECK(cudaGetDeviceProperties(&p, 0));
  std::printf("%s, %d SMs\n", p.name, p.multiProcessorCount);
  const int max_g = 2 * p.multiProcessorCount;
  const float* x = device_random(static_cast<size_t>(max_g) * kThreads, 1);
  float* bufs;
  unsigned* counters;
  LAB_CHECK(cudaMalloc(&bufs, sizeof(float) * 2 * max_g * kThreads));
  LAB_CHECK(cudaMalloc(&counters, sizeof(unsigned) * 64));
  cudaStream_t s;
  LAB_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::printf("%-6s %5s %6s %10s %10s %12s  %s\n", "mode", "G", "work", "L=4 us", "L=36 us", "a step us", "check");
  bool ok = true;
  for (int work : {0, 2000}) {
    for (int G : {1, 16, 66, p.multiProcessorCount, max_g}) {
      std::vector<float> ref;
      for (int mode = kPlain; mode <= kFlagEarly; ++mode) {
        const Result a = run_chain(mode, G, 4, work, x, bufs, counters, s);
        const Result b = run_chain(mode, G, 36, work, x, bufs, counters, s);
        if (mode == kPlain) ref = b.out;
        double err = 0;
        for (size_t i = 0; i < ref.size(); ++i) err = std::max(err, double(std::fabs(b.out[i] - ref[i])));
        const bool good = err == 0.0;
        ok = ok && good;
        std::printf("%-6s %5d %6d %10.2f %10.2f %12.3f  %s\n", kModeNames[mode], G, work, a.median_us, b.median_us,
                    (b.median_us - a.median_us) / 32.0, good ? "ok" : "MISMATCH");
      }
    }
  }
  cudaFree(bufs);
  cudaFree(counters);
  return ok ? 0 : 1;
}
