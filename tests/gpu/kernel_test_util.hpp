// Helpers for the kernel tests: the CPU reference backend as oracle, random host tensors, device buffers of
// int64, and the one error bound every kernel test asserts.
//
// Error bound: ||got - want|| / ||want|| < kTolerance = 1e-5 over the whole output, against the CPU reference
// (which sums in double). Elementwise kernels differ from it by at most a few float ulps per element
// (~1e-7); reductions, GEMM and pooling sum in float, whose relative error grows about like
// 6e-8 * sqrt(terms): about 2e-6 for the largest sums tested (K = 1000), well inside the bound.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "cpu/ops.hpp"
#include "gpu_test_util.hpp"
#include "ir/graph.hpp"

namespace cnnrt::testing {

constexpr double kTolerance = 1e-5;

inline ir::Attributes make_attrs(std::initializer_list<std::pair<const char*, ir::AttrValue>> values) {
  ir::Attributes result;
  for (const auto& [name, value] : values) result.set(name, value);
  return result;
}

// Uniform in [lo, hi): never zeros (see random_floats).
inline ir::HostTensor random_tensor(const ir::Shape& shape, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  return ir::HostTensor::floats(shape, random_floats(static_cast<size_t>(ir::numel(shape)), seed, lo, hi));
}

// Output of the CPU reference kernel of `op` (canonical attributes, docs/ops.md) for `inputs`.
inline ir::HostTensor cpu_reference(const std::string& op, const ir::Attributes& attrs,
                                    const std::vector<const ir::HostTensor*>& inputs, const ir::Shape& out_shape) {
  const cpu::KernelFn kernel = cpu::find_kernel(op);
  const bool found = kernel != nullptr;  // doctest cannot print a function pointer
  REQUIRE_MESSAGE(found, "the CPU backend has no kernel for " << op);
  ir::Node node;
  node.op = op;
  node.attrs = attrs;
  ir::HostTensor out(ir::DType::Float32, out_shape);
  cpu::Outputs outputs{&out};
  kernel(node, inputs, outputs);
  return out;
}

// Checks the launch and waits for it, so that a failing kernel is reported where it ran.
inline void finish_launch() {
  GPU_CHECK(cudaGetLastError());
  GPU_CHECK(cudaDeviceSynchronize());
}

// Runs `launch` (which writes `y`) twice, `y` poisoned before each: the first output must be within kTolerance of
// `want`, the second equal to it bit for bit (a fixed summation order). Returns the first output.
template <class Launch>
std::vector<float> check_twice(const std::string& what, DeviceBuffer& y, const ir::HostTensor& want, Launch&& launch) {
  y.poison();
  launch();
  finish_launch();
  const std::vector<float> first = y.download();
  CHECK_MESSAGE(relative_error(first, want.float_values()) < kTolerance, what);
  y.poison();
  launch();
  finish_launch();
  const std::vector<float> second = y.download();  // compared as bits: a poisoned gap (NaN) equals itself
  CHECK_MESSAGE(std::memcmp(second.data(), first.data(), first.size() * sizeof(float)) == 0,
                what << ": a second run differs");
  return first;
}

// Relative error of a device result (all of `got`, or `count` elements from `first`) against the reference.
inline double error_against(const DeviceBuffer& got, const ir::HostTensor& want) {
  return relative_error(got.download(), want.float_values());
}
inline double error_against(const DeviceBuffer& got, size_t first, const ir::HostTensor& want) {
  const std::vector<float> all = got.download();
  const std::vector<float> part(all.begin() + static_cast<std::ptrdiff_t>(first),
                                all.begin() + static_cast<std::ptrdiff_t>(first + want.float_values().size()));
  return relative_error(part, want.float_values());
}

// An int64 device array (Gather indices).
class DeviceInts {
 public:
  explicit DeviceInts(const std::vector<int64_t>& host) {
    GPU_CHECK(cudaMalloc(&data_, host.empty() ? sizeof(int64_t) : host.size() * sizeof(int64_t)));
    GPU_CHECK(cudaMemcpy(data_, host.data(), host.size() * sizeof(int64_t), cudaMemcpyHostToDevice));
  }
  ~DeviceInts() { cudaFree(data_); }
  DeviceInts(const DeviceInts&) = delete;
  DeviceInts& operator=(const DeviceInts&) = delete;
  const int64_t* get() const { return data_; }

 private:
  int64_t* data_ = nullptr;
};

inline int64_t product(const ir::Shape& shape, size_t first = 0, size_t last = SIZE_MAX) {
  int64_t result = 1;
  for (size_t i = first; i < shape.size() && i < last; ++i) result *= shape[i];
  return result;
}

// A fused kernel's planner test on a zoo model (input [batch, 3, size, size]): planned with each of `forced` (the
// fused kernel's name, then `separate_steps`) at each batch, the plan has `count` notes starting with `note`, of
// which the fused kernel runs `count` (or `fused`, where that is set) where it is forced and the batch is at most
// `fused_up_to_batch` (else none), and the output matches the CPU backend's on random inputs.
struct FusedPlanCheck {
  std::string model;
  int64_t size = 0;
  std::string kernel;  // the fused kernel's name (and what --force-kernel gets)
  std::string note;    // how the plan's notes name the fused nodes
  size_t count = 0;
  std::vector<int64_t> batches = {1, 5, 64};
  int64_t fused_up_to_batch = INT64_MAX;
  uint32_t seed = 31;
  size_t fused = SIZE_MAX;  // how many of the `count` the forced kernel takes, where not all
};

// How often `what` occurs in `text` (a plan's notes).
inline size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

inline void check_fused_plans(const FusedPlanCheck& c) {
  Options cpu_options;
  cpu_options.device = Device::Cpu;
  const std::string path = repo_path("models/zoo/" + c.model + "/model.onnx");
  const Model cpu_model = Model::load(path, cpu_options);
  for (const std::string& forced : {c.kernel, std::string("separate_steps")}) {
    set_log_level(LogLevel::Off);  // --force-kernel warns for every conv it cannot force
    const Model model = Model::load(path, forced_gpu_options(forced));
    for (int64_t batch : c.batches) {
      const std::string plan = model.describe_plan(batch);
      auto count = [&plan](const std::string& text) { return occurrences(plan, text); };
      const std::string what = c.model + " " + forced + " batch " + std::to_string(batch);
      CHECK_MESSAGE(count("note: " + c.note) == c.count, what << ":\n" << plan);
      const size_t fused = forced == c.kernel && batch <= c.fused_up_to_batch ? std::min(c.count, c.fused) : 0u;
      CHECK_MESSAGE(count("one launch, " + c.kernel) == fused, what << ":\n" << plan);
      const size_t n = static_cast<size_t>(batch * 3 * c.size * c.size);
      const Tensor x{{batch, 3, c.size, c.size}, random_floats(n, c.seed + static_cast<uint32_t>(batch))};
      const Tensor gpu = Context(model).run({x})[0];
      const Tensor cpu = Context(cpu_model).run({x})[0];
      CHECK_MESSAGE(relative_error(gpu.data, cpu.data) < kTolerance, what);
    }
    set_log_level(LogLevel::Warn);
  }
}

}  // namespace cnnrt::testing
