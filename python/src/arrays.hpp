// Arrays in and out of cnnrt: what run() accepts (NumPy and anything with the buffer protocol, DLPack
// producers such as PyTorch and CuPy tensors, __cuda_array_interface__ objects) and what it returns
// (NumPy arrays over the engine's own output vectors; DeviceArray over device memory, for DLPack consumers).
// Nothing is converted silently: an array must be float32 and C-contiguous, or it is refused naming the
// input, its dtype or strides, and the fix.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cnnrt/cnnrt.hpp"
#include "cuda_interop.hpp"

namespace cnnrt_python {

namespace py = pybind11;

// "1x1x28x28", as the engine's messages write shapes.
std::string shape_str(const std::vector<int64_t>& shape);

// How the bindings may take device arrays for the model at hand.
struct DeviceRules {
  bool gpu_model = false;      // false: any device array is refused with DeviceUnavailable
  std::string why_not;         // the reason, for that message
  int device = 0;              // the CUDA device the model runs on
  uintptr_t dlpack_stream = 1; // the stream handed to __dlpack__: the producer orders its work before it
};

// One array as the engine will read (or, for out=, write) it.
struct ArrayView {
  std::vector<int64_t> shape;
  float* data = nullptr;
  bool on_device = false;
  // A __cuda_array_interface__ producer's stream: the run waits for it (none: nothing to wait for).
  std::optional<uintptr_t> producer_stream;
  // Keeps the memory alive (a Py_buffer, a DLPack tensor, the Python object). Released with the GIL held.
  std::shared_ptr<void> owner;
};

// `what` names the array in messages ("input 'x'", "out[0]"). writable: the array receives an output.
ArrayView view_array(py::handle object, const std::string& what, const DeviceRules& rules, bool writable);

// A host tensor the engine filled, as a NumPy array that owns it (no copy).
py::object to_numpy(cnnrt::Tensor&& tensor);

// Device memory holding one float32 output, for DLPack consumers (torch.from_dlpack) and
// __cuda_array_interface__ ones (CuPy, Numba). The memory lives as long as this object or any tensor a
// consumer made from it.
class DeviceArray {
 public:
  DeviceArray(std::shared_ptr<cuda::DeviceBuffer> buffer, std::vector<int64_t> shape,
              std::shared_ptr<cuda::Event> ready, std::optional<uintptr_t> stream);

  const std::vector<int64_t>& shape() const { return shape_; }
  uintptr_t data_ptr() const { return reinterpret_cast<uintptr_t>(buffer_->data()); }
  int device() const { return buffer_->device(); }
  size_t nbytes() const { return buffer_->bytes(); }

  py::object dlpack(const py::object& stream, const py::object& max_version, const py::object& dl_device,
                    const py::object& copy) const;
  py::tuple dlpack_device() const;
  py::dict cuda_array_interface() const;
  py::object numpy() const;  // a host copy, once the run that produced it is done
  std::string repr() const;

 private:
  std::shared_ptr<cuda::DeviceBuffer> buffer_;
  std::vector<int64_t> shape_;
  std::shared_ptr<cuda::Event> ready_;  // recorded after the run, when the run was left in flight
  std::optional<uintptr_t> stream_;     // the caller's stream the run was ordered on
};

void define_array_types(py::module_& module);

}  // namespace cnnrt_python
