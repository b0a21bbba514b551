// The embedding API's promises (docs/api.md) that need no GPU: one Model shared read-only by many
// threads, each running through its own Context, gives exactly the results of a single thread; the
// host's logger settings are the host's.
#include <doctest/doctest.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "cnnrt/cnnrt.hpp"
#include "model_builder.hpp"

using namespace cnnrt;

namespace {

constexpr int kThreads = 8;
constexpr int kRunsPerThread = 1000;
constexpr int kInputSets = 8;  // thread t, run i uses set (t + i) % kInputSets: contexts see varied inputs

Tensor input_set(int set) {
  Tensor t;
  t.shape = {2, 1, 5, 5};  // batch 2 of tiny_conv_model's [N,1,5,5]
  for (int i = 0; i < 50; ++i) t.data.push_back(0.01f * static_cast<float>((i * 37 + set * 11) % 101) - 0.5f);
  return t;
}

bool bit_identical(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  if (got.size() != want.size()) return false;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i].shape != want[i].shape || got[i].data.size() != want[i].data.size()) return false;
    if (std::memcmp(got[i].data.data(), want[i].data.data(), got[i].data.size() * sizeof(float)) != 0) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("8 threads, one shared Model, a Context each: 1000 runs each, bit-identical to one thread") {
  const std::string bytes = testing::tiny_conv_model().bytes();
  Options options;
  options.device = Device::Cpu;
  options.batch_sizes = {2};
  const Model model = Model::load_from_memory(bytes.data(), bytes.size(), options, "tiny_conv.onnx");

  std::vector<std::vector<Tensor>> reference;
  {
    Context context(model);
    for (int s = 0; s < kInputSets; ++s) reference.push_back(context.run({input_set(s)}));
  }
  REQUIRE(reference[0].at(0).shape == std::vector<int64_t>{2, 2, 5, 5});
  CHECK(reference[0][0].data != reference[1][0].data);  // the input sets really differ

  std::atomic<bool> start{false};  // released together, so that the threads' runs overlap
  std::atomic<int> runs{0};
  std::atomic<int> mismatches{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        std::vector<Tensor> inputs;
        for (int s = 0; s < kInputSets; ++s) inputs.push_back(input_set(s));
        while (!start) std::this_thread::yield();
        Context context(model);
        for (int i = 0; i < kRunsPerThread; ++i) {
          const int s = (t + i) % kInputSets;
          if (!bit_identical(context.run({inputs[s]}), reference[s])) ++mismatches;
          ++runs;
        }
      } catch (const std::exception&) {
        ++errors;
      }
    });
  }
  start = true;
  for (std::thread& th : threads) th.join();
  CHECK(errors == 0);
  CHECK(runs == kThreads * kRunsPerThread);
  CHECK(mismatches == 0);
}

TEST_CASE("Options::log_level sets the \"cnnrt\" logger's level; left unset, the host's level stays") {
  const std::string bytes = testing::tiny_conv_model().bytes();
  Options options;
  options.device = Device::Cpu;
  options.log_level = LogLevel::Error;
  Model::load_from_memory(bytes.data(), bytes.size(), options, "tiny_conv.onnx");
  const std::shared_ptr<spdlog::logger> logger = spdlog::get("cnnrt");
  REQUIRE(logger != nullptr);
  CHECK(logger->level() == spdlog::level::err);

  logger->set_level(spdlog::level::off);  // the host silences cnnrt
  options.log_level.reset();
  Model::load_from_memory(bytes.data(), bytes.size(), options, "tiny_conv.onnx");
  CHECK(logger->level() == spdlog::level::off);
  set_log_level(LogLevel::Warn);  // the default, for the other tests
}
