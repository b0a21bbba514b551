// Soak (issue 9): many inferences of the shipped model on the GPU with no growth in host or device memory
// and bit-identical outputs for identical inputs.
//
// gpu_tests runs it with a short count (CNNRT_SOAK_INFERENCES, default 2000) so the suite stays quick; the
// full soak on the GPU machine is
//   CNNRT_SOAK_INFERENCES=1000000 build/release/bin/gpu_tests -tc='soak*'
// It runs models/fashion_lenet.onnx (CNNRT_SOAK_MODEL overrides); without a GPU the whole gpu_tests binary
// skips (exit 77).
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "cnnrt/cnnrt.hpp"
#include "gpu_test_util.hpp"

namespace {

// Resident set size in bytes, from /proc/self/statm (pages).
int64_t host_rss_bytes() {
  long pages_total = 0, pages_resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return -1;
  const int read = std::fscanf(f, "%ld %ld", &pages_total, &pages_resident);
  std::fclose(f);
  return read == 2 ? static_cast<int64_t>(pages_resident) * 4096 : -1;
}

int64_t device_used_bytes() {
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) return -1;
  return static_cast<int64_t>(total_bytes - free_bytes);
}

}  // namespace

TEST_CASE("soak: repeated inferences keep memory flat and outputs bit-identical") {
  const char* model_env = std::getenv("CNNRT_SOAK_MODEL");
  const std::string model_path = model_env && *model_env ? model_env : cnnrt::testing::repo_path("models/fashion_lenet.onnx");
  REQUIRE_MESSAGE(std::filesystem::exists(model_path), "no model at " << model_path);
  const int64_t inferences = cnnrt::testing::env_int("CNNRT_SOAK_INFERENCES", 2000);
  const int64_t batch = cnnrt::testing::env_int("CNNRT_SOAK_BATCH", 1);
  cnnrt::Options options;
  options.device = cnnrt::Device::Gpu;
  const cnnrt::Model model = cnnrt::Model::load(model_path, options);
  cnnrt::Context context(model);

  // One buffer per input and output, sized for `batch`; inputs are a fixed pseudo-random pattern.
  const std::vector<std::vector<int64_t>> out_shapes = model.output_shapes(batch);
  std::vector<std::vector<float>> inputs, outputs, first;
  for (const cnnrt::TensorDesc& in : model.inputs()) {
    int64_t n = batch;
    for (size_t d = 1; d < in.shape.size(); ++d) n *= in.shape[d];
    std::vector<float> v(static_cast<size_t>(n));
    uint32_t state = 12345;
    for (float& x : v) {
      state = state * 1664525u + 1013904223u;
      x = static_cast<float>(state >> 8) / 16777216.0f;
    }
    inputs.push_back(std::move(v));
  }
  for (const auto& s : out_shapes) {
    int64_t n = 1;
    for (int64_t d : s) n *= d;
    outputs.emplace_back(static_cast<size_t>(n));
  }
  std::vector<const float*> in_ptrs;
  std::vector<float*> out_ptrs;
  for (auto& v : inputs) in_ptrs.push_back(v.data());
  for (auto& v : outputs) out_ptrs.push_back(v.data());

  // Warm up (plans, arenas, CUDA graph, allocator pools), then take the baselines.
  for (int i = 0; i < 100; ++i) context.run(in_ptrs.data(), out_ptrs.data(), batch);
  first = outputs;
  const int64_t rss_start = host_rss_bytes();
  const int64_t device_start = device_used_bytes();

  int64_t mismatches = 0;
  for (int64_t i = 0; i < inferences; ++i) {
    context.run(in_ptrs.data(), out_ptrs.data(), batch);
    for (size_t o = 0; o < outputs.size(); ++o) {
      if (std::memcmp(outputs[o].data(), first[o].data(), outputs[o].size() * sizeof(float)) != 0) ++mismatches;
    }
  }
  const int64_t rss_end = host_rss_bytes();
  const int64_t device_end = device_used_bytes();
  MESSAGE("soak: " << inferences << " inferences of " << model_path << " at batch " << batch << "; host RSS "
                   << rss_start << " -> " << rss_end << " bytes, device used " << device_start << " -> "
                   << device_end << " bytes, " << mismatches << " outputs not bit-identical");
  CHECK(mismatches == 0);
  CHECK(device_end == device_start);
  // The host RSS may move by a page or two (logging, libc arenas); growth per inference must be nil.
  CHECK(rss_end - rss_start <= 1 << 20);
}
