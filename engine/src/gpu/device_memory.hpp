// Owning device and pinned-host buffers. Every allocation the runtime makes goes through here and is
// counted, so tests can prove that inference allocates nothing.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cnnrt::gpu {

struct AllocationCounts {
  int64_t device_allocs = 0;
  int64_t device_frees = 0;
  int64_t pinned_allocs = 0;
  int64_t pinned_frees = 0;
};
// Totals since process start (all threads).
AllocationCounts allocation_counts();

class DeviceAllocation {
 public:
  DeviceAllocation() = default;
  explicit DeviceAllocation(size_t bytes);
  ~DeviceAllocation();
  DeviceAllocation(DeviceAllocation&& other) noexcept;
  DeviceAllocation& operator=(DeviceAllocation&& other) noexcept;
  DeviceAllocation(const DeviceAllocation&) = delete;
  DeviceAllocation& operator=(const DeviceAllocation&) = delete;

  void* get() const { return ptr_; }
  float* floats() const { return static_cast<float*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

class PinnedAllocation {
 public:
  PinnedAllocation() = default;
  explicit PinnedAllocation(size_t bytes);
  ~PinnedAllocation();
  PinnedAllocation(PinnedAllocation&& other) noexcept;
  PinnedAllocation& operator=(PinnedAllocation&& other) noexcept;
  PinnedAllocation(const PinnedAllocation&) = delete;
  PinnedAllocation& operator=(const PinnedAllocation&) = delete;

  float* floats() const { return static_cast<float*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace cnnrt::gpu
