// Does compute-sanitizer's synccheck flag a block barrier that follows a cluster barrier when no thread
// diverges at all? The chain kernel (kernels/conv_chain.cu) drew "Divergent thread(s) in warp" at the first
// block barrier after a cluster barrier (or after a cluster arrive), in a few warps of a few blocks per run,
// in every arrangement of its loops and barriers (docs/reliability.md). This program runs the same barrier
// sequence as the chain kernel (zero a buffer, cluster arrive, stage from global memory with cp.async,
// block barrier, cluster wait, block-local work, block barrier, stores into every rank's shared memory,
// cluster barrier, block barrier) in code where every thread executes every instruction: no branch depends
// on the thread. It checks its own output, so it also shows the barriers order what they should.
//
//   build/release/bin/cluster_sync_check [clusters] [ranks]          default 34 clusters of 16
//   compute-sanitizer --tool synccheck build/release/bin/cluster_sync_check
//
// Measured (H100, driver 580, CUDA 13.0): outputs right at
// every size; synccheck 992 "Divergent thread(s) in warp" errors with clusters of 16 (at the block barrier
// after the cluster wait), 0 with clusters of 8 and of 2. The report follows the cluster size, not the code.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kernels/cp_async.cuh"
#include "kernels/lab/lab_check.cuh"

namespace {

using namespace cnnrt::kernels;

constexpr int kThreads = 512;
constexpr int kSlots = 4;  // floats per thread in each buffer

__device__ __forceinline__ unsigned cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

__device__ __forceinline__ float* map_rank(float* p, unsigned rank) {
  float* q;
  asm volatile("mapa.u64 %0, %1, %2;" : "=l"(q) : "l"(p), "r"(rank));
  return q;
}

// in: [clusters * ranks * kThreads * kSlots]; out: the same. Every block: buffer a = its slice of `in`
// (cp.async), buffer b[q] = rank q's a-sums pushed by rank q; out = b summed in rank order.
__global__ void __launch_bounds__(kThreads) cluster_sync_kernel(const float* __restrict__ in, float* __restrict__ out,
                                                                int ranks) {
  extern __shared__ float smem[];
  float* a = smem;                      // kThreads * kSlots
  float* b = smem + kThreads * kSlots;  // ranks * kThreads
  const int tid = threadIdx.x;
  const unsigned rank = cluster_rank();
  const long block = blockIdx.x;
  for (int q = 0; q < ranks; ++q) b[q * kThreads + tid] = 0.0f;
  asm volatile("barrier.cluster.arrive.release;" ::: "memory");
  for (int k = 0; k < kSlots; ++k) cp_async_4(a + k * kThreads + tid, in + (block * kSlots + k) * kThreads + tid, true);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();  // first block barrier after the cluster arrive
  asm volatile("barrier.cluster.wait.acquire;" ::: "memory");
  float s = 0.0f;
  for (int k = 0; k < kSlots; ++k) s += a[k * kThreads + (tid + 1) % kThreads];  // another thread's values
  __syncthreads();
  for (unsigned q = 0; q < static_cast<unsigned>(ranks); ++q) map_rank(b, q)[rank * kThreads + tid] = s;
  asm volatile("barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;" ::: "memory");
  __syncthreads();  // first block barrier after a full cluster barrier
  float t = 0.0f;
  for (int q = 0; q < ranks; ++q) t += b[q * kThreads + tid];
  for (int k = 0; k < kSlots; ++k) out[(block * kSlots + k) * kThreads + tid] = t + static_cast<float>(k);
  asm volatile("barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;" ::: "memory");  // no rank exits while others store into it
}

}  // namespace

int main(int argc, char** argv) {
  const int clusters = argc > 1 ? std::atoi(argv[1]) : 34;
  const int ranks = argc > 2 ? std::atoi(argv[2]) : 16;
  const int blocks = clusters * ranks;
  const size_t n = size_t(blocks) * kSlots * kThreads;
  std::vector<float> in(n), out(n, -1.0f);
  for (size_t i = 0; i < n; ++i) in[i] = static_cast<float>((i * 7919) % 1000) * 0.001f + 0.5f;
  float *d_in = nullptr, *d_out = nullptr;
  LAB_CHECK(cudaMalloc(&d_in, n * sizeof(float)));
  LAB_CHECK(cudaMalloc(&d_out, n * sizeof(float)));
  LAB_CHECK(cudaMemcpy(d_in, in.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  LAB_CHECK(cudaMemcpy(d_out, out.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  const size_t smem = (size_t(kThreads) * kSlots + size_t(ranks) * kThreads) * sizeof(float);
  LAB_CHECK(cudaFuncSetAttribute(cluster_sync_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  LAB_CHECK(cudaFuncSetAttribute(cluster_sync_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(blocks));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = smem;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = static_cast<unsigned>(ranks);
  attr.val.clusterDim.y = attr.val.clusterDim.z = 1;
  config.attrs = &attr;
  config.numAttrs = 1;
  const int launches = 20;
  for (int i = 0; i < launches; ++i) LAB_CHECK(cudaLaunchKernelEx(&config, cluster_sync_kernel, d_in, d_out, ranks));
  LAB_CHECK(cudaDeviceSynchronize());
  LAB_CHECK(cudaMemcpy(out.data(), d_out, n * sizeof(float), cudaMemcpyDeviceToHost));
  // Expected: out[block][k][tid] = sum over the cluster's ranks q (in order) of rank q's s for tid, + k.
  long bad = 0;
  for (int blk = 0; blk < blocks; ++blk) {
    const int first = blk / ranks * ranks;
    for (int tid = 0; tid < kThreads; ++tid) {
      float t = 0.0f;
      for (int q = 0; q < ranks; ++q) {
        float s = 0.0f;
        for (int k = 0; k < kSlots; ++k) s += in[(size_t(first + q) * kSlots + k) * kThreads + (tid + 1) % kThreads];
        t += s;
      }
      for (int k = 0; k < kSlots; ++k) bad += out[(size_t(blk) * kSlots + k) * kThreads + tid] != t + static_cast<float>(k);
    }
  }
  std::printf("cluster_sync_check: %d launches of %d clusters x %d ranks x %d threads: %ld wrong outputs\n", launches,
              clusters, ranks, kThreads, bad);
  cudaFree(d_in);
  cudaFree(d_out);
  return bad == 0 ? 0 : 1;
}
