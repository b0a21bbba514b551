#include "serve/batcher.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>

namespace cnnrt_serve {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

template <class... Args>
void require(bool condition, fmt::format_string<Args...> format, Args&&... args) {
  if (!condition) throw cnnrt::Error(cnnrt::ErrorCode::Unsupported, fmt::format(format, std::forward<Args>(args)...));
}

size_t numel(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

}  // namespace

ModelSpec describe_model(const std::string& name, const cnnrt::Model& model, int64_t max_batch) {
  ModelSpec spec;
  spec.name = name;
  spec.max_batch = max_batch;
  require(!model.inputs().empty(), "model '{}' has no inputs: there is nothing to send it", name);
  bool batchable = true;
  for (const cnnrt::TensorDesc& in : model.inputs()) {
    require(!in.shape.empty(), "model '{}': input '{}' has no declared shape; cnnrt serve needs one",
                      name, in.name);
    for (size_t d = 1; d < in.shape.size(); ++d) {
      require(in.shape[d] >= 0,
                        "model '{}': input '{}' has a symbolic dimension {} ('{}'); cnnrt serve needs every "
                        "dimension but the batch fixed", name, in.name, d, in.dim_names[d]);
    }
    batchable = batchable && in.shape[0] < 0;
    spec.inputs.push_back({in.name, in.shape});
  }
  if (!batchable) {
    // Fixed shapes: every request is the declared tensors, run on its own.
    for (TensorSpec& in : spec.inputs) {
      for (int64_t& d : in.shape) d = d < 0 ? 1 : d;
    }
  }
  // Outputs follow the batch when dimension 0 of each is the batch size and nothing else changes with it.
  // (batch 0: the declared shapes, for a model whose batch is fixed)
  const std::vector<std::vector<int64_t>> one = model.output_shapes(batchable ? 1 : 0);
  if (batchable && max_batch > 1) {
    const std::vector<std::vector<int64_t>> two = model.output_shapes(2);
    for (size_t i = 0; i < one.size(); ++i) {
      const bool follows = !one[i].empty() && one[i][0] == 1 && two[i][0] == 2 &&
                           std::equal(one[i].begin() + 1, one[i].end(), two[i].begin() + 1, two[i].end());
      batchable = batchable && follows;
    }
  }
  spec.batchable = batchable;
  if (!batchable) spec.max_batch = 1;
  for (size_t i = 0; i < one.size(); ++i) {
    std::vector<int64_t> shape = one[i];
    if (batchable) shape[0] = -1;
    spec.outputs.push_back({model.outputs()[i].name, shape});
  }
  return spec;
}

DynamicBatcher::DynamicBatcher(ModelSpec spec, std::vector<InstanceSpec> instances, BatchingOptions options,
                               ModelMetrics& metrics)
    : spec_(std::move(spec)), options_(std::move(options)), metrics_(metrics) {
  std::sort(options_.batch_sizes.begin(), options_.batch_sizes.end());
  if (!spec_.batchable) options_.batch_sizes.clear();
  for (InstanceSpec& is : instances) {
    auto counter = std::make_unique<Counter>();
    auto instance = std::make_unique<Instance>(Instance{is.label, cnnrt::Context(is.model), counter.get()});
    metrics_.instance_batches.emplace_back(is.label, std::move(counter));
    // Plan, allocate and capture every batch size now, so that no request waits for it.
    const std::vector<int64_t> warm_up = spec_.batchable ? options_.batch_sizes : std::vector<int64_t>{0};
    for (int64_t rows : warm_up) {
      std::vector<cnnrt::Tensor> zeros;
      for (const TensorSpec& in : spec_.inputs) {
        std::vector<int64_t> shape = in.shape;
        if (rows > 0) shape[0] = rows;  // (0: a fixed-shape model's declared shape)
        zeros.push_back(cnnrt::Tensor{shape, std::vector<float>(numel(shape), 0.0f)});
      }
      try {
        instance->context.run(zeros);
      } catch (const cnnrt::Error& e) {
        throw cnnrt::Error(e.code(), fmt::format("model '{}', instance {}, batch size {}: {}", spec_.name, is.label,
                                                 rows, e.what()));
      }
    }
    instances_.push_back(std::move(instance));
  }
  for (auto& instance : instances_) threads_.emplace_back([this, i = instance.get()] { serve(*i); });
}

DynamicBatcher::~DynamicBatcher() { stop(); }

std::future<InferResult> DynamicBatcher::submit(InferRequest request) {
  auto pending = std::make_unique<Pending>();
  pending->request = std::move(request);
  pending->queued_at = Clock::now();
  std::future<InferResult> result = pending->result.get_future();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) throw ProtocolError(503, fmt::format("model '{}' is shutting down", spec_.name));
    if (queue_.size() >= options_.max_queue) {
      throw ProtocolError(503, fmt::format("model '{}' has {} requests waiting, its limit (--max-queue); try again "
                                           "later", spec_.name, queue_.size()));
    }
    queued_rows_ += pending->request.rows;
    const bool was_empty = queue_.empty();
    queue_.push_back(std::move(pending));
    metrics_.queued.fetch_add(1);
    // Idle instances wait for a first request, busy ones for a full batch; otherwise the oldest request's
    // deadline wakes its instance.
    if (was_empty || queued_rows_ >= spec_.max_batch) wake_.notify_all();
  }
  return result;
}

void DynamicBatcher::drain() {
  std::lock_guard<std::mutex> lock(mutex_);
  draining_ = true;
  wake_.notify_all();
}

void DynamicBatcher::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    draining_ = true;
    wake_.notify_all();
  }
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

std::vector<std::unique_ptr<DynamicBatcher::Pending>> DynamicBatcher::next_batch() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return !queue_.empty() || stopping_; });
    if (queue_.empty()) return {};  // stopping, and nothing left to run
    // Wait for company until the queue holds a full batch or the oldest request has waited long enough.
    while (spec_.batchable && !queue_.empty() && !draining_ && queued_rows_ < spec_.max_batch) {
      const Clock::time_point deadline = queue_.front()->queued_at + options_.max_queue_delay;
      if (Clock::now() >= deadline) break;
      wake_.wait_until(lock, deadline);
    }
    if (queue_.empty()) continue;  // another instance took them

    std::vector<std::unique_ptr<Pending>> batch;
    int64_t rows = 0;
    do {
      rows += queue_.front()->request.rows;
      queued_rows_ -= queue_.front()->request.rows;
      batch.push_back(std::move(queue_.front()));
      queue_.pop_front();
    } while (spec_.batchable && !queue_.empty() && rows + queue_.front()->request.rows <= spec_.max_batch);
    metrics_.queued.fetch_sub(static_cast<int64_t>(batch.size()));
    if (!queue_.empty()) wake_.notify_all();  // more than one batch was waiting: another instance may start
    return batch;
  }
}

int64_t DynamicBatcher::padded_rows(int64_t rows) const {
  for (int64_t size : options_.batch_sizes) {
    if (size >= rows) return size;
  }
  return rows;
}

std::vector<std::vector<cnnrt::Tensor>> DynamicBatcher::run_batch(Instance& instance,
                                                                  const std::vector<std::unique_ptr<Pending>>& batch) {
  std::vector<std::vector<cnnrt::Tensor>> per_request(batch.size());
  if (!spec_.batchable) {
    InferRequest& r = batch.front()->request;
    std::vector<cnnrt::Tensor> inputs;
    for (size_t i = 0; i < r.inputs.size(); ++i) inputs.push_back({r.shapes[i], std::move(r.inputs[i])});
    std::vector<cnnrt::Tensor> outputs;
    try {
      outputs = instance.context.run(inputs);
    } catch (...) {
      for (size_t i = 0; i < r.inputs.size(); ++i) r.inputs[i] = std::move(inputs[i].data);
      throw;
    }
    for (size_t i = 0; i < r.inputs.size(); ++i) r.inputs[i] = std::move(inputs[i].data);
    per_request.front() = std::move(outputs);
    return per_request;
  }

  int64_t rows = 0;
  for (const auto& p : batch) rows += p->request.rows;
  const int64_t padded = padded_rows(rows);
  std::vector<cnnrt::Tensor> inputs;
  const bool whole = batch.size() == 1 && padded == rows;  // one request as it is: lend its buffers, no copy
  for (size_t i = 0; i < spec_.inputs.size(); ++i) {
    std::vector<int64_t> shape = spec_.inputs[i].shape;
    shape[0] = padded;
    if (whole) {
      inputs.push_back({shape, std::move(batch.front()->request.inputs[i])});
      continue;
    }
    const size_t row_floats = numel(shape) / static_cast<size_t>(padded);
    std::vector<float> data(numel(shape), 0.0f);  // padding rows stay zero
    size_t offset = 0;
    for (const auto& p : batch) {
      const std::vector<float>& src = p->request.inputs[i];
      std::memcpy(data.data() + offset, src.data(), src.size() * sizeof(float));
      offset += static_cast<size_t>(p->request.rows) * row_floats;
    }
    inputs.push_back({shape, std::move(data)});
  }
  std::vector<cnnrt::Tensor> outputs;
  try {
    outputs = instance.context.run(inputs);
  } catch (...) {
    if (whole) {
      for (size_t i = 0; i < inputs.size(); ++i) batch.front()->request.inputs[i] = std::move(inputs[i].data);
    }
    throw;
  }
  // Split each output by rows.
  for (const cnnrt::Tensor& out : outputs) {
    const size_t row_floats = out.data.size() / static_cast<size_t>(padded);
    size_t offset = 0;
    for (size_t k = 0; k < batch.size(); ++k) {
      const int64_t r = batch[k]->request.rows;
      cnnrt::Tensor part;
      part.shape = out.shape;
      part.shape[0] = r;
      const float* begin = out.data.data() + offset;
      part.data.assign(begin, begin + static_cast<size_t>(r) * row_floats);
      offset += static_cast<size_t>(r) * row_floats;
      per_request[k].push_back(std::move(part));
    }
  }
  return per_request;
}

void DynamicBatcher::serve(Instance& instance) {
  // Runs `batch` and answers each request; false (answering nobody) when the run failed and a retry one by
  // one is up to the caller.
  const auto run_and_answer = [&](const std::vector<std::unique_ptr<Pending>>& batch, bool answer_failure) {
    int64_t rows = 0;
    for (const auto& p : batch) rows += p->request.rows;
    const Clock::time_point start = Clock::now();
    int status = 0;
    std::string error;
    try {
      std::vector<std::vector<cnnrt::Tensor>> outputs = run_batch(instance, batch);
      metrics_.compute_seconds.observe(seconds_since(start));
      metrics_.batch_size.observe(static_cast<double>(rows));
      instance.batches->add();
      for (size_t k = 0; k < batch.size(); ++k) batch[k]->result.set_value({200, "", std::move(outputs[k])});
      return true;
    } catch (const cnnrt::Error& e) {
      status = http_status_for(e.code());
      error = e.what();
    } catch (const std::exception& e) {
      status = 500;
      error = fmt::format("internal error: {}", e.what());
    }
    if (!answer_failure) {
      say(stderr, fmt::format("cnnrt serve: model '{}' ({}): a batch of {} requests ({} rows) failed, running them one "
                              "by one: {}\n", spec_.name, instance.label, batch.size(), rows, error));
      return false;
    }
    if (status >= 500) say(stderr, fmt::format("cnnrt serve: model '{}' ({}): {}\n", spec_.name, instance.label, error));
    for (const auto& p : batch) p->result.set_value({status, error, {}});
    return false;
  };

  for (;;) {
    std::vector<std::unique_ptr<Pending>> batch = next_batch();
    if (batch.empty()) return;
    const Clock::time_point start = Clock::now();
    for (const auto& p : batch) {
      metrics_.queue_seconds.observe(std::chrono::duration<double>(start - p->queued_at).count());
    }
    if (run_and_answer(batch, batch.size() == 1)) continue;
    if (batch.size() == 1) continue;
    for (auto& p : batch) {
      std::vector<std::unique_ptr<Pending>> alone;
      alone.push_back(std::move(p));
      run_and_answer(alone, true);
    }
  }
}

}  // namespace cnnrt_serve
