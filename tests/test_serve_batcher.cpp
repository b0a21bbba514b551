// cnnrt serve's dynamic batcher (apps/cnnrt/serve/batcher.cpp) on the CPU backend: concurrent requests merged
// into one run and split back, padding to planned batch sizes, the queue limit, a failing request failing
// alone while its batch neighbours succeed, and a stop that answers everything queued.
#include <doctest/doctest.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "cnnrt/cnnrt.hpp"
#include "model_builder.hpp"
#include "serve/batcher.hpp"

using namespace cnnrt_serve;
using cnnrt::testing::ModelBuilder;

namespace {

cnnrt::Model tiny_model(int64_t max_activation_bytes = cnnrt::Limits{}.max_activation_bytes) {
  const std::string bytes = cnnrt::testing::tiny_conv_model().bytes();  // x [N,1,5,5] -> y [N,2,5,5]
  cnnrt::Options o;
  o.device = cnnrt::Device::Cpu;
  o.limits.max_activation_bytes = max_activation_bytes;
  return cnnrt::Model::load_from_memory(bytes.data(), bytes.size(), o, "tiny.onnx");
}

// A request of `rows` rows whose values depend on `seed`.
InferRequest request(int64_t rows, int seed) {
  InferRequest r;
  r.rows = rows;
  r.shapes = {{rows, 1, 5, 5}};
  std::vector<float> x(static_cast<size_t>(rows) * 25);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((static_cast<int>(i) * 7 + seed * 13) % 17) / 8.0f - 1;
  r.inputs = {x};
  r.outputs = {{0, false}};
  return r;
}

// The answer of a model run on the request alone.
std::vector<float> alone(const cnnrt::Model& model, const InferRequest& r) {
  cnnrt::Context context(model);
  return context.run({cnnrt::Tensor{r.shapes[0], r.inputs[0]}})[0].data;
}

double batches_run(const ModelMetrics& m) { return static_cast<double>(m.batch_size.snapshot().count); }

}  // namespace

TEST_CASE("serve batcher: a model's spec, and what it cannot serve") {
  const cnnrt::Model model = tiny_model();
  const ModelSpec spec = describe_model("tiny", model, 8);
  CHECK(spec.batchable);
  CHECK(spec.max_batch == 8);
  CHECK(spec.inputs[0].shape == std::vector<int64_t>{-1, 1, 5, 5});
  CHECK(spec.outputs[0].shape == std::vector<int64_t>{-1, 2, 5, 5});

  ModelBuilder symbolic;  // a symbolic image size
  symbolic.input("x", {-1, 1, 5, 5}).output("y");
  symbolic.proto().mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()
      ->mutable_dim(2)->set_dim_param("H");
  symbolic.node("Relu", {"x"}, {"y"});
  const std::string bytes = symbolic.bytes();
  cnnrt::Options o;
  o.device = cnnrt::Device::Cpu;
  const cnnrt::Model m = cnnrt::Model::load_from_memory(bytes.data(), bytes.size(), o, "symbolic.onnx");
  try {
    describe_model("symbolic", m, 8);
    FAIL("a symbolic image size was accepted");
  } catch (const cnnrt::Error& e) {
    CHECK(e.code() == cnnrt::ErrorCode::Unsupported);
    CHECK(std::string(e.what()).find("input 'x' has a symbolic dimension 2 ('H')") != std::string::npos);
  }
}

TEST_CASE("serve batcher: concurrent requests are merged into one run and split back by rows") {
  const cnnrt::Model model = tiny_model();
  ModelMetrics metrics(8);
  BatchingOptions options;
  options.max_batch = 8;
  options.max_queue_delay = std::chrono::seconds(5);  // only a full batch starts early
  DynamicBatcher batcher(describe_model("tiny", model, 8), {{model, "cpu/0"}}, options, metrics);

  std::vector<InferRequest> requests;
  for (int i = 0; i < 4; ++i) requests.push_back(request(i == 3 ? 5 : 1, i));  // 1 + 1 + 1 + 5 = 8 rows
  std::vector<std::future<InferResult>> results;
  const auto start = std::chrono::steady_clock::now();
  for (const InferRequest& r : requests) results.push_back(batcher.submit(r));
  for (size_t i = 0; i < results.size(); ++i) {
    CAPTURE(i);
    InferResult result = results[i].get();
    REQUIRE(result.status == 200);
    CHECK(result.outputs[0].shape == std::vector<int64_t>{requests[i].rows, 2, 5, 5});
    CHECK(result.outputs[0].data == alone(model, requests[i]));
  }
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(4));  // a full batch did not wait
  const Histogram::Snapshot sizes = metrics.batch_size.snapshot();
  CHECK(sizes.count == 1);
  CHECK(sizes.sum == 8);
  CHECK(metrics.queue_seconds.snapshot().count == 4);
}

TEST_CASE("serve batcher: a lone request waits at most the queue delay; padding to planned sizes") {
  const cnnrt::Model model = tiny_model();
  ModelMetrics metrics(8);
  BatchingOptions options;
  options.max_batch = 8;
  options.max_queue_delay = std::chrono::milliseconds(20);
  options.batch_sizes = {4, 8};  // 3 rows run as 4, padded with a zero row
  DynamicBatcher batcher(describe_model("tiny", model, 8), {{model, "cpu/0"}}, options, metrics);
  const InferRequest r = request(3, 9);
  const auto start = std::chrono::steady_clock::now();
  InferResult result = batcher.submit(r).get();
  const auto waited = std::chrono::steady_clock::now() - start;
  REQUIRE(result.status == 200);
  CHECK(result.outputs[0].shape == std::vector<int64_t>{3, 2, 5, 5});
  CHECK(result.outputs[0].data == alone(model, r));
  CHECK(waited >= std::chrono::milliseconds(20));
  CHECK(waited < std::chrono::seconds(2));
}

TEST_CASE("serve batcher: beyond --max-queue a request is refused with 503; a stop answers what is queued") {
  const cnnrt::Model model = tiny_model();
  ModelMetrics metrics(8);
  BatchingOptions options;
  options.max_batch = 8;
  options.max_queue = 2;
  options.max_queue_delay = std::chrono::seconds(30);  // the queue holds them until the stop
  DynamicBatcher batcher(describe_model("tiny", model, 8), {{model, "cpu/0"}}, options, metrics);
  std::future<InferResult> first = batcher.submit(request(1, 1));
  std::future<InferResult> second = batcher.submit(request(1, 2));
  try {
    batcher.submit(request(1, 3));
    FAIL("a third request was queued");
  } catch (const ProtocolError& e) {
    CHECK(e.status() == 503);
    CHECK(std::string(e.what()).find("model 'tiny' has 2 requests waiting, its limit (--max-queue)") !=
          std::string::npos);
  }
  CHECK(metrics.queued.load() == 2);
  const auto start = std::chrono::steady_clock::now();
  batcher.stop();  // no waiting for the 30 s delay
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  CHECK(first.get().status == 200);
  CHECK(second.get().status == 200);
  CHECK(metrics.queued.load() == 0);
  CHECK_THROWS_AS(batcher.submit(request(1, 4)), ProtocolError);
}

TEST_CASE("serve batcher: when a merged batch fails, only the request that fails alone gets the error") {
  // The smallest activation limit at which batch 2 runs: batch 3 then exceeds it, inside the engine.
  int64_t limit = 0;
  for (int64_t bytes = 64; bytes < 100000 && limit == 0; bytes += 8) {
    try {
      const cnnrt::Model m = tiny_model(bytes);  // (a limit below batch 1 fails here)
      cnnrt::Context context(m);
      context.run({cnnrt::Tensor{{2, 1, 5, 5}, std::vector<float>(50, 0.0f)}});
      limit = bytes;
    } catch (const cnnrt::Error&) {
    }
  }
  REQUIRE(limit > 0);
  const cnnrt::Model model = tiny_model(limit);
  {
    cnnrt::Context context(model);
    CHECK_THROWS_AS(context.run({cnnrt::Tensor{{3, 1, 5, 5}, std::vector<float>(75, 0.0f)}}), cnnrt::Error);
  }
  ModelMetrics metrics(8);
  BatchingOptions options;
  options.max_batch = 8;
  options.max_queue_delay = std::chrono::seconds(30);
  DynamicBatcher batcher(describe_model("tiny", model, 8), {{model, "cpu/0"}}, options, metrics);
  // 1 + 1 + 3 + 1 + 2 = 8 rows: a full batch, which fails (over the limit); alone, only the 3-row one fails.
  const std::vector<InferRequest> requests = {request(1, 1), request(1, 2), request(3, 3), request(1, 4),
                                              request(2, 5)};
  std::vector<std::future<InferResult>> results;
  for (const InferRequest& r : requests) results.push_back(batcher.submit(r));
  for (size_t i = 0; i < results.size(); ++i) {
    CAPTURE(i);
    InferResult result = results[i].get();
    if (i == 2) {
      CHECK(result.status == 413);
      CHECK(result.error.find("Limits::max_activation_bytes") != std::string::npos);
    } else {
      REQUIRE(result.status == 200);
      CHECK(result.outputs[0].data == alone(model, requests[i]));
    }
  }
  CHECK(batches_run(metrics) == 4);  // the merged run failed; four requests ran alone
}

TEST_CASE("serve batcher: a model with a fixed batch runs its requests one at a time") {
  ModelBuilder m;
  m.input("x", {2, 3}).output("y");
  m.node("Relu", {"x"}, {"y"});
  const std::string bytes = m.bytes();
  cnnrt::Options o;
  o.device = cnnrt::Device::Cpu;
  const cnnrt::Model model = cnnrt::Model::load_from_memory(bytes.data(), bytes.size(), o, "fixed.onnx");
  const ModelSpec spec = describe_model("fixed", model, 8);
  CHECK(!spec.batchable);
  CHECK(spec.max_batch == 1);
  CHECK(spec.inputs[0].shape == std::vector<int64_t>{2, 3});
  ModelMetrics metrics(1);
  BatchingOptions options;
  options.max_batch = 1;
  options.batch_sizes = {1, 2};  // ignored: nothing is merged or padded
  DynamicBatcher batcher(spec, {{model, "cpu/0"}}, options, metrics);
  std::vector<std::future<InferResult>> results;
  for (int i = 0; i < 3; ++i) {
    InferRequest r;
    r.shapes = {{2, 3}};
    r.inputs = {{-1, 2, -3, 4, -5, static_cast<float>(i)}};
    r.outputs = {{0, false}};
    results.push_back(batcher.submit(r));
  }
  for (int i = 0; i < 3; ++i) {
    InferResult result = results[static_cast<size_t>(i)].get();
    REQUIRE(result.status == 200);
    CHECK(result.outputs[0].data == std::vector<float>{0, 2, 0, 4, 0, static_cast<float>(i)});
  }
  CHECK(batches_run(metrics) == 3);
}
