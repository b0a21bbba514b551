// Plan-time compilation with NVRTC (see jit.hpp).
#include "kernels/jit.hpp"

#include <fmt/format.h>
#include <nvrtc.h>

#include <cstdint>
#include <cstring>
#include <iterator>
#include <stdexcept>
#include <vector>

namespace cnnrt::kernels {

// The headers the sources include, embedded at build time (cmake/embed_sources.cmake writes them).
struct EmbeddedSource {
  const char* name;
  const char* text;
};
extern const EmbeddedSource kJitHeaders[];
extern const int kJitHeaderCount;

namespace {

// NVRTC has no C++ standard library: the fixed-width integer types the kernels' headers take from <cstdint>.
constexpr const char* kCstdint = R"(#pragma once
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef unsigned long long uintptr_t;
namespace std {
using ::int8_t; using ::int16_t; using ::int32_t; using ::int64_t;
using ::uint8_t; using ::uint16_t; using ::uint32_t; using ::uint64_t; using ::uintptr_t;
}
)";

void check_nvrtc(nvrtcResult r, const char* what) {
  if (r != NVRTC_SUCCESS) throw std::runtime_error(fmt::format("NVRTC {}: {}", what, nvrtcGetErrorString(r)));
}

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(fmt::format("{}: {}", what, cudaGetErrorString(e)));
}

}  // namespace

std::string jit_words(const void* bytes, size_t size) {
  if (size % 4 != 0) throw std::invalid_argument("jit_words: a size that is not a multiple of 4");
  std::vector<uint32_t> w(size / 4);
  std::memcpy(w.data(), bytes, size);
  std::string out;
  for (size_t i = 0; i < w.size(); ++i) out += fmt::format("{}0x{:x}u,", i % 8 == 0 ? "\n      " : " ", w[i]);
  return out;
}

int current_device_arch() {
  int device = 0, major = 0, minor = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  check_cuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), "compute capability");
  check_cuda(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device), "compute capability");
  return major * 10 + minor;
}

std::string compile_jit_source(const std::string& source, int arch, const char* what, std::string* log_out) {
  std::vector<const char*> names = {"cstdint"}, texts = {kCstdint};
  for (int i = 0; i < kJitHeaderCount; ++i) {
    names.push_back(kJitHeaders[i].name);
    texts.push_back(kJitHeaders[i].text);
  }
  nvrtcProgram program = nullptr;
  check_nvrtc(nvrtcCreateProgram(&program, source.c_str(), "cnnrt_jit.cu", static_cast<int>(names.size()), texts.data(),
                                 names.data()),
              "create");
  // As nvcc builds the kernels (kernels/CMakeLists.txt): C++17, full optimisation, no fast-math.
  const std::string gpu = fmt::format("--gpu-architecture=sm_{}", arch);
  // ptxas warns in the log where the kernel uses local memory: a struct indexed at run time, or spills (both
  // undo what compiling for the shapes is for).
  const char* options[] = {gpu.c_str(), "-std=c++17", "-default-device", "-lineinfo",
                           "--ptxas-options=--warn-on-local-memory-usage", "--ptxas-options=--warn-on-spills"};
  const nvrtcResult r = nvrtcCompileProgram(program, static_cast<int>(std::size(options)), options);
  size_t log_size = 0;
  nvrtcGetProgramLogSize(program, &log_size);
  std::string log(log_size, '\0');
  if (log_size > 0) nvrtcGetProgramLog(program, log.data());
  std::string cubin;
  if (r == NVRTC_SUCCESS) {
    size_t size = 0;
    nvrtcGetCUBINSize(program, &size);
    cubin.resize(size);
    nvrtcGetCUBIN(program, cubin.data());
  }
  nvrtcDestroyProgram(&program);
  if (log_out) *log_out = log;
  if (r != NVRTC_SUCCESS || cubin.empty()) {
    throw std::runtime_error(fmt::format("NVRTC could not compile {} ({}):\n{}", what, nvrtcGetErrorString(r), log));
  }
  return cubin;
}

JitKernel::JitKernel(const std::string& cubin, const char* entry, size_t smem_bytes, bool large_clusters) {
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  check_cuda(cudaLibraryLoadData(&library_, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
             "loading a plan-time kernel");
  try {
    check_cuda(cudaLibraryGetKernel(&kernel_, library_, entry), "a plan-time kernel's entry");
    check_cuda(cudaKernelSetAttributeForDevice(kernel_, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(smem_bytes), device),
               "a plan-time kernel's shared memory");
    if (large_clusters) {
      check_cuda(cudaKernelSetAttributeForDevice(kernel_, cudaFuncAttributeNonPortableClusterSizeAllowed, 1, device),
                 "a plan-time kernel's cluster size");
    }
  } catch (...) {
    cudaLibraryUnload(library_);
    throw;
  }
}

JitKernel::~JitKernel() {
  if (library_) cudaLibraryUnload(library_);
}

}  // namespace cnnrt::kernels
