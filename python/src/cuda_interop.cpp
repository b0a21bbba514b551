#include "cuda_interop.hpp"

#include <cuda_runtime_api.h>

#include <string>

namespace cnnrt_python::cuda {

namespace {

// Names the call and the error, as the engine's CUDA errors do, and throws DeviceError.
void check(cudaError_t err, const char* call) {
  if (err == cudaSuccess) return;
  cudaGetLastError();  // clear a non-sticky error so that later calls start clean
  int device = -1;
  cudaGetDevice(&device);
  throw cnnrt::Error(cnnrt::ErrorCode::DeviceError, std::string(call) + " failed on device " +
                                                        std::to_string(device) + ": " + cudaGetErrorName(err) +
                                                        " (" + cudaGetErrorString(err) + ")");
}

cudaStream_t native(cnnrt::Stream stream) { return reinterpret_cast<cudaStream_t>(stream); }

}  // namespace

bool built_with_cuda() { return true; }

cnnrt::Stream stream_from_handle(uintptr_t handle) {
  if (handle == 0 || handle == 1) return reinterpret_cast<cnnrt::Stream>(cudaStreamLegacy);
  if (handle == 2) return reinterpret_cast<cnnrt::Stream>(cudaStreamPerThread);
  return reinterpret_cast<cnnrt::Stream>(handle);
}

uintptr_t dlpack_handle(cnnrt::Stream stream) {
  const auto handle = reinterpret_cast<uintptr_t>(stream);
  return handle == 0 ? 1 : handle;
}

bool is_default_stream(uintptr_t handle) { return handle <= 2; }

int current_device() {
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  return device;
}

int device_of(const void* pointer) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, pointer) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged ? attr.device : -1;
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  device_ = current_device();
  // cudaMalloc(0) gives no pointer; a zero-sized array still gets a valid address.
  const cudaError_t err = cudaMalloc(&data_, bytes == 0 ? 16 : bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();
    throw cnnrt::Error(cnnrt::ErrorCode::DeviceError, "cudaMalloc of " + std::to_string(bytes) + " bytes failed on device " +
                           std::to_string(device_) + ": " + cudaGetErrorName(err));
  }
}

DeviceBuffer::~DeviceBuffer() {
  // Also reached at interpreter exit, possibly after the CUDA runtime has shut down: errors are ignored.
  if (data_ && cudaFree(data_) != cudaSuccess) cudaGetLastError();
}

Event::Event() {
  cudaEvent_t e = nullptr;
  check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  event_ = e;
}

Event::~Event() {
  if (event_) cudaEventDestroy(static_cast<cudaEvent_t>(event_));
}

void Event::record(cnnrt::Stream stream) {
  check(cudaEventRecord(static_cast<cudaEvent_t>(event_), native(stream)), "cudaEventRecord");
}

void Event::make_wait(cnnrt::Stream stream) const {
  check(cudaStreamWaitEvent(native(stream), static_cast<cudaEvent_t>(event_), 0), "cudaStreamWaitEvent");
}

void Event::synchronize() const { check(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)), "cudaEventSynchronize"); }

void order_after(cnnrt::Stream waiter, cnnrt::Stream signaller, Event& scratch) {
  if (waiter == signaller) return;
  scratch.record(signaller);
  scratch.make_wait(waiter);
}

void copy_to_device(void* device, const void* host, size_t bytes, cnnrt::Stream stream) {
  if (bytes == 0) return;
  check(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, native(stream)), "cudaMemcpyAsync (to device)");
}

void copy_to_host(void* host, const void* device, size_t bytes, cnnrt::Stream stream) {
  if (bytes == 0) return;
  check(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, native(stream)), "cudaMemcpyAsync (to host)");
}

void synchronize(cnnrt::Stream stream) { check(cudaStreamSynchronize(native(stream)), "cudaStreamSynchronize"); }

}  // namespace cnnrt_python::cuda
