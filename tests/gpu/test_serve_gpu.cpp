// cnnrt serve's dynamic batcher on the GPU (apps/cnnrt/serve/batcher.cpp): instances on every GPU of the
// machine (two per GPU, as `cnnrt serve --gpus 0,1` runs them), batches padded to planned sizes, concurrent
// requests of 1 to 3 rows, every answer against the CPU backend on that request alone. On a two-GPU machine
// both GPUs must have run batches.
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "cnnrt/cnnrt.hpp"
#include "gpu_test_util.hpp"
#include "serve/batcher.hpp"

using namespace cnnrt;
using namespace cnnrt_serve;
using testing::repo_path;

TEST_CASE("serve batcher on the GPU: 8 clients x 40 requests over every GPU, padded batches, CPU answers") {
  int gpus = 0;
  GPU_CHECK(cudaGetDeviceCount(&gpus));
  gpus = std::min(gpus, 2);
  Options cpu_options;
  cpu_options.device = Device::Cpu;
  const Model cpu_model = Model::load(repo_path("models/fashion_lenet.onnx"), cpu_options);

  std::vector<InstanceSpec> instances;
  for (int gpu = 0; gpu < gpus; ++gpu) {
    Options options;
    options.device = Device::Gpu;
    options.gpu_index = gpu;
    options.tuning = false;
    options.tuning_cache = "none";
    const Model model = Model::load(repo_path("models/fashion_lenet.onnx"), options);
    for (int k = 0; k < 2; ++k) instances.push_back({model, "gpu" + std::to_string(gpu) + "/" + std::to_string(k)});
  }
  const ModelSpec spec = describe_model("fashion_lenet", instances.front().model, 16);
  REQUIRE(spec.batchable);
  ModelMetrics metrics(16);
  BatchingOptions options;
  options.max_batch = 16;
  options.max_queue_delay = std::chrono::milliseconds(2);
  options.batch_sizes = {1, 2, 4, 8, 16};
  DynamicBatcher batcher(spec, instances, options, metrics);

  constexpr int kClients = 8, kRequests = 40;
  std::vector<std::string> failures(kClients);
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      Context cpu(cpu_model);
      for (int i = 0; i < kRequests && failures[c].empty(); ++i) {
        const int64_t rows = 1 + (c + i) % 3;
        InferRequest r;
        r.rows = rows;
        r.shapes = {{rows, 1, 28, 28}};
        r.inputs = {testing::random_floats(static_cast<size_t>(rows) * 784, 1000 + c * kRequests + i, 0.0f, 1.0f)};
        r.outputs = {{0, false}};
        const std::vector<float> want = cpu.run({Tensor{r.shapes[0], r.inputs[0]}})[0].data;
        const InferResult got = batcher.submit(r).get();
        if (got.status != 200) {
          failures[c] = "HTTP " + std::to_string(got.status) + ": " + got.error;
          break;
        }
        if (got.outputs[0].shape != std::vector<int64_t>{rows, 10} || got.outputs[0].data.size() != want.size()) {
          failures[c] = "wrong output shape";
          break;
        }
        for (size_t k = 0; k < want.size(); ++k) {
          if (std::abs(got.outputs[0].data[k] - want[k]) > 1e-4f + 1e-4f * std::abs(want[k])) {
            failures[c] = "request " + std::to_string(i) + " value " + std::to_string(k) + ": " +
                          std::to_string(got.outputs[0].data[k]) + " against the CPU's " + std::to_string(want[k]);
            break;
          }
        }
      }
    });
  }
  for (std::thread& t : clients) t.join();
  for (int c = 0; c < kClients; ++c) CHECK_MESSAGE(failures[c].empty(), "client " << c << ": " << failures[c]);

  int64_t rows_sent = 0;
  for (int c = 0; c < kClients; ++c) {
    for (int i = 0; i < kRequests; ++i) rows_sent += 1 + (c + i) % 3;
  }
  const Histogram::Snapshot sizes = metrics.batch_size.snapshot();
  MESSAGE(sizes.count << " batches, " << sizes.sum << " rows");
  CHECK(sizes.sum == static_cast<double>(rows_sent));  // every row ran once (padding is not counted)
  CHECK(sizes.count < static_cast<uint64_t>(kClients * kRequests));  // some requests were merged
  std::vector<uint64_t> per_gpu(static_cast<size_t>(gpus), 0);
  for (const auto& [label, counter] : metrics.instance_batches) {
    MESSAGE(label << ": " << counter->value() << " batches");
    per_gpu[static_cast<size_t>(label[3] - '0')] += counter->value();
  }
  for (int gpu = 0; gpu < gpus; ++gpu) CHECK_MESSAGE(per_gpu[static_cast<size_t>(gpu)] > 0, "GPU " << gpu << " ran no batch");
}
