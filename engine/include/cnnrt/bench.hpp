// cnnrt's benchmark library: our kernels beside cuDNN on identical data, and whole-model latency and
// throughput. Used by `cnnrt bench`; links cuDNN (the engine itself does not). Every timing is a median
// of CUDA-event measurements after warm-up, taken until the median is stable; inputs are random, never
// zeros; our output and cuDNN's are compared before either is timed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cnnrt/cnnrt.hpp"

namespace cnnrt::bench {

// The machine, for report headers. Throws DeviceUnavailable without a usable GPU.
struct Environment {
  std::string gpu;
  int sm_count = 0;
  int sm_clock_mhz = 0;
  int memory_clock_mhz = 0;
  std::string driver, cuda_runtime, cudnn, engine;
};
Environment environment();

// Ceilings for the physical floor, measured on the H100 80GB HBM3 of the published results with PyTorch and
// cuDNN 9.19: a device-to-device copy moves 3.0 TB/s (bytes read + written); SGEMM reaches 51.6 TFLOP/s in
// plain FP32 (no TF32).
constexpr double kMemoryBytesPerSecond = 3.0e12;
constexpr double kFp32FlopsPerSecond = 51.6e12;
double floor_us(double flops, double bytes);

// A benchmark layer as a suite or the command line gives it: the layer is built as a one-node ONNX model
// (conv, optionally with bias, activation and pooling after it, NCHW, float32) and planned like any model.
struct LayerSpec {
  std::string name;
  int64_t N = 1, C = 1, H = 1, W = 1, F = 1, K = 3;
  int64_t stride = 1;
  int64_t pad = -1;  // -1: "same" (K / 2)
  bool bias = false;
  std::string activation;  // "", Relu
  std::string pool;        // "", MaxPool
  int64_t pool_k = 2, pool_s = 2;
};
// The layer suites (docs/performance.md). "special": 36 single-channel layers at batch 1, images 512^2 to
// 4096^2 x filters 1x1/3x3/5x5 x 1/8/32 filters. "general": 20 multi-channel layers (56x56 c64 -> 64,
// 28x28 c128 -> 128, 14x14 c256 -> 256, 112x112 c32 -> 64, 32x32 c64 -> 128; 3x3 and 5x5) at batch 1 and 32.
// "small": LeNet's two conv + bias + ReLU + max-pool layers at batch 1, 64 and 1024.
std::vector<LayerSpec> suite(const std::string& name);
// "N,C,H,W,F,K[,stride,pad]" (Usage error naming the problem otherwise).
LayerSpec parse_conv(const std::string& spec);

struct Timing {
  int samples = 0;
  double min_us = 0, median_us = 0, mean_us = 0, p90_us = 0, p99_us = 0, max_us = 0;
  bool unstable = false;  // p90 more than 10% above the median
};

// One convolution, ours beside cuDNN.
struct Comparison {
  std::string label;                // layer name or step label
  std::vector<std::string> nodes;   // ONNX nodes (model steps)
  std::vector<int64_t> output_shape;
  std::string kernel;               // our kernel
  double ours_us = 0;
  // A model's step: the step alone, replayed back to back as cuDNN's time is (ours_us is its share of a profiled
  // run, one launch between two events); < 0 where not timed (layers: ours_us is already timed that way).
  double alone_us = -1;
  std::string cudnn_algo;           // cuDNN's algorithm (and fused work), or why cuDNN cannot run it
  double cudnn_us = -1;             // < 0: not comparable
  double flops = 0, min_bytes = 0;
  double floor_us = 0;              // max(bytes / memory rate, flops / FP32 rate)
  // Both outputs against the exact (FP64) answer at 2048 sampled output elements, on the same random input.
  double max_abs_error = 0;         // ours: max |ours - exact|
  double rel_error = 0;             // ours: ||ours - exact|| / ||exact||
  double cudnn_rel_error = 0;       // cuDNN's, reported only (Winograd and FFT lose a few digits)
  bool mismatch = false;            // rel_error above 1e-5: the run fails
  // Both timed the same way: a layer's or a step's launches back to back.
  double compared_us() const { return alone_us > 0 ? alone_us : ours_us; }
  double speedup() const { return cudnn_us > 0 && compared_us() > 0 ? cudnn_us / compared_us() : 0; }
  double floor_share() const { return ours_us > 0 ? floor_us / ours_us : 0; }
};

struct BenchOptions {
  Options engine;                // tuning, cache, CUDA graphs, passes...
  double warmup_ms = 50;
  int min_samples = 10;
  int max_samples = 60;
  double sample_target_us = 2000;  // each sample replays enough runs to last about this long
};

Comparison bench_conv_layer(const LayerSpec& layer, const BenchOptions& options);

struct StepReport {
  Comparison timing;   // cudnn fields set for convolution steps only
  double share = 0;    // of the sum of step times
  bool is_conv = false;
};

struct ModelReport {
  Environment env;
  std::string model;
  int64_t batch = 1;                   // the first dimension of the first input: images per run
  std::vector<Shape> input_shapes;     // every input's shape, as run
  bool cuda_graph = true;
  Timing latency;              // one run (GPU compute), events around each
  double throughput = 0;       // images/s from back-to-back runs
  double per_run_us = 0;       // GPU time of one run in back-to-back replay
  double h2d_us = 0, d2h_us = 0;
  bool included_transfers = false;
  std::vector<StepReport> steps;
  double steps_ours_us = 0;    // sum of step medians
  double conv_ours_us = 0, conv_cudnn_us = 0;  // convolution steps cuDNN can run, each alone (alone_us), both
};

// `iterations` single runs for the latency statistics (or as many as fit in `duration_s` when > 0).
ModelReport bench_model(const std::string& path, int64_t batch, const BenchOptions& options, int iterations,
                        double duration_s, bool include_transfers);
// The same for explicit input shapes (one per input, in the model's order), which bind every symbolic
// dimension: a fully convolutional model at a given image size. Checked as Model::output_shapes checks them.
ModelReport bench_model(const std::string& path, const std::vector<Shape>& input_shapes, const BenchOptions& options,
                        int iterations, double duration_s, bool include_transfers);

}  // namespace cnnrt::bench
