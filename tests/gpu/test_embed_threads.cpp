// The embedding API's thread-safety promise on the GPU backend (docs/api.md): one Model shared read-only,
// 8 threads each with its own Context on its own caller-owned stream, 1000 runs each, bit-identical to a
// single-threaded run. Even runs go through host buffers, odd runs through device buffers (enqueue).
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

#include "cnnrt/cnnrt.hpp"
#include "gpu_test_util.hpp"
#include "tests/model_builder.hpp"

using namespace cnnrt;

namespace {

constexpr int kThreads = 8;
constexpr int kRunsPerThread = 1000;
constexpr int kInputSets = 8;  // thread t, run i uses set (t + i) % kInputSets: contexts see varied inputs
constexpr int64_t kBatch = 2;  // of tiny_conv_model's [N,1,5,5] -> [N,2,5,5]
constexpr size_t kInputCount = kBatch * 1 * 5 * 5;
constexpr size_t kOutputCount = kBatch * 2 * 5 * 5;

bool same_bits(const std::vector<float>& got, const std::vector<float>& want) {
  return got.size() == want.size() && std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("8 threads, one shared Model, a Context and stream each: 1000 runs each, bit-identical (GPU)") {
  const std::string bytes = testing::tiny_conv_model().bytes();
  Options options;
  options.device = Device::Gpu;
  options.batch_sizes = {kBatch};
  options.tuning = false;  // the kernel choice must be one for all threads; measuring is not under test
  options.tuning_cache = "none";
  const Model model = Model::load_from_memory(bytes.data(), bytes.size(), options, "tiny_conv.onnx");
  REQUIRE(model.device() == Device::Gpu);

  std::vector<std::vector<float>> inputs, reference;
  {
    Context context(model);
    for (int s = 0; s < kInputSets; ++s) {
      inputs.push_back(testing::random_floats(kInputCount, 100 + static_cast<uint32_t>(s)));
      std::vector<float> out(kOutputCount);
      const float* in_ptr = inputs[s].data();
      float* out_ptr = out.data();
      context.run(&in_ptr, &out_ptr, kBatch);
      reference.push_back(std::move(out));
    }
  }

  std::atomic<bool> start{false};  // released together, so that the threads' runs overlap
  std::atomic<int> runs{0};
  std::atomic<int> mismatches{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      cudaStream_t stream = nullptr;
      float* d_in = nullptr;
      float* d_out = nullptr;
      try {
        if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess ||
            cudaMalloc(&d_in, kInputSets * kInputCount * sizeof(float)) != cudaSuccess ||
            cudaMalloc(&d_out, kOutputCount * sizeof(float)) != cudaSuccess) {
          throw std::runtime_error("CUDA setup failed");
        }
        for (int s = 0; s < kInputSets; ++s) {
          cudaMemcpy(d_in + s * kInputCount, inputs[s].data(), kInputCount * sizeof(float), cudaMemcpyHostToDevice);
        }
        while (!start) std::this_thread::yield();
        Context context(model, stream);
        std::vector<float> out(kOutputCount);
        for (int i = 0; i < kRunsPerThread; ++i) {
          const int s = (t + i) % kInputSets;
          std::fill(out.begin(), out.end(), -1.0f);
          if (i % 2 == 0) {
            const float* in_ptr = inputs[s].data();
            float* out_ptr = out.data();
            context.run(&in_ptr, &out_ptr, kBatch);
          } else {
            const float* in_ptr = d_in + s * kInputCount;
            context.enqueue(&in_ptr, &d_out, kBatch);
            cudaMemcpyAsync(out.data(), d_out, kOutputCount * sizeof(float), cudaMemcpyDeviceToHost, stream);
            if (cudaStreamSynchronize(stream) != cudaSuccess) throw std::runtime_error("stream failed");
          }
          if (!same_bits(out, reference[s])) ++mismatches;
          ++runs;
        }
      } catch (const std::exception&) {
        ++errors;
      }
      cudaFree(d_in);
      cudaFree(d_out);
      if (stream) cudaStreamDestroy(stream);
    });
  }
  start = true;
  for (std::thread& th : threads) th.join();
  CHECK(errors == 0);
  CHECK(runs == kThreads * kRunsPerThread);
  CHECK(mismatches == 0);
}
