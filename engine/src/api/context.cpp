#include <fmt/format.h>

#include <map>

#include "api/context_access.hpp"
#include "api/model_impl.hpp"
#include "core/error.hpp"
#include "runtime/device.hpp"
#include "runtime/executor.hpp"
#include "runtime/gpu_model.hpp"

namespace cnnrt {

namespace detail {

struct ContextImpl {
  std::shared_ptr<ModelImpl> model;
  Stream stream = nullptr;
  bool own_stream = false;
  std::map<std::vector<ir::Shape>, std::unique_ptr<runtime::Executor>> executors;

  ~ContextImpl() {
    runtime::ScopedDevice on_device(model->gpu_ordinal);
    executors.clear();
    if (own_stream) model->gpu->destroy_stream(stream);
  }

  runtime::Executor& executor_for(const std::vector<ir::Shape>& shapes) {
    auto it = executors.find(shapes);
    if (it != executors.end()) return *it->second;
    auto prepared = model->prepare(shapes);
    std::unique_ptr<runtime::Executor> executor = model->device == Device::Gpu
                                                      ? model->gpu->make_executor(prepared, stream)
                                                      : runtime::make_cpu_executor(prepared);
    return *executors.emplace(shapes, std::move(executor)).first->second;
  }

  void check_host_buffers(const float* const* inputs, float* const* outputs) const {
    CNNRT_CHECK(inputs != nullptr && outputs != nullptr, ErrorCode::Usage, "Context::run: null buffer array");
    for (size_t i = 0; i < model->inputs.size(); ++i) {
      CNNRT_CHECK(inputs[i] != nullptr, ErrorCode::Usage, "Context::run: input {} ('{}') is null", i,
                  model->inputs[i].name);
    }
    for (size_t i = 0; i < model->outputs.size(); ++i) {
      CNNRT_CHECK(outputs[i] != nullptr, ErrorCode::Usage, "Context::run: output {} ('{}') is null", i,
                  model->outputs[i].name);
    }
  }

  void check_device_buffers(const float* const* device_inputs, float* const* device_outputs) const {
    CNNRT_CHECK(model->device == Device::Gpu, ErrorCode::Usage,
                "Context::enqueue takes device buffers, but this model runs on the CPU; use Context::run");
    CNNRT_CHECK(device_inputs != nullptr && device_outputs != nullptr, ErrorCode::Usage,
                "Context::enqueue: null buffer array");
  }

  std::vector<ir::Shape> shapes_of(const std::vector<Tensor>& inputs) const {
    CNNRT_CHECK(inputs.size() == model->inputs.size(), ErrorCode::InvalidInput,
                "'{}' takes {} input{}, got {}", model->graph.model_name, model->inputs.size(),
                model->inputs.size() == 1 ? "" : "s", inputs.size());
    std::vector<ir::Shape> shapes;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Tensor& t = inputs[i];
      for (int64_t d : t.shape) {
        CNNRT_CHECK(d >= 0, ErrorCode::InvalidInput, "input '{}' has a negative dimension in shape {}",
                    model->inputs[i].name, fmt::join(t.shape, "x"));
      }
      int64_t count = 0;
      try {
        count = ir::numel(t.shape);  // throws when the product overflows int64
      } catch (const Error& e) {
        fail(ErrorCode::InvalidInput, "input '{}': {}", model->inputs[i].name, e.what());
      }
      CNNRT_CHECK(static_cast<size_t>(count) == t.data.size(), ErrorCode::InvalidInput,
                  "input '{}': shape {} needs {} values, the tensor holds {}", model->inputs[i].name,
                  fmt::join(t.shape, "x"), count, t.data.size());
      shapes.push_back(t.shape);
    }
    return shapes;
  }
};

runtime::Executor& ContextAccess::executor(Context& context, int64_t batch) {
  ContextImpl& impl = *context.impl_;
  runtime::ScopedDevice on_device(impl.model->gpu_ordinal);
  return impl.executor_for(impl.model->shapes_for_batch(batch));
}

runtime::Executor& ContextAccess::executor(Context& context, const std::vector<Shape>& input_shapes) {
  ContextImpl& impl = *context.impl_;
  return impl.executor_for(impl.model->checked_shapes(input_shapes));
}

}  // namespace detail

Context::Context(const Model& model, Stream stream) : impl_(std::make_unique<detail::ContextImpl>()) {
  impl_->model = model.impl_;
  impl_->stream = stream;
  runtime::ScopedDevice on_device(impl_->model->gpu_ordinal);
  if (impl_->model->device == Device::Gpu && stream == nullptr) {
    impl_->stream = impl_->model->gpu->create_stream();
    impl_->own_stream = true;
  }
}

Context::~Context() = default;
Context::Context(Context&&) noexcept = default;
Context& Context::operator=(Context&&) noexcept = default;

std::vector<Tensor> Context::run(const std::vector<Tensor>& inputs) {
  runtime::ScopedDevice on_device(impl_->model->gpu_ordinal);
  const std::vector<ir::Shape> shapes = impl_->shapes_of(inputs);
  runtime::Executor& executor = impl_->executor_for(shapes);
  const auto& output_shapes = impl_->model->prepare(shapes)->output_shapes;
  std::vector<Tensor> outputs(output_shapes.size());
  std::vector<const float*> in_ptrs;
  std::vector<float*> out_ptrs;
  for (const Tensor& t : inputs) in_ptrs.push_back(t.data.data());
  for (size_t i = 0; i < outputs.size(); ++i) {
    outputs[i].shape = output_shapes[i];
    outputs[i].data.resize(static_cast<size_t>(ir::numel(output_shapes[i])));
    out_ptrs.push_back(outputs[i].data.data());
  }
  executor.run_host(in_ptrs.data(), out_ptrs.data());
  return outputs;
}

void Context::run(const float* const* inputs, float* const* outputs, int64_t batch) {
  runtime::ScopedDevice on_device(impl_->model->gpu_ordinal);
  impl_->check_host_buffers(inputs, outputs);
  // 0 means the declared shapes (a symbolic batch as 1); a negative batch is a caller's bug, not a default.
  CNNRT_CHECK(batch >= 0, ErrorCode::Usage, "Context::run: batch {} is negative", batch);
  impl_->executor_for(impl_->model->shapes_for_batch(batch)).run_host(inputs, outputs);
}

void Context::run(const float* const* inputs, float* const* outputs, const std::vector<Shape>& input_shapes) {
  runtime::ScopedDevice on_device(impl_->model->gpu_ordinal);
  const std::vector<ir::Shape> shapes = impl_->model->checked_shapes(input_shapes);
  impl_->check_host_buffers(inputs, outputs);
  impl_->executor_for(shapes).run_host(inputs, outputs);
}

void Context::enqueue(const float* const* device_inputs, float* const* device_outputs, int64_t batch) {
  impl_->check_device_buffers(device_inputs, device_outputs);
  CNNRT_CHECK(batch >= 0, ErrorCode::Usage, "Context::enqueue: batch {} is negative", batch);
  runtime::ScopedDevice on_device(impl_->model->gpu_ordinal);
  impl_->executor_for(impl_->model->shapes_for_batch(batch)).enqueue_device(device_inputs, device_outputs);
}

void Context::enqueue(const float* const* device_inputs, float* const* device_outputs,
                      const std::vector<Shape>& input_shapes) {
  impl_->check_device_buffers(device_inputs, device_outputs);
  runtime::ScopedDevice on_device(impl_->model->gpu_ordinal);
  const std::vector<ir::Shape> shapes = impl_->model->checked_shapes(input_shapes);
  impl_->executor_for(shapes).enqueue_device(device_inputs, device_outputs);
}

void Context::synchronize() {
  runtime::ScopedDevice on_device(impl_->model->gpu_ordinal);
  for (auto& [shapes, executor] : impl_->executors) executor->synchronize();
}

Stream Context::stream() const { return impl_->stream; }

void Context::set_stream(Stream stream) {
  CNNRT_CHECK(impl_->model->device == Device::Gpu, ErrorCode::Usage, "set_stream: this model runs on the CPU");
  runtime::ScopedDevice on_device(impl_->model->gpu_ordinal);
  synchronize();
  // The executors move to the new stream first (they wait on the old one), and only then may an old
  // stream of our own be destroyed.
  if (stream != nullptr && stream == impl_->stream) return;  // set_stream(stream()): nothing changes hands
  const Stream old = impl_->stream;
  const bool old_owned = impl_->own_stream;
  const Stream next = stream ? stream : impl_->model->gpu->create_stream();  // may throw: nothing changed yet
  impl_->stream = next;
  impl_->own_stream = stream == nullptr;
  for (auto& [shapes, executor] : impl_->executors) executor->set_stream(next);
  if (old_owned) impl_->model->gpu->destroy_stream(old);
}

std::vector<StepTiming> Context::profile(const std::vector<Tensor>& inputs, int repetitions) {
  CNNRT_CHECK(repetitions >= 1, ErrorCode::Usage, "profile: repetitions must be at least 1");
  runtime::ScopedDevice on_device(impl_->model->gpu_ordinal);
  const std::vector<ir::Shape> shapes = impl_->shapes_of(inputs);
  std::vector<const float*> in_ptrs;
  for (const Tensor& t : inputs) in_ptrs.push_back(t.data.data());
  return impl_->executor_for(shapes).profile(in_ptrs.data(), repetitions);
}

}  // namespace cnnrt
