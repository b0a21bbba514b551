#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "plan/prepared.hpp"
#include "cnnrt/cnnrt.hpp"
#include "ir/graph.hpp"

namespace cnnrt::runtime {
class GpuModel;
}

namespace cnnrt::detail {

struct ModelImpl {
  Options options;
  ir::Graph graph;  // as loaded: symbolic dims unbound
  std::vector<TensorDesc> inputs;
  std::vector<TensorDesc> outputs;
  Device device = Device::Cpu;
  std::shared_ptr<runtime::GpuModel> gpu;  // device state shared by all contexts (GPU models only)
  int gpu_ordinal = -1;                    // the CUDA device of `gpu` (every call that touches it switches
                                           // to it: runtime::ScopedDevice); -1 on the CPU

  ~ModelImpl();  // frees the device state on its own device

  // Input shapes for a batch size: each input's declared dims with the first one set to `batch`.
  // batch <= 0: the declared dims, a symbolic batch dimension as 1.
  std::vector<ir::Shape> shapes_for_batch(int64_t batch) const;
  // The declared dims with a symbolic batch dimension as 1; empty when other dims are symbolic.
  std::vector<ir::Shape> declared_shapes() const;
  // Explicit input shapes from the caller, checked against the declared inputs: the count, each rank, fixed
  // dims, sizes >= 1 and one size per symbol (InvalidInput naming the input and the dimension).
  std::vector<ir::Shape> checked_shapes(const std::vector<ir::Shape>& shapes) const;
  // Bound + optimized (+ planned, on the GPU) graph for these input shapes; cached, thread-safe.
  std::shared_ptr<const plan::Prepared> prepare(const std::vector<ir::Shape>& input_shapes) const;

 private:
  mutable std::mutex mutex_;
  mutable std::map<std::vector<ir::Shape>, std::shared_ptr<const plan::Prepared>> prepared_;
};

}  // namespace cnnrt::detail
