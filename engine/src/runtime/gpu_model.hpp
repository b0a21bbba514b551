// GPU state shared by every Context of one model: the device, uploaded weights, tuning results.
#pragma once

#include <memory>

#include "cnnrt/cnnrt.hpp"
#include "passes/passes.hpp"
#include "plan/prepared.hpp"
#include "runtime/executor.hpp"

namespace cnnrt::runtime {

class GpuModel {
 public:
  // Throws DeviceUnavailable without a usable device (or in a build without CUDA).
  static std::shared_ptr<GpuModel> create(const Options& options);
  virtual ~GpuModel() = default;

  // What this device's planner offers the graph passes (passes::Target).
  virtual passes::Target pass_target() const = 0;

  // Uploads the prepared graph's constants (each distinct tensor once per model) and plans its steps:
  // kernel per step (measured or heuristic), launch configuration, activation arena.
  virtual std::shared_ptr<const plan::GpuPlan> plan(const plan::Prepared& prepared) = 0;
  // An executor with its own arena and CUDA graph, queued on `stream`.
  virtual std::unique_ptr<Executor> make_executor(std::shared_ptr<const plan::Prepared> prepared,
                                                  Stream stream) = 0;
  virtual Stream create_stream() = 0;
  virtual void destroy_stream(Stream stream) noexcept = 0;
};

}  // namespace cnnrt::runtime
