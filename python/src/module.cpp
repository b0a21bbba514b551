// cnnrt._cnnrt: the Python bindings of the public C++ API (cnnrt/cnnrt.hpp). Model and Context wrap
// cnnrt::Model and cnnrt::Context; run() turns Python arrays into the engine's buffers and back (arrays.hpp)
// and releases the GIL while the engine works. Model.bench lives in cnnrt._bench (bench_module.cpp), which
// is imported on first use because it links cuDNN.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "arrays.hpp"
#include "cuda_interop.hpp"
#include "errors.hpp"
#include "options.hpp"

namespace cnnrt_python {

namespace {

using cnnrt::ErrorCode;
using Shape = std::vector<int64_t>;

// A loaded model and what the bindings need besides it.
struct ModelState {
  cnnrt::Model model;
  cnnrt::Options options;
  std::string path;  // "" when loaded from bytes
  int device = 0;    // the CUDA device of a GPU model
};

std::string model_label(const ModelState& m) { return "'" + m.model.name() + "'"; }

// Why device arrays, streams and DLPack outputs cannot be used with this model.
std::string why_no_gpu(const ModelState& m) {
  if (!cuda::built_with_cuda()) {
    return "this build of cnnrt has no CUDA support (configured with CNNRT_ENABLE_CUDA=OFF)";
  }
  if (m.options.device == cnnrt::Device::Cpu) return "the model was loaded with device='cpu'";
  return "the model runs on the CPU backend (no usable GPU was found when it was loaded)";
}

enum class OutputKind { Numpy, DLPack };

// A raw CUDA stream handle (int) or an object with one (`cuda_stream`, as torch.cuda.Stream has, or the
// CUDA stream protocol's __cuda_stream__()).
uintptr_t stream_handle(const py::handle& stream) {
  if (py::isinstance<py::int_>(stream)) {
    const int64_t handle = stream.cast<int64_t>();
    if (handle < 0) fail(ErrorCode::Usage, "stream must be a CUDA stream handle (an int >= 0), not ", std::to_string(handle));
    return static_cast<uintptr_t>(handle);
  }
  if (py::hasattr(stream, "cuda_stream")) return stream_handle(stream.attr("cuda_stream"));
  if (py::hasattr(stream, "__cuda_stream__")) return stream_handle(py::tuple(stream.attr("__cuda_stream__")())[1]);
  fail(ErrorCode::Usage, "stream must be a CUDA stream handle (int) or an object with .cuda_stream "
       "(torch.cuda.Stream), not a ", std::string(py::str(py::type::handle_of(stream).attr("__name__"))));
}

// The Python Context: one cnnrt::Context on its own stream, plus one per CUDA stream a caller runs on.
class Session {
 public:
  Session(std::shared_ptr<const ModelState> model, std::optional<uintptr_t> stream)
      : model_(std::move(model)), default_stream_(stream) {
    own_ = std::make_unique<cnnrt::Context>(model_->model);
  }

  py::object run(const py::handle& inputs, bool as_dict, const py::object& output, const py::object& stream,
                 const py::object& out);

  const std::shared_ptr<const ModelState>& model() const { return model_; }
  std::optional<uintptr_t> default_stream() const { return default_stream_; }

 private:
  // The context whose stream is `handle`. Contexts are kept for the last few streams (each holds an
  // activation arena and CUDA graphs); the oldest goes when another stream comes.
  cnnrt::Context& context_for(uintptr_t handle) {
    for (auto it = by_stream_.begin(); it != by_stream_.end(); ++it) {
      if (it->first == handle) {
        by_stream_.splice(by_stream_.begin(), by_stream_, it);
        return *by_stream_.front().second;
      }
    }
    if (by_stream_.size() >= kStreamsKept) by_stream_.pop_back();
    by_stream_.emplace_front(handle, std::make_unique<cnnrt::Context>(model_->model, cuda::stream_from_handle(handle)));
    return *by_stream_.front().second;
  }

  std::vector<ArrayView> collect_inputs(const py::handle& inputs, const DeviceRules& rules) const;
  py::object finish(std::vector<py::object> values, bool as_dict) const;

  static constexpr size_t kStreamsKept = 4;
  std::shared_ptr<const ModelState> model_;
  std::optional<uintptr_t> default_stream_;
  std::mutex mutex_;  // one run at a time: a cnnrt::Context is used by one thread at a time
  std::unique_ptr<cnnrt::Context> own_;
  std::list<std::pair<uintptr_t, std::unique_ptr<cnnrt::Context>>> by_stream_;
  std::unique_ptr<cuda::Event> join_;  // orders the own stream after a caller's default stream and back
};

std::vector<ArrayView> Session::collect_inputs(const py::handle& inputs, const DeviceRules& rules) const {
  const std::vector<cnnrt::TensorDesc>& descs = model_->model.inputs();
  std::vector<py::object> objects(descs.size());
  auto names = [&] {
    std::string s;
    for (const auto& d : descs) s += (s.empty() ? "'" : ", '") + d.name + "'";
    return s.empty() ? std::string("none") : s;
  };
  if (py::isinstance<py::dict>(inputs) || py::hasattr(inputs, "keys")) {
    for (const auto& item : py::reinterpret_borrow<py::object>(inputs).attr("items")()) {
      const py::tuple pair = py::reinterpret_borrow<py::tuple>(item);
      if (!py::isinstance<py::str>(pair[0])) {
        fail(ErrorCode::InvalidInput, "input names must be strings, not ",
             std::string(py::str(py::type::handle_of(pair[0]).attr("__name__"))));
      }
      const std::string name = pair[0].cast<std::string>();
      size_t i = 0;
      while (i < descs.size() && descs[i].name != name) ++i;
      if (i == descs.size()) fail(ErrorCode::InvalidInput, model_label(*model_), " has no input named '", name, "' (its inputs: ", names(), ")");
      objects[i] = py::reinterpret_borrow<py::object>(pair[1]);
    }
    for (size_t i = 0; i < descs.size(); ++i) {
      if (!objects[i]) fail(ErrorCode::InvalidInput, "input '", descs[i].name, "' is missing (", model_label(*model_), " takes ", names(), ")");
    }
  } else if (py::isinstance<py::list>(inputs) || py::isinstance<py::tuple>(inputs)) {
    const py::sequence seq = py::reinterpret_borrow<py::sequence>(inputs);
    if (seq.size() != descs.size()) {
      fail(ErrorCode::InvalidInput, model_label(*model_), " takes ", std::to_string(descs.size()), " input",
           descs.size() == 1 ? "" : "s", ", got ", std::to_string(seq.size()));
    }
    for (size_t i = 0; i < descs.size(); ++i) objects[i] = seq[i];
  } else if (descs.size() == 1) {
    objects[0] = py::reinterpret_borrow<py::object>(inputs);
  } else {
    fail(ErrorCode::InvalidInput, model_label(*model_), " takes ", std::to_string(descs.size()),
         " inputs: pass a dict {name: array} or a list in the model's input order (", names(), ")");
  }
  std::vector<ArrayView> views;
  for (size_t i = 0; i < descs.size(); ++i) {
    views.push_back(view_array(objects[i], "input '" + descs[i].name + "'", rules, false));
  }
  return views;
}

py::object Session::finish(std::vector<py::object> values, bool as_dict) const {
  if (!as_dict) {
    py::list list;
    for (auto& v : values) list.append(std::move(v));
    return std::move(list);
  }
  py::dict dict;
  for (size_t i = 0; i < values.size(); ++i) dict[py::str(model_->model.outputs()[i].name)] = std::move(values[i]);
  return std::move(dict);
}

py::object Session::run(const py::handle& inputs, bool as_dict, const py::object& output, const py::object& stream,
                        const py::object& out) {
  std::unique_lock<std::mutex> lock(mutex_, std::defer_lock);
  {
    py::gil_scoped_release release;  // another thread may hold the lock while it waits for the GIL
    lock.lock();
  }
  const ModelState& m = *model_;
  const bool gpu = m.model.device() == cnnrt::Device::Gpu;
  OutputKind kind = OutputKind::Numpy;
  if (!output.is_none()) {
    if (!out.is_none()) fail(ErrorCode::Usage, "run: give out= or output=, not both (out= returns its own arrays)");
    const std::string name = output.cast<std::string>();
    if (name == "dlpack") kind = OutputKind::DLPack;
    else if (name != "numpy") fail(ErrorCode::Usage, "output must be 'numpy' or 'dlpack', not '", name, "'");
  }
  const std::optional<uintptr_t> caller = stream.is_none() ? default_stream_ : std::optional(stream_handle(stream));
  DeviceRules rules;
  rules.gpu_model = gpu;
  rules.device = m.device;
  if (!gpu) {
    rules.why_not = why_no_gpu(m);
    if (caller) fail(ErrorCode::DeviceUnavailable, "stream= orders the run on a CUDA stream, but ", rules.why_not);
    if (kind == OutputKind::DLPack) fail(ErrorCode::DeviceUnavailable, "output='dlpack' returns GPU memory, but ", rules.why_not);
    if (!out.is_none()) fail(ErrorCode::DeviceUnavailable, "out= takes GPU arrays, but ", rules.why_not);
  }

  // Where the run goes: a caller's stream directly, or this context's own stream (also for the default
  // streams, on which the engine cannot capture its CUDA graph: joined to them by events).
  cnnrt::Context* context = own_.get();
  cnnrt::Stream run_stream = nullptr;
  bool join = false;
  if (gpu) {
    if (caller && !cuda::is_default_stream(*caller)) {
      context = &context_for(*caller);
    } else {
      join = caller.has_value();
    }
    run_stream = context->stream();
    // A DLPack producer orders its pending work before this stream (the caller's, which the run follows).
    rules.dlpack_stream = caller ? (*caller == 0 ? 1 : *caller) : cuda::dlpack_handle(run_stream);
  }

  std::vector<ArrayView> views = collect_inputs(inputs, rules);
  bool any_device = false;
  for (const ArrayView& v : views) any_device |= v.on_device;
  const size_t n_out = m.model.outputs().size();

  // The arrays' shapes bind every symbolic dimension; the engine checks them (InvalidInput naming the
  // input and the dimension) and plans a new shape on its first run.
  std::vector<Shape> shapes;
  for (const ArrayView& v : views) shapes.push_back(v.shape);
  std::vector<Shape> out_shapes;
  {
    py::gil_scoped_release release;
    out_shapes = m.model.output_shapes(shapes);
  }

  // Host arrays in, NumPy out, no stream: the engine's own host path (its pinned staging on the GPU), read
  // from the arrays in place and written into the vectors the NumPy results will own.
  if (!gpu || (!any_device && kind == OutputKind::Numpy && !caller && out.is_none())) {
    std::vector<cnnrt::Tensor> results(n_out);
    {
      py::gil_scoped_release release;
      std::vector<const float*> in_ptrs;
      for (const ArrayView& v : views) in_ptrs.push_back(v.data);
      std::vector<float*> out_ptrs;
      for (size_t i = 0; i < n_out; ++i) {
        results[i].shape = out_shapes[i];
        size_t count = 1;
        for (int64_t d : out_shapes[i]) count *= static_cast<size_t>(d);
        results[i].data.resize(count);
        out_ptrs.push_back(results[i].data.data());
      }
      context->run(in_ptrs.data(), out_ptrs.data(), shapes);
    }
    std::vector<py::object> values;
    for (cnnrt::Tensor& t : results) values.push_back(to_numpy(std::move(t)));
    return finish(std::move(values), as_dict);
  }

  // Device buffers: the caller's (zero copy), or ours for host arrays and for outputs.
  std::vector<ArrayView> out_views;
  std::vector<py::object> out_objects;
  if (!out.is_none()) {
    if (py::isinstance<py::dict>(out)) {
      const py::dict d = out;
      for (const auto& desc : m.model.outputs()) {
        if (!d.contains(desc.name)) fail(ErrorCode::InvalidInput, "out= has no array for output '", desc.name, "'");
        out_objects.push_back(d[py::str(desc.name)]);
      }
      if (d.size() != n_out) fail(ErrorCode::InvalidInput, "out= has ", std::to_string(d.size()), " arrays; ", model_label(m), " has ", std::to_string(n_out), " outputs");
    } else {
      const py::sequence s = out;
      if (s.size() != n_out) fail(ErrorCode::InvalidInput, "out= has ", std::to_string(s.size()), " arrays; ", model_label(m), " has ", std::to_string(n_out), " outputs");
      for (size_t i = 0; i < n_out; ++i) out_objects.push_back(s[i]);
    }
    for (size_t i = 0; i < n_out; ++i) {
      const std::string what = "out array for output '" + m.model.outputs()[i].name + "'";
      out_views.push_back(view_array(out_objects[i], what, rules, true));
      if (!out_views.back().on_device) fail(ErrorCode::InvalidInput, what, " is in host memory; out= takes GPU arrays");
      if (out_views.back().shape != out_shapes[i]) {
        fail(ErrorCode::InvalidInput, what, " has shape ", shape_str(out_views.back().shape), ", the output is ",
             shape_str(out_shapes[i]));
      }
    }
  }

  std::vector<std::unique_ptr<cuda::DeviceBuffer>> staged;    // host inputs, copied to the device
  std::vector<std::shared_ptr<cuda::DeviceBuffer>> produced;  // outputs we allocate
  std::vector<cnnrt::Tensor> host_results;
  std::shared_ptr<cuda::Event> ready;
  {
    py::gil_scoped_release release;
    if (!join_) join_ = std::make_unique<cuda::Event>();
    const cnnrt::Stream caller_stream = caller ? cuda::stream_from_handle(*caller) : nullptr;
    if (join) cuda::order_after(run_stream, caller_stream, *join_);
    std::vector<const float*> in_ptrs;
    for (const ArrayView& v : views) {
      if (v.producer_stream) cuda::order_after(run_stream, cuda::stream_from_handle(*v.producer_stream), *join_);
      if (v.on_device) {
        in_ptrs.push_back(v.data);
        continue;
      }
      size_t bytes = sizeof(float);
      for (int64_t d : v.shape) bytes *= static_cast<size_t>(d);
      staged.push_back(std::make_unique<cuda::DeviceBuffer>(bytes));
      cuda::copy_to_device(staged.back()->data(), v.data, bytes, run_stream);
      in_ptrs.push_back(static_cast<const float*>(staged.back()->data()));
    }
    std::vector<float*> out_ptrs;
    for (size_t i = 0; i < n_out; ++i) {
      if (!out_views.empty()) {
        out_ptrs.push_back(out_views[i].data);
        continue;
      }
      size_t bytes = sizeof(float);
      for (int64_t d : out_shapes[i]) bytes *= static_cast<size_t>(d);
      produced.push_back(std::make_shared<cuda::DeviceBuffer>(bytes));
      out_ptrs.push_back(static_cast<float*>(produced.back()->data()));
    }
    context->enqueue(in_ptrs.data(), out_ptrs.data(), shapes);
    if (kind == OutputKind::Numpy && out_views.empty()) {
      for (size_t i = 0; i < n_out; ++i) {
        host_results.push_back({out_shapes[i], std::vector<float>(produced[i]->bytes() / sizeof(float))});
        cuda::copy_to_host(host_results[i].data.data(), produced[i]->data(), produced[i]->bytes(), run_stream);
      }
    }
    if (join) cuda::order_after(caller_stream, run_stream, *join_);
    if (!caller || !host_results.empty()) {
      cuda::synchronize(run_stream);
    } else {
      ready = std::make_shared<cuda::Event>();
      ready->record(run_stream);
    }
  }
  std::vector<py::object> values;
  if (!out_views.empty()) {
    values = std::move(out_objects);
  } else if (kind == OutputKind::Numpy) {
    for (cnnrt::Tensor& t : host_results) values.push_back(to_numpy(std::move(t)));
  } else {
    for (size_t i = 0; i < n_out; ++i) {
      values.push_back(py::cast(DeviceArray(produced[i], out_shapes[i], ready,
                                            caller ? caller : std::nullopt)));
    }
  }
  return finish(std::move(values), as_dict);
}

// One shape per model input, from what a caller writes for input_shapes: a dict {input name: shape} (an
// input left out must have no symbolic dimension: its declared shape), a list of shapes in the model's input
// order, or, for a model with one input, the shape alone. Mistakes are Usage errors, as the tool's --shape
// reports them; the engine then checks the shapes themselves.
std::vector<Shape> shape_set(const cnnrt::Model& model, const py::handle& set, const std::string& what) {
  const std::vector<cnnrt::TensorDesc>& inputs = model.inputs();
  auto names = [&] {
    std::string s;
    for (const auto& d : inputs) s += (s.empty() ? "'" : ", '") + d.name + "'";
    return s;
  };
  auto to_shape = [&](const py::handle& h, const std::string& of) {
    try {
      return h.cast<Shape>();
    } catch (const py::cast_error&) {
      fail(ErrorCode::Usage, what, ": the shape of ", of, " must be a sequence of ints, not ",
           std::string(py::repr(h)));
    }
  };
  std::vector<Shape> shapes;
  if (py::isinstance<py::dict>(set)) {
    const py::dict given = py::reinterpret_borrow<py::dict>(set);
    for (const auto& item : given) {
      const std::string name = py::str(item.first);
      bool known = false;
      for (const auto& d : inputs) known = known || d.name == name;
      if (!known) fail(ErrorCode::Usage, what, ": '", model.name(), "' has no input '", name, "' (its inputs: ", names(), ")");
    }
    for (const cnnrt::TensorDesc& d : inputs) {
      if (given.contains(d.name)) {
        shapes.push_back(to_shape(given[py::str(d.name)], "input '" + d.name + "'"));
        continue;
      }
      for (size_t k = 0; k < d.shape.size(); ++k) {
        if (d.shape[k] < 0) {
          fail(ErrorCode::Usage, what, ": input '", d.name, "' of '", model.name(), "' has a symbolic dimension ",
               std::to_string(k), " ('", d.dim_names[k], "'); give its shape");
        }
      }
      shapes.push_back(d.shape);
    }
    return shapes;
  }
  if (!py::isinstance<py::sequence>(set) || py::isinstance<py::str>(set)) {
    fail(ErrorCode::Usage, what, " must be a dict {input name: shape} or a list of shapes, not ",
         std::string(py::repr(set)));
  }
  const py::sequence seq = py::reinterpret_borrow<py::sequence>(set);
  if (seq.size() > 0 && py::isinstance<py::int_>(seq[0])) {  // one shape
    if (inputs.size() != 1) {
      fail(ErrorCode::Usage, what, ": a shape alone names no input, but '", model.name(), "' has ",
           std::to_string(inputs.size()), " inputs; give {name: shape}");
    }
    shapes.push_back(to_shape(seq, "input '" + inputs[0].name + "'"));
    return shapes;
  }
  if (seq.size() != inputs.size()) {
    fail(ErrorCode::Usage, what, ": ", std::to_string(seq.size()), " shapes for the ", std::to_string(inputs.size()),
         " inputs of '", model.name(), "' (", names(), ")");
  }
  for (size_t i = 0; i < inputs.size(); ++i) shapes.push_back(to_shape(seq[i], "input '" + inputs[i].name + "'"));
  return shapes;
}

// The Python Model: the loaded model, and a Session that Model.run uses.
class PyModel {
 public:
  PyModel(const py::object& source, const std::string& device, const std::vector<int64_t>& batch_sizes, bool tuning,
          const std::string& tuning_cache, bool cuda_graphs, const std::vector<std::string>& disabled_passes,
          const std::string& force_kernel, const std::optional<std::string>& log_level,
          const std::optional<int64_t>& max_model_bytes, const std::optional<int64_t>& max_weight_bytes,
          const std::optional<int64_t>& max_activation_bytes, const std::optional<int64_t>& max_nodes,
          const std::optional<std::string>& name, const py::object& input_shapes) {
    cnnrt::Options o;
    o.device = parse_device(device);
    o.batch_sizes = batch_sizes;
    o.tuning = tuning;
    o.tuning_cache = tuning_cache;
    o.cuda_graphs = cuda_graphs;
    o.disabled_passes = disabled_passes;
    o.force_kernel = force_kernel;
    if (log_level) o.log_level = parse_log_level(*log_level);
    if (max_model_bytes) o.limits.max_model_bytes = *max_model_bytes;
    if (max_weight_bytes) o.limits.max_weight_bytes = *max_weight_bytes;
    if (max_activation_bytes) o.limits.max_activation_bytes = *max_activation_bytes;
    if (max_nodes) o.limits.max_nodes = *max_nodes;
    std::optional<cnnrt::Model> model;
    std::string path;
    if (py::isinstance<py::bytes>(source) || py::isinstance<py::bytearray>(source) ||
        py::isinstance<py::memoryview>(source)) {
      const std::string bytes = py::isinstance<py::bytes>(source)
                                    ? source.cast<std::string>()
                                    : py::bytes(py::module_::import("builtins").attr("bytes")(source)).cast<std::string>();
      const std::string label = name.value_or("<memory>");
      py::gil_scoped_release release;
      model = cnnrt::Model::load_from_memory(bytes.data(), bytes.size(), o, label);
    } else {
      path = py::str(py::module_::import("os").attr("fspath")(source));
      if (name) fail(ErrorCode::Usage, "name= names a model loaded from bytes; a file's model is named by its path");
      py::gil_scoped_release release;
      model = cnnrt::Model::load(path, o);
    }
    auto state = std::make_shared<ModelState>(ModelState{std::move(*model), o, path, 0});
    if (state->model.device() == cnnrt::Device::Gpu) state->device = cuda::current_device();
    // Options::input_shapes, once the inputs' names are known: the same plans, made the same way.
    if (!input_shapes.is_none()) {
      if (!py::isinstance<py::sequence>(input_shapes) || py::isinstance<py::str>(input_shapes)) {
        fail(ErrorCode::Usage, "input_shapes must be a list of shape sets (each a dict {input name: shape}, a list "
             "of shapes, or one shape for a one-input model)");
      }
      size_t i = 0;
      for (const py::handle set : input_shapes) {
        const std::string what = "input_shapes[" + std::to_string(i++) + "]";
        std::vector<Shape> shapes = shape_set(state->model, set, what);
        try {
          py::gil_scoped_release release;
          state->model.output_shapes(shapes);
        } catch (const cnnrt::Error& e) {
          throw cnnrt::Error(e.code(), what + ": " + e.what());
        }
        state->options.input_shapes.push_back(std::move(shapes));
      }
    }
    state_ = std::move(state);
  }

  const ModelState& state() const { return *state_; }
  const std::shared_ptr<const ModelState>& shared_state() const { return state_; }

  py::object run(const py::handle& inputs, bool as_dict, const py::object& output, const py::object& stream,
                 const py::object& out) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!session_) session_ = std::make_unique<Session>(state_, std::nullopt);
    }
    return session_->run(inputs, as_dict, output, stream, out);
  }

 private:
  std::shared_ptr<const ModelState> state_;
  std::mutex mutex_;
  std::unique_ptr<Session> session_;  // made on the first run()
};

// TensorDesc as Python sees it: symbolic dimensions by name (None when unnamed).
struct TensorInfo {
  std::string name;
  py::list shape;
};

py::list tensor_infos(const std::vector<cnnrt::TensorDesc>& descs) {
  py::list list;
  for (const cnnrt::TensorDesc& d : descs) {
    py::list shape;
    for (size_t k = 0; k < d.shape.size(); ++k) {
      const std::string& symbol = k < d.dim_names.size() ? d.dim_names[k] : std::string();
      if (d.shape[k] >= 0) shape.append(d.shape[k]);
      else if (symbol.empty() || symbol == "?") shape.append(py::none());
      else shape.append(symbol);
    }
    list.append(TensorInfo{d.name, shape});
  }
  return list;
}

int64_t batch_arg(const std::optional<int64_t>& batch) {
  if (!batch) return 0;
  if (*batch < 1) fail(ErrorCode::Usage, "batch must be at least 1, not ", std::to_string(*batch));
  return *batch;
}

py::object bench(const PyModel& self, const std::optional<int64_t>& batch, const py::object& input_shapes,
                 int iterations, double duration_s, double warmup_ms, bool include_transfers, bool report) {
  const ModelState& m = self.state();
  if (batch && !input_shapes.is_none()) fail(ErrorCode::Usage, "bench: give batch= or input_shapes=, not both");
  const py::object shapes = input_shapes.is_none() ? py::object(py::none())
                                                   : py::cast(shape_set(m.model, input_shapes, "input_shapes"));
  if (m.path.empty()) fail(ErrorCode::Usage, "bench() loads the model again from its file; this one was loaded from bytes");
  py::module_ bench_module;
  try {
    bench_module = py::module_::import("cnnrt._bench");
  } catch (py::error_already_set& e) {
    if (!e.matches(PyExc_ImportError)) throw;
    fail(ErrorCode::DeviceUnavailable, "bench() needs cnnrt._bench, which links cuDNN, and it did not load: ", e.what());
  }
  return bench_module.attr("bench_model")(m.path, batch.value_or(1), shapes, options_to_dict(m.options), iterations,
                                          duration_s, warmup_ms, include_transfers, report);
}

const char* kRunDoc = R"doc(
Run the model once.

inputs: a dict {input name: array}, a list of arrays in the model's input order, or one array for a model
    with one input. An array is a float32, C-contiguous NumPy array (or anything with the buffer protocol),
    or a GPU array: a PyTorch or CuPy tensor (``__dlpack__``) or any ``__cuda_array_interface__`` object,
    read in place. Its shape binds the model's symbolic dimensions. Other dtypes are refused, never
    converted: use ``a.astype(numpy.float32)``.
as_dict: return {output name: array} instead of a list in the model's output order.
output: 'numpy' (default): NumPy arrays. 'dlpack': DeviceArray objects in GPU memory, for
    ``torch.from_dlpack`` (zero copy). GPU models only.
stream: a CUDA stream (an int handle or an object with ``.cuda_stream``, such as
    ``torch.cuda.current_stream()``): the run is queued on it, after the work already there, and run()
    returns without waiting unless NumPy outputs need copying. Input arrays must then stay alive and
    unchanged until the stream reaches the run, as for any work queued on a stream (PyTorch's allocator
    ensures this for tensors of that stream). Without a stream, run() returns when the outputs are ready.
out: GPU arrays (list or dict, as the outputs) the outputs are written into, zero copy; run() returns them.

The GIL is released while the engine runs. Errors raise cnnrt.Error subclasses (InvalidInput for a wrong
name, count, shape, dtype, layout or device).)doc";

}  // namespace

}  // namespace cnnrt_python

using namespace cnnrt_python;  // NOLINT: the module's definitions below read as a table

PYBIND11_MODULE(_cnnrt, module) {
  module.doc() = "cnnrt: a small CNN inference engine (ONNX in, CPU reference backend, CUDA kernels).";
  define_errors(module);
  define_array_types(module);

  module.attr("__version__") = cnnrt::version();
  module.attr("with_cuda") = cuda::built_with_cuda();
  module.def("version", &cnnrt::version, "The engine's version, e.g. '0.1.0'.");
  module.def("supported_ops", &cnnrt::supported_ops, "The ONNX ops cnnrt runs (as `cnnrt ops` lists them).");
  module.def("graph_passes", &cnnrt::graph_passes,
             "The graph passes as (name, description) pairs; names are what disabled_passes takes.");
  module.def("set_log_level", [](const std::string& level) { cnnrt::set_log_level(parse_log_level(level)); },
             py::arg("level"),
             "Set the level of the engine's 'cnnrt' logger (stderr): 'trace', 'debug', 'info', 'warn' (the default), "
             "'error' or 'off'.");
  module.def("set_launch_overlap", &cnnrt::set_launch_overlap, py::arg("on"),
             "Process-wide, on by default: launch each GPU step while the previous one drains (Hopper). Off: plain "
             "launches, as `cnnrt --no-launch-overlap`.");
  module.def("read_tensor",
             [](const std::string& path) {
               std::string name;
               cnnrt::Tensor t;
               {
                 py::gil_scoped_release release;
                 t = cnnrt::read_tensor_file(path, &name);
               }
               return py::make_tuple(name, to_numpy(std::move(t)));
             },
             py::arg("path"),
             "Read a serialized ONNX TensorProto (input_0.pb, output_0.pb): returns (name, float32 array).");
  module.def("write_tensor",
             [](const std::string& path, const py::handle& array, const std::string& name) {
               DeviceRules host_only;
               host_only.why_not = "write_tensor takes host arrays";
               const ArrayView v = view_array(array, "the array", host_only, false);
               cnnrt::Tensor t;
               t.shape = v.shape;
               size_t count = 1;
               for (int64_t d : v.shape) count *= static_cast<size_t>(d);
               t.data.assign(v.data, v.data + count);
               py::gil_scoped_release release;
               cnnrt::write_tensor_file(path, t, name);
             },
             py::arg("path"), py::arg("array"), py::arg("name") = "",
             "Write a float32 array as a serialized ONNX TensorProto, as `cnnrt run --test-data` reads it.");

  py::class_<TensorInfo>(module, "TensorInfo", "A model input or output: name, shape, dtype.")
      .def_readonly("name", &TensorInfo::name)
      .def_readonly("shape", &TensorInfo::shape,
                    "One entry per dimension: its size, or for a symbolic dimension its name (None if unnamed).")
      .def_property_readonly("dtype", [](const TensorInfo&) { return "float32"; }, "Always 'float32'.")
      .def("__repr__", [](const TensorInfo& t) {
        return "TensorInfo(name=" + std::string(py::repr(py::str(t.name))) + ", shape=" + std::string(py::repr(t.shape)) +
               ", dtype='float32')";
      });

  py::class_<PyModel, std::shared_ptr<PyModel>>(module, "Model", R"doc(
An ONNX model, loaded, checked and planned (ONNX Runtime's InferenceSession, in cnnrt).

    m = cnnrt.Model("models/fashion_lenet.onnx", device="auto", batch_sizes=[1, 64])
    logits = m.run({"input": images})[0]

model: a path, or the model's bytes.
device: 'auto' (the GPU when one is usable, else the CPU with a warning), 'gpu' or 'cpu'.
batch_sizes: plans to prepare now; other batch sizes are planned on their first run.
input_shapes: more plans to prepare now, for models with symbolic dimensions besides the batch: a list of
    shape sets, each a dict {input name: shape}, a list of shapes in input order, or one shape for a model
    with one input (e.g. [(1, 1, 512, 512)]). Other shapes are planned on their first run.
tuning, tuning_cache, cuda_graphs, disabled_passes, force_kernel, log_level, max_*: as cnnrt::Options
    (docs/api.md) and the cnnrt tool's flags of the same names.
name: what error messages call a model loaded from bytes.

A Model may be shared by threads. run() on one Model is serialized; for runs in parallel, give each thread
its own cnnrt.Context.)doc")
      .def(py::init<const py::object&, const std::string&, const std::vector<int64_t>&, bool, const std::string&, bool,
                    const std::vector<std::string>&, const std::string&, const std::optional<std::string>&,
                    const std::optional<int64_t>&, const std::optional<int64_t>&, const std::optional<int64_t>&,
                    const std::optional<int64_t>&, const std::optional<std::string>&, const py::object&>(),
           py::arg("model"), py::arg("device") = "auto", py::arg("batch_sizes") = std::vector<int64_t>{}, py::kw_only(),
           py::arg("tuning") = true, py::arg("tuning_cache") = "", py::arg("cuda_graphs") = true,
           py::arg("disabled_passes") = std::vector<std::string>{}, py::arg("force_kernel") = "",
           py::arg("log_level") = py::none(), py::arg("max_model_bytes") = py::none(),
           py::arg("max_weight_bytes") = py::none(), py::arg("max_activation_bytes") = py::none(),
           py::arg("max_nodes") = py::none(), py::arg("name") = py::none(), py::arg("input_shapes") = py::none())
      .def_property_readonly("name", [](const PyModel& m) { return m.state().model.name(); },
                             "The model's name (its graph name, else the file name).")
      .def_property_readonly("path", [](const PyModel& m) -> py::object {
        return m.state().path.empty() ? py::object(py::none()) : py::object(py::str(m.state().path));
      }, "The file it was loaded from (None for bytes).")
      .def_property_readonly("inputs", [](const PyModel& m) { return tensor_infos(m.state().model.inputs()); },
                             "The inputs: a list of TensorInfo.")
      .def_property_readonly("outputs", [](const PyModel& m) { return tensor_infos(m.state().model.outputs()); },
                             "The outputs: a list of TensorInfo.")
      .def_property_readonly("metadata", [](const PyModel& m) { return m.state().model.metadata(); },
                             "The model's metadata_props (labels, normalisation, ...).")
      .def_property_readonly("device", [](const PyModel& m) { return cnnrt::to_string(m.state().model.device()); },
                             "The backend chosen at load: 'gpu' or 'cpu'.")
      .def("output_shapes",
           [](const PyModel& m, std::optional<int64_t> batch, const py::object& input_shapes) {
             const cnnrt::Model& model = m.state().model;
             if (!input_shapes.is_none()) {
               const std::vector<Shape> shapes = shape_set(model, input_shapes, "input_shapes");
               if (batch) fail(ErrorCode::Usage, "output_shapes: give batch or input_shapes, not both");
               py::gil_scoped_release release;
               return model.output_shapes(shapes);
             }
             const int64_t b = batch_arg(batch);
             py::gil_scoped_release release;
             return model.output_shapes(b);
           },
           py::arg("batch") = py::none(), py::kw_only(), py::arg("input_shapes") = py::none(),
           "The output shapes for a batch size, or for input_shapes (a dict {input name: shape}, a list of shapes, "
           "or one shape for a one-input model). Neither: as declared, a symbolic batch as 1.")
      .def("explain",
           [](const PyModel& m, std::optional<int64_t> batch, const py::object& input_shapes) {
             const cnnrt::Model& model = m.state().model;
             if (!input_shapes.is_none()) {
               const std::vector<Shape> shapes = shape_set(model, input_shapes, "input_shapes");
               if (batch) fail(ErrorCode::Usage, "explain: give batch or input_shapes, not both");
               py::gil_scoped_release release;
               return model.describe_plan(shapes, true);
             }
             const int64_t b = batch_arg(batch);
             py::gil_scoped_release release;
             return model.describe_plan(b, true);
           },
           py::arg("batch") = py::none(), py::kw_only(), py::arg("input_shapes") = py::none(),
           "The plan as `cnnrt plan --explain` prints it: steps, kernels with their measured runners-up, shapes "
           "and the memory plan, for a batch size or input_shapes (as output_shapes takes them; neither: as "
           "declared).")
      .def("run", &PyModel::run, py::arg("inputs"), py::kw_only(), py::arg("as_dict") = false,
           py::arg("output") = py::none(), py::arg("stream") = py::none(), py::arg("out") = py::none(), kRunDoc)
      .def("bench", &bench, py::kw_only(), py::arg("batch") = py::none(), py::arg("input_shapes") = py::none(),
           py::arg("iterations") = 200,
           py::arg("duration_s") = 0.0, py::arg("warmup_ms") = 200.0, py::arg("include_transfers") = false,
           py::arg("report") = false, R"doc(
Time the model on the GPU beside cuDNN, as `cnnrt bench MODEL --batch N` (or --shape) does (random inputs;
the model is loaded again from its file with this model's options). batch: images per run (default 1);
input_shapes: explicit shapes instead, as output_shapes takes them.

Returns one dict per planned step: step, nodes, kernel, output_shape, ours_us (median GPU time), share (of
the sum of steps), floor_us, and for convolutions alone_us (the step alone, back to back, as cuDNN is timed)
and cuDNN's figures: cudnn_algo, cudnn_us, speedup (cudnn_us / alone_us), rel_error, mismatch. report=True
returns the whole report instead (latency, throughput, transfers, steps).
Raises DeviceUnavailable without a GPU or in a build without CUDA.)doc")
      .def("__repr__", [](const PyModel& m) {
        return "cnnrt.Model(" + std::string(py::repr(py::str(m.state().model.name()))) + ", device='" +
               cnnrt::to_string(m.state().model.device()) + "')";
      });

  py::class_<Session>(module, "Context", R"doc(
A run context: its own activation memory and CUDA graphs, for one thread at a time.

    ctx = cnnrt.Context(model)        # one per thread
    out = ctx.run({"input": x})

Contexts of one model share its weights and run in parallel (the GIL is released while they run).
stream: the CUDA stream run() uses when it is given none.)doc")
      .def(py::init([](const std::shared_ptr<PyModel>& model, const py::object& stream) {
             const std::shared_ptr<const ModelState>& state = model->shared_state();
             std::optional<uintptr_t> handle;
             if (!stream.is_none()) {
               handle = stream_handle(stream);
               if (state->model.device() != cnnrt::Device::Gpu) {
                 fail(ErrorCode::DeviceUnavailable, "stream= orders runs on a CUDA stream, but ", why_no_gpu(*state));
               }
             }
             return std::make_unique<Session>(state, handle);
           }),
           py::arg("model"), py::arg("stream") = py::none())
      .def_property_readonly("stream", [](const Session& s) -> py::object {
        return s.default_stream() ? py::object(py::int_(*s.default_stream())) : py::object(py::none());
      }, "The stream given at construction (None: the context's own).")
      .def("run", &Session::run, py::arg("inputs"), py::kw_only(), py::arg("as_dict") = false,
           py::arg("output") = py::none(), py::arg("stream") = py::none(), py::arg("out") = py::none(), kRunDoc);
}
