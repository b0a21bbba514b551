// The lab programs' CUDA error check: names the call, the error, the file and line, and exits (the lab
// programs are tools, not the library, so they may exit).
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define LAB_CHECK(call)                                                                                    \
  do {                                                                                                     \
    cudaError_t lab_err_ = (call);                                                                         \
    if (lab_err_ != cudaSuccess) {                                                                         \
      std::fprintf(stderr, "%s failed: %s (%s:%d)\n", #call, cudaGetErrorString(lab_err_), __FILE__, __LINE__); \
      std::exit(1);                                                                                        \
    }                                                                                                      \
  } while (0)
