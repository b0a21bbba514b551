// The DLPack data structures (DLPack 1.0, https://dmlc.github.io/dlpack/latest/c_api.html), as the spec
// lays them out, and the Python protocol's capsule names (the Python array API's `__dlpack__`). Debian 12's
// libdlpack-dev is DLPack 0.6, which predates DLManagedTensorVersioned, the form a consumer asking with
// max_version >= (1, 0) (PyTorch 2.x) receives; both forms are declared here, from the spec.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cnnrt_python::dlpack {

// DLDeviceType (only the values cnnrt reads or writes).
constexpr int32_t kDLCPU = 1;
constexpr int32_t kDLCUDA = 2;
constexpr int32_t kDLCUDAHost = 3;      // pinned host memory: readable by the CPU
constexpr int32_t kDLCUDAManaged = 13;  // managed memory: readable by the GPU

// DLDataTypeCode
constexpr uint8_t kDLInt = 0;
constexpr uint8_t kDLUInt = 1;
constexpr uint8_t kDLFloat = 2;
constexpr uint8_t kDLBfloat = 4;
constexpr uint8_t kDLComplex = 5;
constexpr uint8_t kDLBool = 6;

struct DLDevice {
  int32_t device_type;  // DLDeviceType (a C enum: int-sized)
  int32_t device_id;
};

struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};

struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; null: compact row-major
  uint64_t byte_offset;
};

// The pre-1.0 form, in a capsule named "dltensor".
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
};

// The 1.0 form, in a capsule named "dltensor_versioned".
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
};

constexpr uint32_t kMajorVersion = 1;
constexpr uint32_t kMinorVersion = 0;
constexpr uint64_t kFlagReadOnly = uint64_t(1) << 0;

// A consumer renames the capsule once it owns the tensor; the capsule's destructor then leaves it alone.
constexpr const char* kCapsuleName = "dltensor";
constexpr const char* kUsedCapsuleName = "used_dltensor";
constexpr const char* kVersionedCapsuleName = "dltensor_versioned";
constexpr const char* kUsedVersionedCapsuleName = "used_dltensor_versioned";

static_assert(sizeof(DLDevice) == 8 && sizeof(DLDataType) == 4, "DLPack layout");
static_assert(sizeof(DLTensor) == 48 && offsetof(DLTensor, shape) == 24 && offsetof(DLTensor, byte_offset) == 40,
              "DLPack layout");
static_assert(sizeof(DLManagedTensor) == 64, "DLPack layout");
static_assert(offsetof(DLManagedTensorVersioned, flags) == 24 && offsetof(DLManagedTensorVersioned, dl_tensor) == 32,
              "DLPack layout");

}  // namespace cnnrt_python::dlpack
