// `cnnrt serve`: ONNX models behind the Open Inference Protocol (KServe v2) over HTTP, with a dynamic batcher
// per model and model instances spread over GPUs. docs/serving.md is the user's guide.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "cnnrt/cnnrt.hpp"

namespace cnnrt_serve {

struct ServeConfig {
  std::vector<std::string> model_paths;
  std::vector<std::string> names;    // per model, in order; a model without one is called by its file's stem
  std::string host = "127.0.0.1";
  int port = 8000;                   // 0: any free port (the one taken is printed)
  cnnrt::Options engine;             // device, tuning, ...; gpu_index and batch_sizes are set per instance
  std::vector<int> gpus;             // GPU models: one model copy per listed GPU; empty: the current GPU
  int instances = 0;                 // per GPU (or on the CPU): threads with a context each; 0: 2 per GPU (one
                                     // copies while the other computes), 1 on the CPU
  int64_t max_batch = 64;
  std::chrono::microseconds max_queue_delay{500};
  size_t max_queue = 1024;           // requests waiting per model
  size_t max_body_bytes = size_t(64) << 20;
  std::string batch_sizes = "auto";  // "auto", "exact", or a list such as "1,8,64"
  int http_threads = 256;            // connections served at once (each keep-alive connection holds one)
};

// Loads the models, listens, serves until SIGTERM or SIGINT, then stops accepting, finishes the requests in
// flight and returns 0. Throws cnnrt::Error for a model that cannot be served or an impossible configuration
// (Usage), before listening.
int serve(const ServeConfig& config);

// The planned batch sizes for `spec` ("auto": powers of two up to max_batch, and max_batch, on the GPU; none
// on the CPU, where every batch runs at its own size). Throws cnnrt::Error (Usage) naming a bad list.
std::vector<int64_t> resolve_batch_sizes(const std::string& spec, int64_t max_batch, cnnrt::Device device);

}  // namespace cnnrt_serve
