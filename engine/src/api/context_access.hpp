// Internal access to a Context's executor and a Model's implementation, for the bench library.
#pragma once

#include "api/model_impl.hpp"
#include "cnnrt/cnnrt.hpp"
#include "runtime/executor.hpp"

namespace cnnrt::detail {

struct ContextAccess {
  // The executor this context runs `batch` with (planning it on first use).
  static runtime::Executor& executor(Context& context, int64_t batch);
  // The same for explicit input shapes (checked as Model::output_shapes checks them).
  static runtime::Executor& executor(Context& context, const std::vector<Shape>& input_shapes);
  static const ModelImpl& model(const Model& model) { return *model.impl_; }
};

}  // namespace cnnrt::detail
