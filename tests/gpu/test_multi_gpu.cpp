// Options::gpu_index and several GPUs in one process, through the public API: a model lives on the device it
// was loaded on, and its contexts run there whichever device the calling thread has current (cnnrt serve
// --gpus 0,1 runs one model per GPU and a thread per instance). The cases that need two GPUs say so and pass
// on one; on the two-GPU machine they run.
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <cmath>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "cnnrt/cnnrt.hpp"
#include "gpu_test_util.hpp"

using namespace cnnrt;
using testing::repo_path;

namespace {

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count;
}

Options gpu_options(int gpu_index) {
  Options options;
  options.device = Device::Gpu;
  options.gpu_index = gpu_index;
  options.tuning = false;  // the heuristic picks the built chain kernel up to batch 32 (dynamic shared memory)
  options.tuning_cache = "none";
  options.batch_sizes = {1, 64};
  return options;
}

Tensor lenet_input(int64_t batch, uint32_t seed) {
  return Tensor{{batch, 1, 28, 28}, testing::random_floats(static_cast<size_t>(batch) * 784, seed)};
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape == b.shape);
  double worst = 0;
  for (size_t i = 0; i < a.data.size(); ++i) worst = std::max(worst, std::abs(double(a.data[i]) - b.data[i]));
  return worst;
}

int current_device() {
  int device = -1;
  GPU_CHECK(cudaGetDevice(&device));
  return device;
}

// The kernels as built (not the ones NVRTC compiles at plan time), whose shared-memory opt-in is set per
// kernel and device: on a second GPU they fail to launch if it was set on the first only.
struct BuiltKernelsOnly {
  BuiltKernelsOnly() { setenv("CNNRT_NO_JIT", "1", 1); }
  ~BuiltKernelsOnly() { unsetenv("CNNRT_NO_JIT"); }
};

}  // namespace

TEST_CASE("Options::gpu_index: a device past the last one is DeviceUnavailable naming the count") {
  const int count = device_count();
  Options options = gpu_options(count);
  try {
    Model::load(repo_path("models/fashion_lenet.onnx"), options);
    FAIL("loading onto GPU " << count << " of " << count << " succeeded");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::DeviceUnavailable);
    CHECK(std::string(e.what()).find("this machine has " + std::to_string(count) + " CUDA device") !=
          std::string::npos);
  }
}

TEST_CASE("Options::gpu_index: each GPU's model matches the CPU, run from a thread on another device") {
  const BuiltKernelsOnly built;
  const int count = device_count();
  if (count < 2) MESSAGE("one GPU: only GPU 0 is checked here; the cross-device cases need two");
  Options cpu;
  cpu.device = Device::Cpu;
  const Model cpu_model = Model::load(repo_path("models/fashion_lenet.onnx"), cpu);
  Context cpu_context(cpu_model);

  // GPU 0 first, then the last: the second device's kernels need their own attributes.
  std::vector<int> devices = {0};
  if (count >= 2) devices.push_back(count - 1);
  for (int device : devices) {
    CAPTURE(device);
    GPU_CHECK(cudaSetDevice(0));
    const Model model = Model::load(repo_path("models/fashion_lenet.onnx"), gpu_options(device));
    CHECK(current_device() == 0);  // loading switched to the model's device and back
    // The caller's thread has another device current: the context must switch for every call.
    GPU_CHECK(cudaSetDevice(device == 0 ? count - 1 : 0));
    const int caller_device = current_device();
    Context context(model);
    for (int64_t batch : {1, 64}) {
      CAPTURE(batch);
      const Tensor input = lenet_input(batch, 7 + static_cast<uint32_t>(batch));
      const std::vector<Tensor> got = context.run({input});
      const std::vector<Tensor> want = cpu_context.run({input});
      CHECK(max_abs_diff(got[0], want[0]) < 1e-4);
      CHECK(current_device() == caller_device);
    }
  }
  GPU_CHECK(cudaSetDevice(0));
}

TEST_CASE("two GPUs at once: a model and a thread each, 300 runs, bit-identical to each model's first run") {
  const int count = device_count();
  if (count < 2) {
    MESSAGE("skipped: needs two GPUs (this machine has " << count << ")");
    return;
  }
  const Model model0 = Model::load(repo_path("models/fashion_lenet.onnx"), gpu_options(0));
  const Model model1 = Model::load(repo_path("models/fashion_lenet.onnx"), gpu_options(1));
  const Tensor input = lenet_input(64, 99);
  std::atomic<int> mismatches{0};
  std::string errors[2];
  auto worker = [&](const Model& model, std::string& error) {
    try {
      Context context(model);
      const std::vector<Tensor> first = context.run({input});
      for (int i = 0; i < 300; ++i) {
        if (context.run({input})[0].data != first[0].data) ++mismatches;
      }
    } catch (const std::exception& e) {
      error = e.what();
    }
  };
  std::thread t0(worker, std::cref(model0), std::ref(errors[0]));
  std::thread t1(worker, std::cref(model1), std::ref(errors[1]));
  t0.join();
  t1.join();
  CHECK(errors[0] == "");
  CHECK(errors[1] == "");
  CHECK(mismatches == 0);
}
