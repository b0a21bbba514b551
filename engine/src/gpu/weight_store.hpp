// Constants on the device. Each distinct tensor is uploaded once per model, whichever batch sizes are
// planned: identical contents (a weight untouched by passes, or one re-derived identically for another
// batch size) share one buffer. Uploads happen while planning, never during a run.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gpu/device_memory.hpp"
#include "ir/tensor.hpp"

namespace cnnrt::gpu {

class WeightStore {
 public:
  // Device copy of a float32 constant (int64 constants are converted to float: run-time integer data
  // never reaches the GPU except Gather indices, see upload_indices).
  const float* upload(const ir::HostTensor& tensor);
  // Device copy of values in a kernel-specific layout, `layout` naming it (e.g. "conv_general_cwf").
  const float* upload(const std::vector<float>& values, const std::string& layout);
  // int64 indices (Gather).
  const int64_t* upload_indices(const ir::HostTensor& tensor);
  // Device copy of plain data of a kernel (the network kernel's op table), `key` naming its kind.
  const void* upload_bytes(const void* data, size_t bytes, const std::string& key);
  int64_t bytes() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, DeviceAllocation> buffers_;  // key: layout + size + content hash
  int64_t bytes_ = 0;
};

}  // namespace cnnrt::gpu
