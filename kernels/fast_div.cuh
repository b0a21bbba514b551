// Division by a divisor fixed at launch (a tensor extent, a tile count) with a multiply-high, an add and a
// shift instead of the integer division sequence (about 20 dependent instructions on sm_90). Kernels
// whose phases are one or two passes of index arithmetic (the chain kernel) spend their latency there.
// The host computes the constants (the round-up method of Granlund and Montgomery, PLDI 1994); exact for
// dividends in [0, 2^31) and divisors in [1, 2^31). Host-safe: the planner and the unit tests include it.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define CNNRT_FAST_DIV_FN __host__ __device__ __forceinline__
#else
#define CNNRT_FAST_DIV_FN inline
#endif

namespace cnnrt::kernels {

struct FastDiv {
  uint32_t d = 1;      // the divisor
  uint32_t mul = 1;    // 2^32 * (2^shift - d) / d + 1 (rounded down before the + 1)
  uint32_t shift = 0;  // ceil(log2(d))

  FastDiv() = default;
  explicit FastDiv(int divisor) : d(static_cast<uint32_t>(divisor)) {
    while ((uint64_t{1} << shift) < d) ++shift;
    mul = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << shift) - d)) / d + 1);
  }

  // n / d and n % d for 0 <= n < 2^31 (the sum below then stays under 2^32).
  CNNRT_FAST_DIV_FN int div(int n) const {
    const uint32_t u = static_cast<uint32_t>(n);
#ifdef __CUDA_ARCH__
    const uint32_t hi = __umulhi(u, mul);
#else
    const uint32_t hi = static_cast<uint32_t>((uint64_t{u} * mul) >> 32);
#endif
    return static_cast<int>((hi + u) >> shift);
  }
  CNNRT_FAST_DIV_FN int mod(int n) const { return n - div(n) * static_cast<int>(d); }
};

}  // namespace cnnrt::kernels
