// The TF32 wgmma rate a kernel shaped like wgr and wgh can reach when it does nothing else: each
// "stage" is their 12 `wgmma.mma_async m64nNk8` with A from registers (4 k steps x 3 for the 3xTF32 split),
// B from shared memory, one commit group a stage, and `wgmma.wait 0` every WAIT stages (the kernels wait
// every 2 and add a partial). No loads, no split, no barriers: the ceiling of that instruction pattern, to
// set their measured rates against. sm_90a only.
//
//   cmake --build --preset release --target wgmma_peak && build/release/bin/wgmma_peak
#include <cuda_runtime.h>

#include <cstdio>

#include "kernels/wgmma.cuh"

namespace wgmma_peak {

using namespace cnnrt::kernels;

template <int BN, int WAIT, bool ADD>
__global__ void __launch_bounds__(128, 1) peak_kernel(float* sink, int stages) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __shared__ __align__(1024) uint8_t b[2 * BN * 128];
  for (int i = threadIdx.x; i < 2 * BN * 32; i += 128) reinterpret_cast<float*>(b)[i] = 1e-3f * (i % 7);
  wgmma::fence_proxy_async();
  __syncthreads();
  uint32_t a[4];
  for (int i = 0; i < 4; ++i) a[i] = __float_as_uint(1e-3f * ((threadIdx.x + i) % 5)) & 0xffffe000u;
  float d[BN / 8][4], acc[BN / 8][4];
  for (int i = 0; i < BN / 8; ++i) {
    for (int j = 0; j < 4; ++j) d[i][j] = acc[i][j] = 0.0f;
  }
  const uint64_t desc = wgmma::smem_desc(static_cast<uint32_t>(__cvta_generic_to_shared(b)));
#pragma unroll 1
  for (int st = 0; st < stages; ++st) {
    wgmma::fence();
#pragma unroll
    for (int s = 0; s < 4; ++s) {
#pragma unroll
      for (int p = 0; p < 3; ++p) {
        const uint64_t dd = wgmma::desc_offset(desc, (p == 1 ? BN * 128 : 0) + 32 * s);
        if constexpr (BN == 64) {
          wgmma::wgmma_rs_m64n64k8(d, a, dd, 1);
        } else {
          wgmma::wgmma_rs_m64n128k8(d, a, dd, 1);
        }
      }
    }
    wgmma::commit();
    if (WAIT > 0 && (st + 1) % WAIT == 0) {
      wgmma::wait<0>();
      wgmma::fence_operands(d);
      if constexpr (ADD) {
        for (int i = 0; i < BN / 8; ++i) {
          for (int j = 0; j < 4; ++j) acc[i][j] += d[i][j];
        }
      }
    }
  }
  wgmma::wait<0>();
  wgmma::fence_operands(d);
  float sum = 0.0f;
  for (int i = 0; i < BN / 8; ++i) {
    for (int j = 0; j < 4; ++j) sum += d[i][j] + acc[i][j];
  }
  if (sum == 12345.0f) sink[0] = sum;  // (never: keeps the work)
#endif
}

template <int BN, int WAIT, bool ADD>
void run(const char* name, int sms, int clock_khz, float* sink) {
  for (int per_sm : {1, 2}) {
    const int blocks = sms * per_sm, stages = 2000;
    cudaEvent_t t0, t1;
    cudaEventCreate(&t0);
    cudaEventCreate(&t1);
    peak_kernel<BN, WAIT, ADD><<<blocks, 128>>>(sink, 50);  // warm-up
    cudaEventRecord(t0);
    peak_kernel<BN, WAIT, ADD><<<blocks, 128>>>(sink, stages);
    cudaEventRecord(t1);
    cudaEventSynchronize(t1);
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, t0, t1);
    const double fma = double(blocks) * stages * 12 * 64.0 * BN * 8;
    const double per_clk_sm = fma / (ms * 1e-3) / sms / (clock_khz * 1e3);
    std::printf("%-34s %d block(s) an SM  %9.1f us  %6.0f TF32 FMA/clk/SM  %5.1f%% of 1024\n", name, per_sm,
                ms * 1e3, per_clk_sm, 100.0 * per_clk_sm / 1024.0);
    cudaEventDestroy(t0);
    cudaEventDestroy(t1);
  }
}

}  // namespace wgmma_peak

int main() {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess || prop.major != 9) {
    std::printf("wgmma_peak: needs a device of compute capability 9.0\n");
    return 0;
  }
  int clock_khz = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
  float* sink = nullptr;
  cudaMalloc(&sink, sizeof(float));
  std::printf("%s, %d SMs, %d MHz (FMA/clk at that clock)\n", prop.name, prop.multiProcessorCount, clock_khz / 1000);
  using namespace wgmma_peak;
  run<64, 0, false>("m64n64k8 RS, no waits", prop.multiProcessorCount, clock_khz, sink);
  run<64, 2, false>("m64n64k8 RS, wait 0 every 2", prop.multiProcessorCount, clock_khz, sink);
  run<64, 2, true>("m64n64k8 RS, wait 0 every 2, + add", prop.multiProcessorCount, clock_khz, sink);
  run<128, 0, false>("m64n128k8 RS, no waits", prop.multiProcessorCount, clock_khz, sink);
  run<128, 2, true>("m64n128k8 RS, wait 0 every 2, + add", prop.multiProcessorCount, clock_khz, sink);
  const cudaError_t err = cudaDeviceSynchronize();
  std::printf("%s\n", err == cudaSuccess ? "ok" : cudaGetErrorString(err));
  return err == cudaSuccess ? 0 : 1;
}
