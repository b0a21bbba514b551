// What `cnnrt serve` counts, and GET /metrics in the Prometheus text exposition format (version 0.0.4).
//
//   cnnrt_inference_requests_total{model,status="success"|"failure"}   counter
//   cnnrt_request_duration_seconds{model}    histogram: an inference request from parsed to answered
//   cnnrt_queue_duration_seconds{model}      histogram: a request's wait before its batch started
//   cnnrt_compute_duration_seconds{model}    histogram: one batch run by an instance (copies included)
//   cnnrt_batch_size{model}                  histogram: rows in each batch run (before padding)
//   cnnrt_instance_batches_total{model,instance}  counter: batches each instance ran (which GPU did the work)
//   cnnrt_queue_requests{model}              gauge: requests waiting now
//   cnnrt_http_responses_total{code}         counter: every HTTP response by status code
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace cnnrt_serve {

class Counter {
 public:
  void add(uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);  // ascending; +Inf is implied
  void observe(double value);

  struct Snapshot {
    std::vector<double> upper_bounds;
    std::vector<uint64_t> cumulative;  // per bound, then +Inf
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot snapshot() const;

 private:
  mutable std::mutex mutex_;
  std::vector<double> upper_bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative), the last one +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

// Seconds from 50 us to 10 s.
std::vector<double> latency_buckets();
// 1, 2, 4, ... up to and including max_batch.
std::vector<double> batch_size_buckets(int64_t max_batch);

struct ModelMetrics {
  explicit ModelMetrics(int64_t max_batch)
      : request_seconds(latency_buckets()),
        queue_seconds(latency_buckets()),
        compute_seconds(latency_buckets()),
        batch_size(batch_size_buckets(max_batch)) {}

  Counter success;
  Counter failure;
  Histogram request_seconds;
  Histogram queue_seconds;
  Histogram compute_seconds;
  Histogram batch_size;
  std::atomic<int64_t> queued{0};
  // One per instance, labelled e.g. "gpu1/0" (GPU 1, its first instance) or "cpu/0"; fixed after start.
  std::vector<std::pair<std::string, std::unique_ptr<Counter>>> instance_batches;
};

class HttpCounters {
 public:
  void count(int status);
  std::map<int, uint64_t> snapshot() const;

 private:
  mutable std::mutex mutex_;
  std::map<int, uint64_t> by_status_;
};

// The /metrics text for these models (in this order) and HTTP counters.
std::string render_metrics(const std::vector<std::pair<std::string, const ModelMetrics*>>& models,
                           const HttpCounters& http);

}  // namespace cnnrt_serve
