// kernels/fast_div.cuh (the chain kernel's index arithmetic) against the division operator, on the host:
// the device runs the same expression with __umulhi.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/fast_div.cuh"

using cnnrt::kernels::FastDiv;

TEST_CASE("FastDiv agrees with / and % for small, power-of-two, odd and huge divisors") {
  std::vector<int> divisors;
  for (int d = 1; d <= 1100; ++d) divisors.push_back(d);
  for (int s = 11; s < 31; ++s) {
    divisors.push_back(1 << s);
    divisors.push_back((1 << s) - 1);
    divisors.push_back((1 << s) + 1);
  }
  divisors.push_back(2147483647);
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> any(0, 2147483647);
  int64_t checked = 0;
  for (int d : divisors) {
    const FastDiv fd(d);
    const int64_t dd = d;
    std::vector<int64_t> dividends = {0, 1, dd - 1, dd, dd + 1, 2147483647, 2147483646, 2147483647 - dd};
    for (int k = 1; k < 64; ++k) {
      dividends.push_back(dd * k - 1);
      dividends.push_back(dd * k);
    }
    for (int i = 0; i < 400; ++i) dividends.push_back(any(rng));
    for (int n = 0; n < 3000; ++n) dividends.push_back(n);
    for (int64_t n64 : dividends) {
      if (n64 < 0 || n64 > 2147483647) continue;  // the range FastDiv promises
      const int n = static_cast<int>(n64);
      if (fd.div(n) != n / d || fd.mod(n) != n % d) {
        FAIL_CHECK("FastDiv(" << d << ") of " << n << ": " << fd.div(n) << " r " << fd.mod(n) << ", expected " << n / d
                              << " r " << n % d);
      }
      ++checked;
    }
  }
  CHECK(checked > 1000000);
  MESSAGE(checked << " divisions checked");
}
