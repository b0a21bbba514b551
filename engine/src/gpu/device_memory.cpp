#include "gpu/device_memory.hpp"

#include <atomic>
#include <utility>

#include "gpu/cuda_check.hpp"

namespace cnnrt::gpu {

namespace {
std::atomic<int64_t> g_device_allocs{0}, g_device_frees{0}, g_pinned_allocs{0}, g_pinned_frees{0};
}

AllocationCounts allocation_counts() {
  return {g_device_allocs.load(), g_device_frees.load(), g_pinned_allocs.load(), g_pinned_frees.load()};
}

DeviceAllocation::DeviceAllocation(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  CNNRT_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
  ++g_device_allocs;
}

DeviceAllocation::~DeviceAllocation() {
  if (ptr_) {
    cudaFree(ptr_);
    ++g_device_frees;
  }
}

DeviceAllocation::DeviceAllocation(DeviceAllocation&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceAllocation& DeviceAllocation::operator=(DeviceAllocation&& other) noexcept {
  std::swap(ptr_, other.ptr_);
  std::swap(bytes_, other.bytes_);
  return *this;
}

PinnedAllocation::PinnedAllocation(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  // Mapped: kernels may read and write it in place (Executor::run_host does for small inputs and outputs).
  CNNRT_CUDA_CHECK(cudaHostAlloc(&ptr_, bytes, cudaHostAllocMapped));
  ++g_pinned_allocs;
}

PinnedAllocation::~PinnedAllocation() {
  if (ptr_) {
    cudaFreeHost(ptr_);
    ++g_pinned_frees;
  }
}

PinnedAllocation::PinnedAllocation(PinnedAllocation&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

PinnedAllocation& PinnedAllocation::operator=(PinnedAllocation&& other) noexcept {
  std::swap(ptr_, other.ptr_);
  std::swap(bytes_, other.bytes_);
  return *this;
}

}  // namespace cnnrt::gpu
