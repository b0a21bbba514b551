// Helpers for GPU test cases: device buffers, poisoned outputs, random inputs, error norms.
#pragma once

#include <algorithm>
#include <cstring>
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <cstdlib>
#include <string>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "cnnrt/cnnrt.hpp"

#define GPU_CHECK(call)                                                                      \
  do {                                                                                       \
    cudaError_t err_ = (call);                                                               \
    REQUIRE_MESSAGE(err_ == cudaSuccess, #call " failed: " << cudaGetErrorString(err_));     \
  } while (0)

namespace cnnrt::testing {

// What the tests are doing now, for the crash report of tests/gpu/main.cpp (fixed buffer: the signal
// handler must not allocate).
extern char g_check_point[512];
inline void note_check_point(const std::string& what) {
  const size_t n = std::min(what.size(), sizeof(g_check_point) - 1);
  std::memcpy(g_check_point, what.data(), n);
  g_check_point[n] = '\0';
}

// A test case that cannot run on this device says so here and returns: the run then ends with exit code 77,
// which CTest reports as skipped (not passed), unless a check failed.
extern bool g_skipped;
inline void skip_test_case(const std::string& why) {
  MESSAGE("SKIPPED: " << why);
  g_skipped = true;
}

// A file of the repository: under the source folder this was built from, or, on the GPU machine (where
// the repository lies elsewhere), relative to the working directory, the repository root as
// scripts/gpu_round.sh runs the tests.
inline std::string repo_path(const std::string& relative) {
  const std::filesystem::path built = std::filesystem::path(CNNRT_SOURCE_DIR) / relative;
  return std::filesystem::exists(built) ? built.string() : relative;
}

// GPU options that run `kernel` wherever it is eligible (Options::force_kernel), heuristic choices elsewhere, no
// tuning cache: the planner tests' way to pin a fusion on or off.
inline Options forced_gpu_options(const std::string& kernel) {
  Options options;
  options.device = Device::Gpu;
  options.tuning = false;
  options.tuning_cache = "none";
  options.force_kernel = kernel;
  return options;
}

// A float32 device buffer. Freshly allocated buffers are poisoned (all bytes 0xFF: a NaN pattern), so an
// element the kernel forgot to write shows up as NaN in the comparison.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t count) : count_(count) {
    GPU_CHECK(cudaMalloc(&data_, bytes()));
    poison();
  }
  explicit DeviceBuffer(const std::vector<float>& host) : DeviceBuffer(host.size()) { upload(host); }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept : data_(other.data_), count_(other.count_) { other.data_ = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
    return *this;
  }

  float* get() const { return data_; }
  size_t size() const { return count_; }
  size_t bytes() const { return count_ * sizeof(float) > 0 ? count_ * sizeof(float) : 4; }
  void poison() { GPU_CHECK(cudaMemset(data_, 0xFF, bytes())); }
  void upload(const std::vector<float>& host) {
    REQUIRE(host.size() == count_);
    GPU_CHECK(cudaMemcpy(data_, host.data(), count_ * sizeof(float), cudaMemcpyHostToDevice));
  }
  std::vector<float> download() const {
    GPU_CHECK(cudaDeviceSynchronize());
    std::vector<float> host(count_);
    GPU_CHECK(cudaMemcpy(host.data(), data_, count_ * sizeof(float), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  float* data_ = nullptr;
  size_t count_ = 0;
};

// A float32 copy of host data in mapped pinned host memory; device() is the address kernels read it at (as
// Context::run's in-place path for small inputs binds them).
class MappedHostBuffer {
 public:
  explicit MappedHostBuffer(const std::vector<float>& values) : count_(values.size()) {
    GPU_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&host_), std::max<size_t>(4, count_ * sizeof(float)),
                            cudaHostAllocMapped));
    std::copy(values.begin(), values.end(), host_);
    GPU_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_), host_, 0));
  }
  ~MappedHostBuffer() { cudaFreeHost(host_); }
  MappedHostBuffer(const MappedHostBuffer&) = delete;
  MappedHostBuffer& operator=(const MappedHostBuffer&) = delete;
  float* device() const { return device_; }
  float* host() const { return host_; }

 private:
  float* host_ = nullptr;
  float* device_ = nullptr;
  size_t count_ = 0;
};

// An integer from the environment, or `fallback` when unset or empty: knobs that sanitizer rounds lower
// (compute-sanitizer's racecheck takes minutes per hundred model runs).
inline int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoll(v) : fallback;
}

// The largest thread-block cluster the kernel tests run (CNNRT_TEST_MAX_CLUSTER, default every size built:
// compute-sanitizer's synccheck misreports clusters of 16, docs/reliability.md).
inline int max_cluster_size() { return static_cast<int>(env_int("CNNRT_TEST_MAX_CLUSTER", 16)); }

// Uniform values in [lo, hi): never zeros, so unwritten outputs and wrong indexing cannot hide.
inline std::vector<float> random_floats(size_t count, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(count);
  for (float& x : v) x = dist(rng);
  return v;
}

// ||got - want|| / ||want|| over all elements; infinity when any element is NaN or the sizes differ.
inline double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return INFINITY;
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i]) != std::isnan(want[i])) return INFINITY;
    if (std::isnan(got[i])) continue;
    const double d = double(got[i]) - double(want[i]);
    num += d * d;
    den += double(want[i]) * double(want[i]);
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// Largest |a - b| / max(1, |b|) over two equally shaped tensors.
inline double max_rel_error(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape == b.shape);
  double worst = 0;
  for (size_t i = 0; i < a.data.size(); ++i) {
    worst = std::max(worst, std::abs(double(a.data[i]) - b.data[i]) / std::max(1.0, std::abs(double(b.data[i]))));
  }
  return worst;
}

}  // namespace cnnrt::testing
