// The few CUDA runtime calls the bindings make themselves: device memory for the arrays run() returns,
// copies between host and device, and events that order one stream after another. In a build without CUDA
// (cuda_interop_without_cuda.cpp) every call throws DeviceUnavailable; the bindings check the model's
// device first, so they are not reached there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "cnnrt/cnnrt.hpp"

namespace cnnrt_python::cuda {

bool built_with_cuda();

// A stream handle as the Python protocols pass it (__dlpack__'s `stream`, __cuda_array_interface__'s
// `stream`, torch's `cuda_stream`): 0 and 1 are the legacy default stream, 2 the per-thread default stream.
cnnrt::Stream stream_from_handle(uintptr_t handle);
// The handle __dlpack__ expects for a stream (the legacy default stream is 1, never 0).
uintptr_t dlpack_handle(cnnrt::Stream stream);
bool is_default_stream(uintptr_t handle);  // 0, 1 or 2: no stream the engine may capture a graph on

int current_device();
// The device a pointer's memory lives on; -1 when it is not device (or managed) memory.
int device_of(const void* pointer);

// Device memory from cudaMalloc. The destructor calls cudaFree, which waits for work that may still use it.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  int device() const { return device_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  int device_ = 0;
};

// An event without timing: recorded on one stream, waited for by another or by the host.
class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(cnnrt::Stream stream);
  void make_wait(cnnrt::Stream stream) const;  // work queued on `stream` after this waits for the event
  void synchronize() const;

 private:
  void* event_ = nullptr;  // cudaEvent_t
};

// `waiter` waits, on the device, for everything queued on `signaller` so far.
void order_after(cnnrt::Stream waiter, cnnrt::Stream signaller, Event& scratch);

void copy_to_device(void* device, const void* host, size_t bytes, cnnrt::Stream stream);
void copy_to_host(void* host, const void* device, size_t bytes, cnnrt::Stream stream);
void synchronize(cnnrt::Stream stream);

}  // namespace cnnrt_python::cuda
