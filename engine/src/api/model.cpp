#include <fmt/format.h>

#include <map>
#include <sstream>

#include "api/model_impl.hpp"
#include "core/error.hpp"
#include "core/log.hpp"
#include "cpu/executor.hpp"
#include "onnx/loader.hpp"
#include "passes/bind_shapes.hpp"
#include "passes/pipeline.hpp"
#include "plan/describe.hpp"
#include "runtime/device.hpp"
#include "runtime/gpu_model.hpp"

namespace cnnrt {

using detail::ModelImpl;

namespace {

TensorDesc describe_value(const ir::Value& v) {
  TensorDesc d;
  d.name = v.name;
  if (v.declared) d.shape = *v.declared;
  else if (v.shape) d.shape = *v.shape;
  d.dim_names = v.dim_params;
  d.dim_names.resize(d.shape.size());
  return d;
}

// "N x 1 x H x W": an input's declared dims, symbols by name.
std::string describe_dims(const TensorDesc& in) {
  std::vector<std::string> dims;
  for (size_t d = 0; d < in.shape.size(); ++d) {
    const bool named = d < in.dim_names.size() && !in.dim_names[d].empty();
    dims.push_back(in.shape[d] >= 0 ? std::to_string(in.shape[d]) : named ? in.dim_names[d] : "?");
  }
  return fmt::format("{}", fmt::join(dims, " x "));
}

std::string describe_shapes(const std::vector<ir::Shape>& shapes) {
  std::vector<std::string> parts;
  for (const ir::Shape& s : shapes) parts.push_back(ir::shape_str(s));
  return fmt::format("{}", fmt::join(parts, ", "));
}

Device choose_device(Device requested, int gpu_index) {
  std::string why;
  if (requested == Device::Cpu) return Device::Cpu;
  if (runtime::cuda_device_available(&why)) {
    if (gpu_index >= 0) runtime::check_device_ordinal(gpu_index);
    why = runtime::device_unusable(gpu_index);
    if (why.empty()) return Device::Gpu;
  }
  if (requested == Device::Gpu) {
    fail(ErrorCode::DeviceUnavailable, "a GPU was requested but none is usable: {}", why);
  }
  log().warn("no usable CUDA device ({}); running on the CPU reference backend", why);
  return Device::Cpu;
}

// Prepares the batch sizes and input shapes asked for. With none, binds the declared shapes once (a symbolic
// batch dimension as 1) so that shape errors surface at load time rather than at the first run; models with
// other symbolic dimensions (image size) are bound when the caller gives full shapes.
void prepare_requested(const ModelImpl& impl, const Options& options) {
  for (int64_t batch : options.batch_sizes) impl.prepare(impl.shapes_for_batch(batch));
  for (size_t i = 0; i < options.input_shapes.size(); ++i) {
    try {
      impl.prepare(impl.checked_shapes(options.input_shapes[i]));
    } catch (const Error& e) {
      rethrow_with_prefix(e, fmt::format("Options::input_shapes[{}]", i));
    }
  }
  if (options.batch_sizes.empty() && options.input_shapes.empty()) {
    const std::vector<ir::Shape> declared = impl.declared_shapes();
    if (!declared.empty() || impl.inputs.empty()) impl.prepare(declared);
  }
}

std::shared_ptr<ModelImpl> finish_load(ir::Graph graph, const Options& options) {
  auto impl = std::make_shared<ModelImpl>();
  impl->options = options;
  impl->graph = std::move(graph);
  for (int id : impl->graph.inputs) impl->inputs.push_back(describe_value(impl->graph.values[id]));
  for (int id : impl->graph.outputs) impl->outputs.push_back(describe_value(impl->graph.values[id]));
  CNNRT_CHECK(options.gpu_index >= -1, ErrorCode::Usage,
              "Options::gpu_index is {}: give a CUDA device number (0, 1, ...), or -1 for the current device",
              options.gpu_index);
  impl->device = choose_device(options.device, options.gpu_index);
  if (impl->device == Device::Cpu) {
    prepare_requested(*impl, options);
    return impl;
  }
  try {
    impl->gpu_ordinal = options.gpu_index >= 0 ? options.gpu_index : runtime::current_device_ordinal();
    {
      runtime::ScopedDevice on_device(impl->gpu_ordinal);
      impl->gpu = runtime::GpuModel::create(options);
    }
    prepare_requested(*impl, options);
    return impl;
  } catch (const Error& e) {
    // A GPU that cannot hold the model now (out of memory at plan time): --device auto runs on the CPU.
    if (e.code() != ErrorCode::DeviceUnavailable || options.device != Device::Auto) throw;
    log().warn("{}; running on the CPU reference backend", e.what());
  }
  auto cpu = std::make_shared<ModelImpl>();
  cpu->options = options;
  cpu->graph = impl->graph;
  cpu->inputs = impl->inputs;
  cpu->outputs = impl->outputs;
  cpu->device = Device::Cpu;
  impl.reset();  // the GPU model's memory goes back before the CPU plans
  prepare_requested(*cpu, options);
  return cpu;
}

}  // namespace

namespace detail {

ModelImpl::~ModelImpl() {
  runtime::ScopedDevice on_device(gpu_ordinal);
  prepared_.clear();
  gpu.reset();
}

std::vector<ir::Shape> ModelImpl::declared_shapes() const {
  std::vector<ir::Shape> shapes;
  for (const TensorDesc& in : inputs) {
    ir::Shape s = in.shape;
    if (s.empty()) return {};
    if (s[0] < 0) s[0] = 1;
    for (int64_t d : s) {
      if (d < 0) return {};
    }
    shapes.push_back(std::move(s));
  }
  return shapes;
}

std::vector<ir::Shape> ModelImpl::checked_shapes(const std::vector<ir::Shape>& shapes) const {
  CNNRT_CHECK(shapes.size() == inputs.size(), ErrorCode::InvalidInput, "'{}' takes {} input{}, got {} shape{}",
              graph.model_name, inputs.size(), inputs.size() == 1 ? "" : "s", shapes.size(),
              shapes.size() == 1 ? "" : "s");
  std::map<std::string, std::pair<int64_t, std::string>> symbols;  // dim name -> size and the input that set it
  for (size_t i = 0; i < shapes.size(); ++i) {
    const TensorDesc& in = inputs[i];
    const ir::Shape& s = shapes[i];
    const std::string given = fmt::format("{}", fmt::join(s, "x"));
    CNNRT_CHECK(in.shape.empty() || s.size() == in.shape.size(), ErrorCode::InvalidInput,
                "'{}': input '{}' has rank {} ({}), got shape {} of rank {}", graph.model_name, in.name,
                in.shape.size(), describe_dims(in), given, s.size());
    for (size_t d = 0; d < s.size(); ++d) {
      const std::string dim_name = d < in.dim_names.size() && !in.dim_names[d].empty() && in.dim_names[d] != "?"
                                       ? fmt::format(" ('{}')", in.dim_names[d])
                                       : "";
      CNNRT_CHECK(s[d] >= 1, ErrorCode::InvalidInput, "'{}': input '{}' dimension {}{} must be at least 1, got {}",
                  graph.model_name, in.name, d, dim_name, s[d]);
      if (d < in.shape.size() && in.shape[d] >= 0) {
        CNNRT_CHECK(in.shape[d] == s[d], ErrorCode::InvalidInput,
                    "'{}': input '{}' dimension {} is fixed at {}, got {}", graph.model_name, in.name, d, in.shape[d],
                    s[d]);
      } else if (!dim_name.empty()) {
        auto [it, added] = symbols.emplace(in.dim_names[d], std::make_pair(s[d], in.name));
        CNNRT_CHECK(added || it->second.first == s[d], ErrorCode::InvalidInput,
                    "'{}': input '{}' dimension {}{} is given as {}, but '{}' has '{}' = {}", graph.model_name,
                    in.name, d, dim_name, s[d], it->second.second, in.dim_names[d], it->second.first);
      }
    }
  }
  return shapes;
}

std::vector<ir::Shape> ModelImpl::shapes_for_batch(int64_t batch) const {
  if (batch <= 0) {
    std::vector<ir::Shape> shapes = declared_shapes();
    if (shapes.empty() && !inputs.empty()) {
      for (const TensorDesc& in : inputs) {
        for (size_t d = 1; d < in.shape.size(); ++d) {
          CNNRT_CHECK(in.shape[d] >= 0, ErrorCode::Usage,
                      "'{}': input '{}' dimension {} ('{}') is symbolic; give full input shapes (the API's "
                      "input_shapes overloads, `--shape {}=...` on the command line)",
                      graph.model_name, in.name, d, in.dim_names[d], in.name);
        }
      }
      fail(ErrorCode::Usage, "'{}' has inputs without declared shapes; give full input shapes (the API's "
           "input_shapes overloads, `--shape NAME=...` on the command line)", graph.model_name);
    }
    return shapes;
  }
  std::vector<ir::Shape> shapes;
  for (const TensorDesc& in : inputs) {
    CNNRT_CHECK(!in.shape.empty(), ErrorCode::Usage,
                "'{}': input '{}' has no declared shape, so a batch size alone cannot shape it; pass full "
                "tensors instead", graph.model_name, in.name);
    ir::Shape s = in.shape;
    CNNRT_CHECK(s[0] < 0 || s[0] == batch, ErrorCode::InvalidInput,
                "'{}': input '{}' has a fixed batch dimension of {}; it cannot run batch {}", graph.model_name,
                in.name, s[0], batch);
    s[0] = batch;
    for (size_t d = 1; d < s.size(); ++d) {
      CNNRT_CHECK(s[d] >= 0, ErrorCode::Usage,
                  "'{}': input '{}' dimension {} ('{}') is symbolic; give full input shapes, not just a batch size "
                  "(the API's input_shapes overloads, `--shape {}=...` on the command line)",
                  graph.model_name, in.name, d, in.dim_names[d], in.name);
    }
    shapes.push_back(std::move(s));
  }
  return shapes;
}

std::shared_ptr<const plan::Prepared> ModelImpl::prepare(const std::vector<ir::Shape>& input_shapes) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = prepared_.find(input_shapes);
  if (it != prepared_.end()) return it->second;

  auto prepared = std::make_shared<plan::Prepared>();
  prepared->input_shapes = input_shapes;
  prepared->graph = graph;
  try {
    passes::bind_shapes(prepared->graph, input_shapes);
    prepared->pass_log = passes::run_passes(prepared->graph, options.disabled_passes,
                                            device == Device::Gpu ? gpu->pass_target() : passes::Target{});
  } catch (const Error& e) {
    if (e.code() == ErrorCode::Usage) throw;
    rethrow_with_prefix(e, fmt::format("'{}'", graph.model_name));
  }
  for (int id : prepared->graph.outputs) prepared->output_shapes.push_back(prepared->graph.shape_of(id));
  if (device == Device::Cpu) {
    // The GPU planner checks its arena; the CPU backend allocates per tensor, so check its peak here,
    // before a run allocates anything.
    const int64_t peak = cpu::peak_activation_bytes(prepared->graph);
    CNNRT_CHECK(peak <= options.limits.max_activation_bytes, ErrorCode::LimitExceeded,
                "'{}' needs {} bytes of activations on the CPU for input shapes [{}], over the limit of {} bytes "
                "(Limits::max_activation_bytes; raise it with --max-activation-bytes or use a smaller batch)",
                graph.model_name, peak, describe_shapes(input_shapes), options.limits.max_activation_bytes);
  }
  if (device == Device::Gpu) {
    runtime::ScopedDevice on_device(gpu_ordinal);
    prepared->gpu_plan = gpu->plan(*prepared);
  }
  prepared_.emplace(input_shapes, prepared);
  return prepared;
}

}  // namespace detail

Model::Model(std::shared_ptr<ModelImpl> impl) : impl_(std::move(impl)) {}

Model Model::load(const std::string& path, const Options& options) {
  if (options.log_level) set_log_level(*options.log_level);
  return Model(finish_load(onnx_io::load_model_file(path, options.limits), options));
}

Model Model::load_from_memory(const void* data, std::size_t size, const Options& options, const std::string& name) {
  if (options.log_level) set_log_level(*options.log_level);
  CNNRT_CHECK(data != nullptr || size == 0, ErrorCode::Usage, "load_from_memory: data is null");
  return Model(finish_load(onnx_io::load_model_bytes(data, size, name, "", options.limits), options));
}

const std::string& Model::name() const { return impl_->graph.model_name; }
const std::vector<TensorDesc>& Model::inputs() const { return impl_->inputs; }
const std::vector<TensorDesc>& Model::outputs() const { return impl_->outputs; }
const std::map<std::string, std::string>& Model::metadata() const { return impl_->graph.metadata; }
Device Model::device() const { return impl_->device; }

std::vector<Shape> Model::output_shapes(int64_t batch) const {
  return impl_->prepare(impl_->shapes_for_batch(batch))->output_shapes;
}

std::vector<Shape> Model::output_shapes(const std::vector<Shape>& input_shapes) const {
  return impl_->prepare(impl_->checked_shapes(input_shapes))->output_shapes;
}

std::string Model::describe_plan(int64_t batch, bool explain) const {
  auto prepared = impl_->prepare(impl_->shapes_for_batch(batch));
  return plan::describe(*prepared, impl_->device, explain);
}

std::string Model::describe_plan(const std::vector<Shape>& input_shapes, bool explain) const {
  auto prepared = impl_->prepare(impl_->checked_shapes(input_shapes));
  return plan::describe(*prepared, impl_->device, explain);
}

}  // namespace cnnrt
