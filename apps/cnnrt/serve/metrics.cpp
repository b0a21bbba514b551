#include "serve/metrics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

namespace cnnrt_serve {

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)), counts_(upper_bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  const size_t bucket =
      static_cast<size_t>(std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value) - upper_bounds_.begin());
  std::lock_guard<std::mutex> lock(mutex_);
  ++counts_[bucket];
  sum_ += value;
  ++count_;
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.upper_bounds = upper_bounds_;
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t running = 0;
  for (uint64_t c : counts_) {
    running += c;
    s.cumulative.push_back(running);
  }
  s.sum = sum_;
  s.count = count_;
  return s;
}

std::vector<double> latency_buckets() {
  return {50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1, 2.5, 5, 10};
}

std::vector<double> batch_size_buckets(int64_t max_batch) {
  std::vector<double> bounds;
  for (int64_t b = 1; b < max_batch; b *= 2) bounds.push_back(static_cast<double>(b));
  bounds.push_back(static_cast<double>(std::max<int64_t>(max_batch, 1)));
  return bounds;
}

void HttpCounters::count(int status) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++by_status_[status];
}

std::map<int, uint64_t> HttpCounters::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return by_status_;
}

namespace {

// A label value with backslash, double quote and newline escaped, as the format requires.
std::string label(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void header(std::string& out, const char* name, const char* type, const char* help) {
  fmt::format_to(std::back_inserter(out), "# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void histogram(std::string& out, const char* name, const std::string& model, const Histogram& h) {
  const Histogram::Snapshot s = h.snapshot();
  const std::string m = label(model);
  for (size_t i = 0; i < s.upper_bounds.size(); ++i) {
    fmt::format_to(std::back_inserter(out), "{}_bucket{{model=\"{}\",le=\"{}\"}} {}\n", name, m, s.upper_bounds[i],
                   s.cumulative[i]);
  }
  fmt::format_to(std::back_inserter(out), "{}_bucket{{model=\"{}\",le=\"+Inf\"}} {}\n", name, m, s.cumulative.back());
  fmt::format_to(std::back_inserter(out), "{}_sum{{model=\"{}\"}} {}\n", name, m, s.sum);
  fmt::format_to(std::back_inserter(out), "{}_count{{model=\"{}\"}} {}\n", name, m, s.count);
}

}  // namespace

std::string render_metrics(const std::vector<std::pair<std::string, const ModelMetrics*>>& models,
                           const HttpCounters& http) {
  std::string out;
  const auto it = std::back_inserter(out);
  header(out, "cnnrt_inference_requests_total", "counter", "Inference requests answered, by outcome");
  for (const auto& [name, m] : models) {
    fmt::format_to(it, "cnnrt_inference_requests_total{{model=\"{}\",status=\"success\"}} {}\n", label(name),
                   m->success.value());
    fmt::format_to(it, "cnnrt_inference_requests_total{{model=\"{}\",status=\"failure\"}} {}\n", label(name),
                   m->failure.value());
  }
  const struct {
    const char* name;
    const char* help;
    Histogram ModelMetrics::*member;
  } histograms[] = {
      {"cnnrt_request_duration_seconds", "Inference request time in the server, from parsed to answered",
       &ModelMetrics::request_seconds},
      {"cnnrt_queue_duration_seconds", "Time a request waited in its model's queue before its batch started",
       &ModelMetrics::queue_seconds},
      {"cnnrt_compute_duration_seconds", "Time of one batch run by a model instance, host copies included",
       &ModelMetrics::compute_seconds},
      {"cnnrt_batch_size", "Rows in each batch a model instance ran (requests merged by the dynamic batcher)",
       &ModelMetrics::batch_size},
  };
  for (const auto& h : histograms) {
    header(out, h.name, "histogram", h.help);
    for (const auto& [name, m] : models) histogram(out, h.name, name, m->*h.member);
  }
  header(out, "cnnrt_instance_batches_total", "counter", "Batches run by each model instance");
  for (const auto& [name, m] : models) {
    for (const auto& [instance, counter] : m->instance_batches) {
      fmt::format_to(it, "cnnrt_instance_batches_total{{model=\"{}\",instance=\"{}\"}} {}\n", label(name),
                     label(instance), counter->value());
    }
  }
  header(out, "cnnrt_queue_requests", "gauge", "Requests waiting in the model's queue");
  for (const auto& [name, m] : models) {
    fmt::format_to(it, "cnnrt_queue_requests{{model=\"{}\"}} {}\n", label(name), m->queued.load());
  }
  header(out, "cnnrt_http_responses_total", "counter", "HTTP responses by status code");
  for (const auto& [status, count] : http.snapshot()) {
    fmt::format_to(it, "cnnrt_http_responses_total{{code=\"{}\"}} {}\n", status, count);
  }
  return out;
}

}  // namespace cnnrt_serve
