#pragma once

#include <memory>

#include "runtime/executor.hpp"

namespace cnnrt::runtime {

// Runs a GPU plan: one arena, pinned staging for host runs, CUDA-graph replay unless `use_graphs` is off.
std::unique_ptr<Executor> make_gpu_executor(std::shared_ptr<const plan::Prepared> prepared, Stream stream,
                                            bool use_graphs);

}  // namespace cnnrt::runtime
