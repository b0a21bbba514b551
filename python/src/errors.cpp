#include "errors.hpp"

#include <array>
#include <exception>
#include <new>

namespace cnnrt_python {

namespace {

using cnnrt::ErrorCode;

struct ErrorClass {
  ErrorCode code;
  const char* name;
  bool value_error;  // also a ValueError: the caller passed something wrong
  const char* doc;
};

constexpr std::array<ErrorClass, 9> kClasses{{
    {ErrorCode::Usage, "UsageError", true, "An impossible request: a bad option or argument (exit code 2)."},
    {ErrorCode::Unsupported, "UnsupportedModel", false,
     "The model uses an op, attribute, type or shape cnnrt cannot run (exit code 3)."},
    {ErrorCode::InvalidModel, "InvalidModel", false,
     "Not a valid ONNX model, or a model that contradicts itself (exit code 4)."},
    {ErrorCode::InvalidInput, "InvalidInput", true,
     "An input is wrong: count, name, shape, dtype, layout or device (exit code 4)."},
    {ErrorCode::Io, "IoError", false, "A file could not be read or written (exit code 4)."},
    {ErrorCode::DeviceUnavailable, "DeviceUnavailable", false,
     "A GPU was required but none is usable, or this build has no CUDA (exit code 5)."},
    {ErrorCode::LimitExceeded, "LimitExceeded", false, "A memory or size limit would be exceeded (exit code 6)."},
    {ErrorCode::DeviceError, "DeviceError", false, "A CUDA call failed (exit code 7)."},
    {ErrorCode::Internal, "InternalError", false, "A bug in cnnrt: please report it (exit code 8)."},
}};

// The classes, by ErrorCode order; owned for the life of the process (never freed: exceptions may be
// raised while the interpreter shuts down).
std::array<PyObject*, kClasses.size()> g_classes{};
PyObject* g_base = nullptr;

PyObject* class_for(ErrorCode code) {
  for (size_t i = 0; i < kClasses.size(); ++i) {
    if (kClasses[i].code == code) return g_classes[i];
  }
  return g_classes.back();  // Internal
}

void register_translator() {
  // Local: only this extension's functions, never those of another pybind11 module in the process.
  py::register_local_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const cnnrt::Error& e) {
      PyErr_SetString(class_for(e.code()), e.what());
    } catch (const py::error_already_set&) {
      throw;  // a Python exception on its way through: pybind11 restores it
    } catch (const py::builtin_exception&) {
      throw;  // pybind11's own TypeError, ValueError...
    } catch (const std::bad_alloc&) {
      throw;  // MemoryError
    } catch (const std::exception& e) {
      // Anything else from the engine is a bug, as the cnnrt tool reports it (exit code 8).
      PyErr_SetString(class_for(ErrorCode::Internal), (std::string("internal: ") + e.what()).c_str());
    }
  });
}

}  // namespace

void define_errors(py::module_& module) {
  g_base = PyErr_NewExceptionWithDoc(
      "cnnrt.Error",
      "Base class of every cnnrt error. `code` is the exit status the cnnrt tool uses for the same error; "
      "the message is the one the tool prints after 'error: '.",
      PyExc_RuntimeError, nullptr);
  if (!g_base) throw py::error_already_set();
  module.add_object("Error", py::handle(g_base).inc_ref());
  for (size_t i = 0; i < kClasses.size(); ++i) {
    const ErrorClass& c = kClasses[i];
    py::tuple bases = c.value_error ? py::make_tuple(py::handle(g_base), py::handle(PyExc_ValueError))
                                    : py::make_tuple(py::handle(g_base));
    const std::string qualified = std::string("cnnrt.") + c.name;
    PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), c.doc, bases.ptr(), nullptr);
    if (!cls) throw py::error_already_set();
    py::handle(cls).attr("code") = cnnrt::exit_code(c.code);
    g_classes[i] = cls;
    module.add_object(c.name, py::handle(cls).inc_ref());
  }
  register_translator();
}

void use_errors_of(const py::module_& source) {
  g_base = py::object(source.attr("Error")).release().ptr();
  for (size_t i = 0; i < kClasses.size(); ++i) g_classes[i] = py::object(source.attr(kClasses[i].name)).release().ptr();
  register_translator();
}

}  // namespace cnnrt_python
