#include "gpu/weight_store.hpp"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <cstring>

#include "gpu/cuda_check.hpp"

namespace cnnrt::gpu {

namespace {
// FNV-1a over the bytes: a content key. Collisions are made harmless by also comparing sizes and,
// on a hit, the bytes themselves (see upload_bytes).
uint64_t fnv1a(const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}
}  // namespace

const void* WeightStore::upload_bytes(const void* data, size_t bytes, const std::string& layout) {
  const std::string key = fmt::format("{}:{}:{:016x}", layout, bytes, fnv1a(data, bytes));
  std::lock_guard<std::mutex> lock(mutex_);
  for (int probe = 0;; ++probe) {
    const std::string k = probe == 0 ? key : fmt::format("{}#{}", key, probe);
    auto it = buffers_.find(k);
    if (it == buffers_.end()) {
      DeviceAllocation buffer(bytes > 0 ? bytes : 4);
      if (bytes > 0) CNNRT_CUDA_CHECK(cudaMemcpy(buffer.get(), data, bytes, cudaMemcpyHostToDevice));
      bytes_ += static_cast<int64_t>(bytes);
      return buffers_.emplace(k, std::move(buffer)).first->second.get();
    }
    // Same key: confirm the contents really match before sharing.
    std::vector<unsigned char> existing(bytes);
    if (bytes > 0) CNNRT_CUDA_CHECK(cudaMemcpy(existing.data(), it->second.get(), bytes, cudaMemcpyDeviceToHost));
    if (bytes == 0 || std::memcmp(existing.data(), data, bytes) == 0) return it->second.get();
  }
}

const float* WeightStore::upload(const ir::HostTensor& tensor) {
  if (tensor.dtype() == ir::DType::Float32) {
    return static_cast<const float*>(
        upload_bytes(tensor.f32(), static_cast<size_t>(tensor.numel()) * sizeof(float), "f32"));
  }
  std::vector<float> converted(static_cast<size_t>(tensor.numel()));
  for (int64_t i = 0; i < tensor.numel(); ++i) converted[i] = static_cast<float>(tensor.i64()[i]);
  return upload(converted, "f32");
}

const float* WeightStore::upload(const std::vector<float>& values, const std::string& layout) {
  return static_cast<const float*>(upload_bytes(values.data(), values.size() * sizeof(float), layout));
}

const int64_t* WeightStore::upload_indices(const ir::HostTensor& tensor) {
  return static_cast<const int64_t*>(
      upload_bytes(tensor.i64(), static_cast<size_t>(tensor.numel()) * sizeof(int64_t), "i64"));
}

int64_t WeightStore::bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_;
}

}  // namespace cnnrt::gpu
