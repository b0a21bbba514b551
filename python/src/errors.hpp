// cnnrt::Error as Python exceptions: one class per ErrorCode under cnnrt.Error, each with the message the
// cnnrt tool prints after "error: " and, as `code`, the tool's exit status for it.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "cnnrt/cnnrt.hpp"

namespace cnnrt_python {

namespace py = pybind11;

// Creates cnnrt.Error and its subclasses in `module` and translates cnnrt::Error into them.
void define_errors(py::module_& module);
// The same translation in another extension, with the classes `source` defined.
void use_errors_of(const py::module_& source);

// Throws cnnrt::Error: the binding's own checks fail the way the engine's do.
template <class... Parts>
[[noreturn]] void fail(cnnrt::ErrorCode code, const Parts&... parts) {
  std::string message;
  (message.append(parts), ...);
  throw cnnrt::Error(code, message);
}

}  // namespace cnnrt_python
