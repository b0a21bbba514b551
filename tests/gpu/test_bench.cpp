// The bench library on the GPU: our fused step and cuDNN on the same data, both judged against the FP64
// answer. The pooled LeNet layers at batch 1024 once made the bench hand cuDNN's algorithm search a
// pooled-size buffer for the unpooled output (an illegal address that took the context down).
#include <doctest/doctest.h>

#include <cstdint>

#include "cnnrt/bench.hpp"
#include "gpu_test_util.hpp"

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
  }
  CHECK(ran > 0);
  MESSAGE(ran << " small-suite layers compared" << (max_batch < INT64_MAX ? " (CNNRT_TEST_MAX_BATCH set)" : ""));
  GPU_CHECK(cudaDeviceSynchronize());
}
