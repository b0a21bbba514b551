// The bench library on the GPU: our fused step and cuDNN on the same data, both judged against the FP64
// answer. The pooled LeNet layers at batch 1024 once made the bench hand cuDNN's algorithm search a
// pooled-size buffer for the unpooled output (an illegal address that took the context down).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>

#include "cnnrt/bench.hpp"
#include "gpu/device_info.hpp"
#include "kernels/conv_registry.hpp"
#include "plan/gpu/conv_step.hpp"
#include "gpu_test_util.hpp"
#include "model_builder.hpp"

using namespace cnnrt;

namespace {

bench::BenchOptions quick_options() {
  bench::BenchOptions o;
  o.engine.log_level = LogLevel::Off;
  o.warmup_ms = 5;
  o.min_samples = 3;
  o.max_samples = 5;
  o.sample_target_us = 300;
  return o;
}

}  // namespace

// CNNRT_TEST_MAX_BATCH=N leaves out the layers of larger batches (compute-sanitizer's racecheck does not get
// through batch 1024 within one run on the GPU machine); unset, every layer runs.
TEST_CASE("bench: every small-suite layer (conv + ReLU + pool, batch 1 to 1024) compares with cuDNN") {
  const int64_t max_batch = testing::env_int("CNNRT_TEST_MAX_BATCH", INT64_MAX);
  int ran = 0;
  for (const bench::LayerSpec& layer : bench::suite("small")) {
    if (layer.N > max_batch) continue;
    ++ran;
    CAPTURE(layer.name);
    const bench::Comparison c = bench::bench_conv_layer(layer, quick_options());
    CHECK(c.ours_us > 0);
    CHECK_MESSAGE(c.cudnn_us > 0, c.cudnn_algo);
    CHECK(c.rel_error < 1e-5);
    CHECK(c.cudnn_rel_error < 1e-3);
    CHECK_FALSE(c.mismatch);
    // A layer's time is its one-step model back to back already: the speedup divides by it.
    CHECK(c.alone_us < 0);
    CHECK(c.speedup() == doctest::Approx(c.cudnn_us / c.ours_us));
  }
  CHECK(ran > 0);
  MESSAGE(ran << " small-suite layers compared" << (max_batch < INT64_MAX ? " (CNNRT_TEST_MAX_BATCH set)" : ""));
  GPU_CHECK(cudaDeviceSynchronize());
}

TEST_CASE("bench: a fully convolutional model with symbolic H and W benches at explicit input shapes") {
  const std::string path = (std::filesystem::temp_directory_path() / "cnnrt_bench_denoiser.onnx").string();
  {
    const std::string bytes = testing::fully_convolutional_denoiser().bytes();
    std::ofstream(path, std::ios::binary) << bytes;
  }
  const bench::ModelReport r = bench::bench_model(path, {{2, 1, 96, 128}}, quick_options(), 20, 0, false);
  CHECK(r.input_shapes == std::vector<Shape>{{2, 1, 96, 128}});
  CHECK(r.batch == 2);
  CHECK(r.latency.samples == 20);
  CHECK(r.latency.median_us > 0);
  CHECK(r.throughput > 0);
  CHECK(r.steps.size() >= 2);  // conv1 + relu1, conv2 (+ the residual Sub)
  double conv_alone = 0;
  for (const bench::StepReport& step : r.steps) {
    CAPTURE(step.timing.label);
    CHECK(step.timing.ours_us > 0);
    if (!step.is_conv) continue;
    CHECK_FALSE(step.timing.mismatch);
    // Beside cuDNN, a convolution step is timed alone and back to back, as cuDNN is; without cuDNN, not at all.
    if (step.timing.cudnn_us > 0) {
      CHECK(step.timing.alone_us > 0);
      CHECK(step.timing.speedup() == doctest::Approx(step.timing.cudnn_us / step.timing.alone_us));
      conv_alone += step.timing.alone_us;
    } else {
      CHECK(step.timing.alone_us < 0);
    }
  }
  CHECK(r.conv_ours_us == doctest::Approx(conv_alone));
  // Without shapes the symbolic H and W cannot be planned; the error says how to give them.
  try {
    bench::bench_model(path, 1, quick_options(), 20, 0, false);
    FAIL("a model with symbolic H and W was benched without shapes");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::Usage);
    CHECK(std::string(e.what()).find("--shape image=") != std::string::npos);
  }
  std::filesystem::remove(path);
}

// A kernel with its own scratch (tc's K split, _ks*) in the bench's per-step comparison: the bench gives the
// step the workspace the plan gave it, fused with pooling or not (the plan once said only whether there was one,
// and the bench sized it for the unpooled output: garbage, then an illegal address in a larger layer).
TEST_CASE("bench: steps whose kernels split K through a workspace compare with cuDNN") {
  if (!kernels::device_lacks(plan::device_caps(gpu::current_device()), kernels::find_conv_family("tc")->needs()).empty()) {
    testing::skip_test_case("tc (the family whose K split this checks) needs compute capability 8.0");
    return;
  }
  const std::string path = (std::filesystem::temp_directory_path() / "cnnrt_bench_ksplit.onnx").string();
  {
    testing::ModelBuilder m;
    m.input("x", {1, 256, 7, 7}).output("y").output("g");
    std::vector<float> w1(128 * 256 * 9), w2(32 * 128);
    for (size_t i = 0; i < w1.size(); ++i) w1[i] = float((i * 7919) % 97) / 97.0f - 0.5f;
    for (size_t i = 0; i < w2.size(); ++i) w2[i] = float((i * 104729) % 89) / 89.0f - 0.5f;
    m.initializer("w1", {128, 256, 3, 3}, w1).initializer("w2", {32, 128, 1, 1}, w2);
    auto& c1 = m.node("Conv", {"x", "w1"}, {"c1"}, "conv1");
    testing::ModelBuilder::attr_ints(c1, "pads", {1, 1, 1, 1});
    m.node("Relu", {"c1"}, {"y"}, "relu1");
    m.node("Conv", {"y", "w2"}, {"c2"}, "conv2");
    m.node("GlobalAveragePool", {"c2"}, {"g"}, "gap");
    std::ofstream(path, std::ios::binary) << m.bytes();
  }
  bench::BenchOptions o = quick_options();
  o.engine.force_kernel = "tc_f32_px64_";  // the first tc_f32_px64 candidate: the K split where it is offered
  o.engine.tuning_cache = "none";
  const bench::ModelReport r = bench::bench_model(path, 1, o, 20, 0, false);
  int split = 0;
  for (const bench::StepReport& step : r.steps) {
    CAPTURE(step.timing.label);
    CAPTURE(step.timing.kernel);
    if (!step.is_conv) continue;
    split += step.timing.kernel.find("_ks") != std::string::npos;
    CHECK_FALSE(step.timing.mismatch);
    CHECK(step.timing.rel_error < 1e-5);
  }
  CHECK(split == 2);
  std::filesystem::remove(path);
}

TEST_CASE("bench: --include-transfers times Context::run on host data, and the outputs it returns are right") {
  const std::string path = testing::repo_path("models/fashion_lenet.onnx");
  const bench::ModelReport device = bench::bench_model(path, 1, quick_options(), 50, 0, false);
  const bench::ModelReport host = bench::bench_model(path, 1, quick_options(), 50, 0, true);
  // The GPU time again after the host path: the first run may start while an idle GPU's clocks are still rising.
  const bench::ModelReport device_again = bench::bench_model(path, 1, quick_options(), 50, 0, false);
  CHECK(host.included_transfers);
  CHECK(host.latency.samples == 50);
  // Host to host adds the copies and the wait to the GPU time; it cannot be faster.
  CHECK(host.latency.median_us > std::min(device.latency.median_us, device_again.latency.median_us));
  // The host path (one graph: copies in, steps, copies out) gives the CPU backend's answer, run after run.
  Options gpu_options;
  gpu_options.device = Device::Gpu;
  gpu_options.tuning_cache = "none";
  Options cpu_options;
  cpu_options.device = Device::Cpu;
  const Model gpu_model = Model::load(path, gpu_options);
  const Model cpu_model = Model::load(path, cpu_options);
  Context gpu(gpu_model), cpu(cpu_model);
  for (int round = 0; round < 3; ++round) {
    Tensor x{{1, 1, 28, 28}, testing::random_floats(784, 90 + round)};
    const std::vector<Tensor> got = gpu.run({x});
    const std::vector<Tensor> want = cpu.run({x});
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < want[0].data.size(); ++i) CHECK(got[0].data[i] == doctest::Approx(want[0].data[i]).epsilon(1e-4));
  }
}
