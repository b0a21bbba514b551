// The lab programs' CUDA error check: names the call, the error, the file and line, and exits (the lab
// programs are tools, not the library, so they may exit); and their random device data.
#pragma once

#include <cuda_runtime.h>

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

}  // namespace cnnrt::kernels::lab
