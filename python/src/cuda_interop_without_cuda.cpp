// cuda_interop.hpp in a build without CUDA: nothing here can run.
#include "cuda_interop.hpp"

namespace cnnrt_python::cuda {

namespace {
[[noreturn]] void no_cuda() {
  throw cnnrt::Error(cnnrt::ErrorCode::DeviceUnavailable,
                     "this build of cnnrt has no CUDA support (configured with CNNRT_ENABLE_CUDA=OFF)");
}
}  // namespace

bool built_with_cuda() { return false; }
cnnrt::Stream stream_from_handle(uintptr_t) { no_cuda(); }
uintptr_t dlpack_handle(cnnrt::Stream) { no_cuda(); }
bool is_default_stream(uintptr_t handle) { return handle <= 2; }
int current_device() { no_cuda(); }
int device_of(const void*) { no_cuda(); }
DeviceBuffer::DeviceBuffer(size_t) { no_cuda(); }
DeviceBuffer::~DeviceBuffer() = default;
Event::Event() { no_cuda(); }
Event::~Event() = default;
void Event::record(cnnrt::Stream) { no_cuda(); }
void Event::make_wait(cnnrt::Stream) const { no_cuda(); }
void Event::synchronize() const { no_cuda(); }
void order_after(cnnrt::Stream, cnnrt::Stream, Event&) { no_cuda(); }
void copy_to_device(void*, const void*, size_t, cnnrt::Stream) { no_cuda(); }
void copy_to_host(void*, const void*, size_t, cnnrt::Stream) { no_cuda(); }
void synchronize(cnnrt::Stream) { no_cuda(); }

}  // namespace cnnrt_python::cuda
