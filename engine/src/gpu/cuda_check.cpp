#include "gpu/cuda_check.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace cnnrt::gpu {

void throw_cuda_error(cudaError_t err, const char* statement, const char* file, int line,
                      const std::string& context) {
  int device = -1;
  cudaGetDevice(&device);
  const char* base = file;
  for (const char* p = file; *p; ++p) {
    if (*p == '/') base = p + 1;
  }
  throw Error(ErrorCode::DeviceError,
              fmt::format("{}CUDA error {} ({}) in '{}' at {}:{} on device {}", context.empty() ? "" : context + ": ",
                          cudaGetErrorName(err), cudaGetErrorString(err), statement, base, line, device));
}

}  // namespace cnnrt::gpu
