#include "arrays.hpp"

#include <pybind11/stl.h>

#include <cstring>

#include "dlpack.hpp"
#include "errors.hpp"

namespace cnnrt_python {

namespace {

using cnnrt::ErrorCode;

constexpr const char* kConvertHint =
    "convert it first (numpy: a.astype(numpy.float32); PyTorch: t.float()); cnnrt never converts silently";
constexpr const char* kContiguousHint = "pass numpy.ascontiguousarray(a), or t.contiguous() for a tensor";

std::string dtype_name(char kind, size_t bytes) {
  const std::string bits = std::to_string(bytes * 8);
  switch (kind) {
    case 'f': return bytes == 2 ? "float16" : "float" + bits;
    case 'i': return "int" + bits;
    case 'u': return "uint" + bits;
    case 'b': return "bool";
    case 'c': return "complex" + bits;
    default: return std::string("'") + kind + "' of " + std::to_string(bytes) + " bytes";
  }
}

// The dtype of a PEP 3118 format string (struct module codes, with an optional byte-order prefix).
std::string buffer_dtype_name(const char* format, size_t itemsize) {
  std::string f = format ? format : "B";
  std::string order;
  if (!f.empty() && (f[0] == '<' || f[0] == '>' || f[0] == '=' || f[0] == '@' || f[0] == '!')) {
    if (f[0] == '>' || f[0] == '!') order = " (big-endian)";
    f.erase(0, 1);
  }
  if (f.size() == 2 && f[0] == 'Z') return dtype_name('c', itemsize) + order;  // complex: "Zf", "Zd"
  if (f.size() != 1) return "'" + std::string(format) + "'";
  switch (f[0]) {
    case 'f': case 'd': case 'e': return dtype_name('f', itemsize) + order;
    case 'b': case 'h': case 'i': case 'l': case 'q': case 'n': return dtype_name('i', itemsize) + order;
    case 'B': case 'H': case 'I': case 'L': case 'Q': case 'N': return dtype_name('u', itemsize) + order;
    case '?': return "bool";
    default: return "'" + std::string(format) + "'";
  }
}

bool is_float32_format(const char* format, size_t itemsize) {
  if (itemsize != 4 || format == nullptr) return false;
  return std::strcmp(format, "f") == 0 || std::strcmp(format, "<f") == 0 || std::strcmp(format, "=f") == 0 ||
         std::strcmp(format, "@f") == 0;
}

std::string dlpack_dtype_name(const dlpack::DLDataType& t) {
  std::string name;
  switch (t.code) {
    case dlpack::kDLFloat: name = "float" + std::to_string(t.bits); break;
    case dlpack::kDLInt: name = "int" + std::to_string(t.bits); break;
    case dlpack::kDLUInt: name = "uint" + std::to_string(t.bits); break;
    case dlpack::kDLBfloat: name = "bfloat" + std::to_string(t.bits); break;
    case dlpack::kDLComplex: name = "complex" + std::to_string(t.bits); break;
    case dlpack::kDLBool: name = "bool"; break;
    default: name = "DLPack type code " + std::to_string(t.code) + " of " + std::to_string(t.bits) + " bits";
  }
  if (t.lanes != 1) name += "x" + std::to_string(t.lanes);
  return name;
}

void refuse_dtype(const std::string& what, const std::string& dtype) {
  fail(ErrorCode::InvalidInput, what, " has dtype ", dtype, ", but cnnrt models take float32: ", kConvertHint);
}

// Strides in elements of a C-contiguous array (dimensions of size 1 may have any stride).
void check_contiguous(const std::string& what, const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                      const char* unit) {
  int64_t expected = 1;
  bool ok = true;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] != 1 && strides[d] != expected) ok = false;
    expected *= shape[d];
  }
  if (ok) return;
  std::string s;
  for (size_t d = 0; d < strides.size(); ++d) s += (d ? ", " : "") + std::to_string(strides[d]);
  fail(ErrorCode::InvalidInput, what, " is not C-contiguous (shape ", shape_str(shape), ", strides (", s, ") ", unit,
       "): ", kContiguousHint);
}

void check_device_array(const std::string& what, const DeviceRules& rules, int device, const void* data) {
  if (device != rules.device) {
    fail(ErrorCode::InvalidInput, what, " is on cuda:", std::to_string(device), ", but the model runs on cuda:",
         std::to_string(rules.device));
  }
  // The engine's kernels may read and write whole float4s; PyTorch and CuPy allocations are aligned far
  // beyond this, a view at an odd offset may not be.
  if (reinterpret_cast<uintptr_t>(data) % 16 != 0) {
    fail(ErrorCode::InvalidInput, what, " starts at a device address that is not 16-byte aligned (a view at an ",
         "offset into another tensor): pass a copy (t.clone())");
  }
}

void require_gpu(const std::string& what, const DeviceRules& rules) {
  if (!rules.gpu_model) fail(ErrorCode::DeviceUnavailable, what, " is in GPU memory, but ", rules.why_not);
}

// Runs `release` with the GIL held, whichever thread drops the last reference.
template <class T, class Release>
std::shared_ptr<void> owning(T* pointer, Release release) {
  return std::shared_ptr<void>(pointer, [release](void* p) {
    PyGILState_STATE state = PyGILState_Ensure();
    release(static_cast<T*>(p));
    PyGILState_Release(state);
  });
}

ArrayView from_buffer(py::handle object, const std::string& what, bool writable) {
  auto* view = new Py_buffer{};
  const int flags = PyBUF_STRIDES | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
  if (PyObject_GetBuffer(object.ptr(), view, flags) != 0) {
    delete view;
    py::error_already_set python_error;
    fail(ErrorCode::InvalidInput, what, ": its buffer cannot be read as an array (", python_error.what(), ")");
  }
  ArrayView a;
  a.owner = owning(view, [](Py_buffer* v) {
    PyBuffer_Release(v);
    delete v;
  });
  if (!is_float32_format(view->format, static_cast<size_t>(view->itemsize))) {
    refuse_dtype(what, buffer_dtype_name(view->format, static_cast<size_t>(view->itemsize)));
  }
  a.shape.assign(view->shape, view->shape + view->ndim);
  std::vector<int64_t> strides(view->strides, view->strides + view->ndim);
  for (int64_t& s : strides) s /= 4;  // bytes -> elements (float32)
  for (int d = 0; d < view->ndim; ++d) {
    if (view->strides[d] % 4 != 0) strides[d] = -1;  // not a whole number of floats: never contiguous
  }
  check_contiguous(what, a.shape, strides, "elements");
  a.data = static_cast<float*>(view->buf);
  return a;
}

// Takes the tensor out of a DLPack capsule (renaming it, so that its destructor leaves the tensor to us).
ArrayView from_dlpack(py::handle object, const std::string& what, const DeviceRules& rules, bool writable) {
  const py::tuple device = object.attr("__dlpack_device__")();
  const int type = device[0].cast<int>();
  const int id = device[1].cast<int>();
  const bool on_device = type == dlpack::kDLCUDA || type == dlpack::kDLCUDAManaged;
  if (!on_device && type != dlpack::kDLCPU && type != dlpack::kDLCUDAHost) {
    fail(ErrorCode::InvalidInput, what, " is on DLPack device type ", std::to_string(type),
         "; cnnrt takes host (CPU) and CUDA arrays");
  }
  if (on_device) require_gpu(what, rules);
  const py::object capsule = on_device ? object.attr("__dlpack__")(py::arg("stream") = rules.dlpack_stream)
                                       : object.attr("__dlpack__")();
  PyObject* cap = capsule.ptr();
  ArrayView a;
  a.on_device = on_device;
  dlpack::DLTensor* t = nullptr;
  if (PyCapsule_IsValid(cap, dlpack::kCapsuleName)) {
    auto* m = static_cast<dlpack::DLManagedTensor*>(PyCapsule_GetPointer(cap, dlpack::kCapsuleName));
    PyCapsule_SetName(cap, dlpack::kUsedCapsuleName);
    a.owner = owning(m, [](dlpack::DLManagedTensor* p) {
      if (p->deleter) p->deleter(p);
    });
    t = &m->dl_tensor;
  } else if (PyCapsule_IsValid(cap, dlpack::kVersionedCapsuleName)) {
    auto* m = static_cast<dlpack::DLManagedTensorVersioned*>(PyCapsule_GetPointer(cap, dlpack::kVersionedCapsuleName));
    PyCapsule_SetName(cap, dlpack::kUsedVersionedCapsuleName);
    a.owner = owning(m, [](dlpack::DLManagedTensorVersioned* p) {
      if (p->deleter) p->deleter(p);
    });
    if (m->version.major != dlpack::kMajorVersion) {
      fail(ErrorCode::InvalidInput, what, " is a DLPack ", std::to_string(m->version.major), ".",
           std::to_string(m->version.minor), " tensor; cnnrt reads DLPack 1.x");
    }
    if (writable && (m->flags & dlpack::kFlagReadOnly)) {
      fail(ErrorCode::InvalidInput, what, " is read-only; an output needs a writable tensor");
    }
    t = &m->dl_tensor;
  } else {
    fail(ErrorCode::InvalidInput, what, ": its __dlpack__() returned no DLPack capsule");
  }
  if (t->dtype.code != dlpack::kDLFloat || t->dtype.bits != 32 || t->dtype.lanes != 1) {
    refuse_dtype(what, dlpack_dtype_name(t->dtype));
  }
  if (t->ndim < 0 || (t->ndim > 0 && t->shape == nullptr)) {
    fail(ErrorCode::InvalidInput, what, ": its DLPack tensor has no shape");
  }
  a.shape.assign(t->shape, t->shape + t->ndim);
  if (t->strides != nullptr) {
    check_contiguous(what, a.shape, std::vector<int64_t>(t->strides, t->strides + t->ndim), "elements");
  }
  a.data = reinterpret_cast<float*>(static_cast<char*>(t->data) + t->byte_offset);
  if (on_device) check_device_array(what, rules, id, a.data);
  return a;
}

// __cuda_array_interface__, version 2 or 3 (Numba's spec): shape, typestr, data, strides, stream.
ArrayView from_cuda_array_interface(py::handle object, const std::string& what, const DeviceRules& rules,
                                    bool writable) {
  require_gpu(what, rules);
  const py::dict cai = object.attr("__cuda_array_interface__");
  ArrayView a;
  a.on_device = true;
  a.owner = owning(object.inc_ref().ptr(), [](PyObject* o) { Py_DECREF(o); });
  a.shape = cai["shape"].cast<std::vector<int64_t>>();
  const std::string typestr = cai["typestr"].cast<std::string>();
  if (typestr != "<f4" && typestr != "=f4") {
    const char kind = typestr.size() >= 3 ? typestr[1] : '?';
    const size_t bytes = typestr.size() >= 3 ? std::stoul(typestr.substr(2)) : 0;
    refuse_dtype(what, typestr[0] == '>' ? dtype_name(kind, bytes) + " (big-endian)" : dtype_name(kind, bytes));
  }
  if (cai.contains("mask") && !cai["mask"].is_none()) {
    fail(ErrorCode::InvalidInput, what, " is a masked array; cnnrt takes plain arrays");
  }
  const py::tuple data = cai["data"];
  if (writable && data[1].cast<bool>()) {
    fail(ErrorCode::InvalidInput, what, " is read-only; an output needs a writable array");
  }
  if (cai.contains("strides") && !cai["strides"].is_none()) {
    std::vector<int64_t> strides = cai["strides"].cast<std::vector<int64_t>>();
    for (int64_t& s : strides) s = s % 4 == 0 ? s / 4 : -1;
    check_contiguous(what, a.shape, strides, "elements");
  }
  a.data = reinterpret_cast<float*>(data[0].cast<uintptr_t>());
  if (cai.contains("stream") && !cai["stream"].is_none()) a.producer_stream = cai["stream"].cast<uintptr_t>();
  const int device = cuda::device_of(a.data);
  if (device < 0) fail(ErrorCode::InvalidInput, what, " says it is a CUDA array, but its pointer is not device memory");
  check_device_array(what, rules, device, a.data);
  return a;
}

// The host tensor a NumPy array wraps: NumPy reads it through the buffer protocol and keeps it alive.
struct HostBuffer {
  cnnrt::Tensor tensor;
};

// The capsule that owns a DLPack tensor we exported: if no consumer took it, its tensor is deleted here.
template <class Managed>
void delete_unconsumed(PyObject* capsule, const char* name) {
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);  // a destructor must not disturb a pending exception
  if (PyCapsule_IsValid(capsule, name)) {
    auto* m = static_cast<Managed*>(PyCapsule_GetPointer(capsule, name));
    if (m && m->deleter) m->deleter(m);
  }
  PyErr_Restore(type, value, traceback);
}

// What an exported tensor keeps: the device memory and the shape its DLTensor points at.
struct ExportedTensor {
  std::shared_ptr<cuda::DeviceBuffer> buffer;
  std::vector<int64_t> shape;
};

template <class Managed>
Managed* export_tensor(const std::shared_ptr<cuda::DeviceBuffer>& buffer, const std::vector<int64_t>& shape) {
  auto* context = new ExportedTensor{buffer, shape};
  auto* m = new Managed{};
  m->manager_ctx = context;
  // Called by the consumer when its tensor dies, from any thread, with or without the GIL: no Python here.
  m->deleter = [](Managed* self) {
    delete static_cast<ExportedTensor*>(self->manager_ctx);
    delete self;
  };
  dlpack::DLTensor& t = m->dl_tensor;
  t.data = buffer->data();
  t.device = {dlpack::kDLCUDA, buffer->device()};
  t.ndim = static_cast<int32_t>(shape.size());
  t.dtype = {dlpack::kDLFloat, 32, 1};
  t.shape = context->shape.data();
  t.strides = nullptr;  // compact row-major
  t.byte_offset = 0;
  return m;
}

}  // namespace

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s;
  for (size_t d = 0; d < shape.size(); ++d) s += (d ? "x" : "") + std::to_string(shape[d]);
  return s.empty() ? "[]" : s;
}

ArrayView view_array(py::handle object, const std::string& what, const DeviceRules& rules, bool writable) {
  // A GPU array may offer the buffer protocol only to refuse it (CuPy does): its device protocols come first.
  const bool device_array = py::hasattr(object, "__cuda_array_interface__");
  if (!device_array && PyObject_CheckBuffer(object.ptr())) return from_buffer(object, what, writable);
  if (py::hasattr(object, "__dlpack__") && py::hasattr(object, "__dlpack_device__")) {
    return from_dlpack(object, what, rules, writable);
  }
  if (py::hasattr(object, "__cuda_array_interface__")) {
    return from_cuda_array_interface(object, what, rules, writable);
  }
  if (py::hasattr(object, "__array__") || py::hasattr(object, "__array_interface__")) {
    // An array-like with NumPy's protocols only (a PIL image, a pandas frame): NumPy gives the buffer.
    const py::object array = py::module_::import("numpy").attr("asarray")(object);
    ArrayView a = from_buffer(array, what, writable);
    return a;
  }
  fail(ErrorCode::InvalidInput, what, " is a ", std::string(py::str(py::type::handle_of(object).attr("__name__"))),
       "; pass a float32 NumPy array, or a PyTorch or CuPy tensor");
}

py::object to_numpy(cnnrt::Tensor&& tensor) {
  static const py::handle asarray = py::object(py::module_::import("numpy").attr("asarray")).release();
  py::object holder = py::cast(HostBuffer{std::move(tensor)});
  return asarray(holder);
}

DeviceArray::DeviceArray(std::shared_ptr<cuda::DeviceBuffer> buffer, std::vector<int64_t> shape,
                         std::shared_ptr<cuda::Event> ready, std::optional<uintptr_t> stream)
    : buffer_(std::move(buffer)), shape_(std::move(shape)), ready_(std::move(ready)), stream_(stream) {}

py::object DeviceArray::dlpack(const py::object& stream, const py::object& max_version, const py::object& dl_device,
                               const py::object& copy) const {
  if (!copy.is_none() && copy.cast<bool>()) {
    throw py::buffer_error("cnnrt.DeviceArray.__dlpack__ cannot copy (copy=True); it shares its device memory");
  }
  if (!dl_device.is_none()) {
    const py::tuple want = dl_device;
    if (want[0].cast<int>() != dlpack::kDLCUDA || want[1].cast<int>() != device()) {
      throw py::buffer_error("cnnrt.DeviceArray lives on cuda:" + std::to_string(device()) +
                             " and cannot be exported to another device");
    }
  }
  // The consumer's stream waits for the run that produced this array (None means the legacy default
  // stream, -1 asks for no ordering).
  if (ready_) {
    const int64_t handle = stream.is_none() ? 1 : stream.cast<int64_t>();
    if (handle != -1) ready_->make_wait(cuda::stream_from_handle(static_cast<uintptr_t>(handle)));
  }
  const bool versioned = !max_version.is_none() && py::tuple(max_version)[0].cast<int>() >= 1;
  PyObject* capsule = nullptr;
  if (versioned) {
    auto* m = export_tensor<dlpack::DLManagedTensorVersioned>(buffer_, shape_);
    m->version = {dlpack::kMajorVersion, dlpack::kMinorVersion};
    m->flags = 0;
    capsule = PyCapsule_New(m, dlpack::kVersionedCapsuleName, [](PyObject* c) {
      delete_unconsumed<dlpack::DLManagedTensorVersioned>(c, dlpack::kVersionedCapsuleName);
    });
    if (!capsule) m->deleter(m);
  } else {
    auto* m = export_tensor<dlpack::DLManagedTensor>(buffer_, shape_);
    capsule = PyCapsule_New(m, dlpack::kCapsuleName,
                            [](PyObject* c) { delete_unconsumed<dlpack::DLManagedTensor>(c, dlpack::kCapsuleName); });
    if (!capsule) m->deleter(m);
  }
  if (!capsule) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(capsule);
}

py::tuple DeviceArray::dlpack_device() const { return py::make_tuple(dlpack::kDLCUDA, device()); }

py::dict DeviceArray::cuda_array_interface() const {
  py::dict d;
  d["shape"] = py::tuple(py::cast(shape_));
  d["typestr"] = "<f4";
  d["data"] = py::make_tuple(data_ptr(), false);
  d["version"] = 3;
  d["strides"] = py::none();
  // Where the data is produced: the consumer orders its work after that stream (0 is not allowed there).
  if (stream_) d["stream"] = *stream_ == 0 ? 1 : *stream_;
  else d["stream"] = py::none();
  return d;
}

py::object DeviceArray::numpy() const {
  cnnrt::Tensor host;
  host.shape = shape_;
  host.data.resize(buffer_->bytes() / sizeof(float));
  {
    py::gil_scoped_release release;
    if (ready_) ready_->synchronize();
    const cnnrt::Stream per_thread = cuda::stream_from_handle(2);
    cuda::copy_to_host(host.data.data(), buffer_->data(), buffer_->bytes(), per_thread);
    cuda::synchronize(per_thread);
  }
  return to_numpy(std::move(host));
}

std::string DeviceArray::repr() const {
  std::string s = "DeviceArray(shape=(";
  for (size_t d = 0; d < shape_.size(); ++d) s += (d ? ", " : "") + std::to_string(shape_[d]);
  if (shape_.size() == 1) s += ",";
  return s + "), dtype=float32, device='cuda:" + std::to_string(device()) + "')";
}

void define_array_types(py::module_& module) {
  py::class_<HostBuffer>(module, "_HostBuffer", py::buffer_protocol(),
                         "The engine's output vector under a NumPy array (internal).")
      .def_buffer([](HostBuffer& b) {
        static float empty = 0;  // a zero-sized output still needs an address
        std::vector<py::ssize_t> shape(b.tensor.shape.begin(), b.tensor.shape.end());
        std::vector<py::ssize_t> strides(shape.size());
        py::ssize_t stride = sizeof(float);
        for (size_t d = shape.size(); d-- > 0;) {
          strides[d] = stride;
          stride *= shape[d];
        }
        return py::buffer_info(b.tensor.data.empty() ? &empty : b.tensor.data.data(), sizeof(float),
                               py::format_descriptor<float>::format(), static_cast<py::ssize_t>(shape.size()), shape,
                               strides);
      });

  py::class_<DeviceArray>(module, "DeviceArray", R"doc(
A float32 output in GPU memory, returned by ``run(..., output="dlpack")``.

Zero copy into PyTorch (``torch.from_dlpack(a)``), CuPy (``cupy.from_dlpack(a)``) or anything that reads
``__cuda_array_interface__``. The memory stays valid while this object or any tensor made from it lives.
``numpy()`` copies it to the host.)doc")
      .def_property_readonly("shape", [](const DeviceArray& a) { return py::tuple(py::cast(a.shape())); },
                             "The shape, a tuple of ints.")
      .def_property_readonly("dtype", [](const DeviceArray&) { return "float32"; }, "Always 'float32'.")
      .def_property_readonly("device", [](const DeviceArray& a) { return "cuda:" + std::to_string(a.device()); },
                             "'cuda:N'.")
      .def_property_readonly("data_ptr", &DeviceArray::data_ptr, "The device address of the first element.")
      .def_property_readonly("nbytes", &DeviceArray::nbytes, "Size in bytes.")
      .def("__dlpack__", &DeviceArray::dlpack, py::kw_only(), py::arg("stream") = py::none(),
           py::arg("max_version") = py::none(), py::arg("dl_device") = py::none(), py::arg("copy") = py::none(),
           "A DLPack capsule of this array (the Python array API's protocol). The consumer's `stream` waits "
           "for the run that produced it.")
      .def("__dlpack_device__", &DeviceArray::dlpack_device, "(2, device): a CUDA array.")
      .def_property_readonly("__cuda_array_interface__", &DeviceArray::cuda_array_interface,
                             "Numba's CUDA Array Interface, version 3.")
      .def("numpy", &DeviceArray::numpy, "A NumPy copy, once the run that produced it has finished.")
      .def("__repr__", &DeviceArray::repr);
}

}  // namespace cnnrt_python
