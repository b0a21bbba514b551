// What a Context runs: one executor per (context, prepared input shapes).
#pragma once

#include <memory>
#include <vector>

#include "cnnrt/cnnrt.hpp"
#include "core/error.hpp"
#include "plan/prepared.hpp"

namespace cnnrt::runtime {

// Buffers are one per graph input/output, in graph order, each sized for the prepared shapes.
class Executor {
 public:
  virtual ~Executor() = default;
  // Host buffers: copies in, runs, copies out, waits.
  virtual void run_host(const float* const* inputs, float* const* outputs) = 0;
  // Device buffers: queues the run on the stream and returns.
  virtual void enqueue_device(const float* const* inputs, float* const* outputs) = 0;
  virtual void synchronize() = 0;
  virtual void set_stream(Stream stream) = 0;
  virtual Stream stream() const = 0;
  virtual std::vector<StepTiming> profile(const float* const* inputs, int repetitions) = 0;

  // Benchmarking (GPU only): GPU time of one run, in microseconds, for each of `samples` samples: every
  // sample replays `runs` back-to-back runs captured in one CUDA graph (no launch gaps) and divides.
  // Uses the buffers of the last run.
  virtual std::vector<double> time_runs_us(int runs, int samples) {
    fail(ErrorCode::Usage, "timing runs needs the GPU backend");
  }
  // The plan this executor runs (GPU only; null on the CPU).
  virtual const plan::GpuPlan* gpu_plan() const { return nullptr; }
};

// The CPU reference backend behind the Executor interface (engine/src/cpu/backend.cpp).
std::unique_ptr<Executor> make_cpu_executor(std::shared_ptr<const plan::Prepared> prepared);

}  // namespace cnnrt::runtime
