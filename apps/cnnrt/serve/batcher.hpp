// The dynamic batcher of `cnnrt serve`: one queue per model, served by the model's instances (a thread and a
// cnnrt::Context each, on the CPU or on one GPU). A free instance takes the oldest request and every later
// one it can merge with, up to max_batch rows, waiting for more until the oldest has waited max_queue_delay;
// it runs them as one batch (padded up to the smallest planned batch size that holds them) and splits the
// outputs back by rows. When a merged batch fails, its requests are run again one by one, so that only a
// request that fails on its own gets an error.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cnnrt/cnnrt.hpp"
#include "serve/metrics.hpp"
#include "serve/protocol.hpp"

namespace cnnrt_serve {

struct BatchingOptions {
  int64_t max_batch = 64;                               // rows merged into one run, at most
  std::chrono::microseconds max_queue_delay{500};       // the oldest request's longest wait for company
  size_t max_queue = 1024;                              // requests waiting; beyond: 503
  std::vector<int64_t> batch_sizes;                     // planned sizes a batch is padded up to (ascending);
                                                        // empty: every batch runs at its own size
};

// One model instance: the model (loaded on the instance's device) and a label such as "gpu1/0".
struct InstanceSpec {
  cnnrt::Model model;
  std::string label;
};

// The protocol's view of `model` served as `name`: its inputs and outputs with -1 for the batch dimension, and
// whether requests can be merged along it (every input's dimension 0 symbolic, every output's following it).
// Throws cnnrt::Error (Unsupported) for a model cnnrt serve cannot take: no inputs, or a symbolic dimension
// other than the batch.
ModelSpec describe_model(const std::string& name, const cnnrt::Model& model, int64_t max_batch);

struct InferResult {
  int status = 200;                    // 200, or the engine error's HTTP status
  std::string error;                   // the engine's message when status != 200
  std::vector<cnnrt::Tensor> outputs;  // every model output, this request's rows only
};

class DynamicBatcher {
 public:
  // Creates a context per instance and runs each planned batch size once on it (arena, CUDA graph), so that
  // no request pays for that; throws the engine's error when one cannot run. Then starts the instance threads.
  DynamicBatcher(ModelSpec spec, std::vector<InstanceSpec> instances, BatchingOptions options,
                 ModelMetrics& metrics);
  ~DynamicBatcher();  // stop()
  DynamicBatcher(const DynamicBatcher&) = delete;
  DynamicBatcher& operator=(const DynamicBatcher&) = delete;

  // Queues the request and returns the future of its result. Throws ProtocolError(503) when the queue is full
  // or the batcher is stopping.
  std::future<InferResult> submit(InferRequest request);

  // From now on a batch starts as soon as an instance is free (no waiting for company): for shutdown, so that
  // the requests in flight finish promptly. New requests are still taken.
  void drain();
  // Refuses new requests, finishes the queued ones, joins the instance threads.
  void stop();

  const ModelSpec& spec() const { return spec_; }

 private:
  struct Pending {
    InferRequest request;
    std::chrono::steady_clock::time_point queued_at;
    std::promise<InferResult> result;
  };
  struct Instance {
    std::string label;
    cnnrt::Context context;
    Counter* batches;
  };

  void serve(Instance& instance);
  // Takes the next batch from the queue (blocking); empty when the batcher stops and the queue is empty.
  std::vector<std::unique_ptr<Pending>> next_batch();
  // Runs these requests as one batch; outputs per request. Throws the engine's error.
  std::vector<std::vector<cnnrt::Tensor>> run_batch(Instance& instance,
                                                    const std::vector<std::unique_ptr<Pending>>& batch);
  int64_t padded_rows(int64_t rows) const;

  ModelSpec spec_;
  BatchingOptions options_;
  ModelMetrics& metrics_;
  std::vector<std::unique_ptr<Instance>> instances_;
  std::vector<std::thread> threads_;

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::unique_ptr<Pending>> queue_;
  int64_t queued_rows_ = 0;
  bool draining_ = false;
  bool stopping_ = false;
};

}  // namespace cnnrt_serve
