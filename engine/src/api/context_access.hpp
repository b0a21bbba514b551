// Internal access to a Context's executor and a Model's implementation, for the bench library.
#pragma once

#include "api/model_impl.hpp"
#include "cnnrt/cnnrt.hpp"
#include "runtime/executor.hpp"

namespace cnnrt::detail {

struct ContextAccess {
  // The executor this context runs `batch` with (planning it on first use).
  static runtime::Executor& executor(Context& context, int64_t batch);
  static const ModelImpl& model(const Model& model) { return *model.impl_; }
};

}  // namespace cnnrt::detail
