// A model bound to concrete input shapes and rewritten by the passes (and, on the GPU, planned):
// what an executor runs. Immutable once built; shared by every Context of the model.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/graph.hpp"

namespace cnnrt::plan {

struct GpuPlan;

struct Prepared {
  std::vector<ir::Shape> input_shapes;   // Graph::inputs order
  std::vector<ir::Shape> output_shapes;  // Graph::outputs order
  ir::Graph graph;                       // bound, folded, optimized
  std::vector<std::string> pass_log;
  std::shared_ptr<const GpuPlan> gpu_plan;  // GPU models only
};

}  // namespace cnnrt::plan
