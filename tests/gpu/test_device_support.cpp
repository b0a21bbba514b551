// What cnnrt does on a GPU it cannot use, and how it plans for older GPUs, faked on this one:
// CNNRT_MAX_SM=70 stands in for a pre-Turing GPU (--device auto falls back to the CPU with one warning naming
// the GPU and the reason; --device gpu exits 5), most of the device's memory taken stands in for a GPU out of
// memory at plan time, a batch of millions for a plan larger than the GPU (exit 6, before anything is
// allocated), and CNNRT_MAX_SM=75 for a Turing GPU (the planner uses only the families Turing has, and no
// layer of the zoo falls back to direct_reference); and CNNRT_SYNC_STEPS=1 (no graphs) with measured
// planning. The capped runs start the tool as a child process: the cap is read once per process.
#include <cuda_runtime.h>
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cnnrt/cnnrt.hpp"
#include "gpu_test_util.hpp"

using namespace cnnrt;
using testing::repo_path;

namespace {

struct Run {
  int status = -1;
  std::string out, err;
};

// The cnnrt tool built beside this test program.
std::string cli_path() {
  return (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "cnnrt").string();
}

// Runs `env` + the cnnrt tool with `args` (each argument single-quoted).
Run run_tool(const std::string& env, const std::vector<std::string>& args) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("cnnrt_device_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::string command = env + " '" + cli_path() + "'";
  for (const std::string& a : args) command += " '" + a + "'";
  command += " >'" + (dir / "out").string() + "' 2>'" + (dir / "err").string() + "'";
  const int raw = std::system(command.c_str());
  auto slurp = [](const std::filesystem::path& p) {
    std::ifstream in(p);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  };
  Run r{WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, slurp(dir / "out"), slurp(dir / "err")};
  std::filesystem::remove_all(dir);
  return r;
}

int count_lines_with(const std::string& text, const std::string& needle) {
  int n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos;
  return n;
}

bool have_gpu() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    testing::skip_test_case("no CUDA device");
    return false;
  }
  return true;
}

}  // namespace

TEST_CASE("a GPU below Turing: --device auto runs on the CPU with one warning, --device gpu exits 5") {
  if (!have_gpu()) return;
  const std::string model = repo_path("models/fashion_lenet.onnx");
  const Run gpu = run_tool("CNNRT_MAX_SM=70", {"plan", model, "--device", "gpu"});
  CHECK(gpu.status == 5);
  CHECK_MESSAGE(gpu.err.find("compute capability 7.0; cnnrt runs on 7.5 (Turing) and later") != std::string::npos, gpu.err);
  CHECK_MESSAGE(gpu.err.find("GPU 0: ") != std::string::npos, gpu.err);

  const Run autodev = run_tool("CNNRT_MAX_SM=70", {"plan", model, "--device", "auto"});
  CHECK_MESSAGE(autodev.status == 0, autodev.err);
  CHECK_MESSAGE(count_lines_with(autodev.err, "running on the CPU reference backend") == 1, autodev.err);
  CHECK(count_lines_with(autodev.err, "compute capability 7.0") == 1);

  const Run bad = run_tool("CNNRT_MAX_SM=seventy", {"plan", model, "--device", "gpu"});
  CHECK(bad.status == 2);
  CHECK_MESSAGE(bad.err.find("CNNRT_MAX_SM='seventy'") != std::string::npos, bad.err);
}

TEST_CASE("a plan larger than the GPU fails at once with exit 6, naming the bytes") {
  if (!have_gpu()) return;
  const std::string model = repo_path("models/fashion_lenet.onnx");
  const Run limit = run_tool("", {"bench", model, "--batch", "50000000"});
  CHECK(limit.status == 6);
  CHECK_MESSAGE(limit.err.find("bytes of activations") != std::string::npos, limit.err);
  const Run device = run_tool("", {"bench", model, "--batch", "50000000", "--max-activation-bytes", "1000000000000000"});
  CHECK(device.status == 6);
  CHECK_MESSAGE(device.err.find("bytes in all") != std::string::npos, device.err);
}

TEST_CASE("a GPU out of memory at plan time: Device::Auto runs on the CPU, Device::Gpu throws DeviceUnavailable") {
  if (!have_gpu()) return;
  size_t free_bytes = 0, total_bytes = 0;
  GPU_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  // Leave 128 MiB free; a batch of 100000 LeNet inputs alone is 314 MB.
  const size_t keep = size_t(128) << 20;
  REQUIRE(free_bytes > keep);
  void* hog = nullptr;
  GPU_CHECK(cudaMalloc(&hog, free_bytes - keep));
  Options options;
  options.batch_sizes = {100000};
  options.tuning_cache = "none";
  options.device = Device::Auto;
  const Model fallback = Model::load(repo_path("models/fashion_lenet.onnx"), options);
  CHECK(fallback.device() == Device::Cpu);
  options.device = Device::Gpu;
  try {
    Model::load(repo_path("models/fashion_lenet.onnx"), options);
    FAIL("loading on a full GPU did not throw");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::DeviceUnavailable);
    CHECK_MESSAGE(std::string(e.what()).find("out of memory") != std::string::npos, e.what());
  }
  GPU_CHECK(cudaFree(hog));
}

TEST_CASE("planning as Turing (CNNRT_MAX_SM=75): only Turing's families, no direct_reference, right answers") {
  if (!have_gpu()) return;
  for (const char* name : {"resnet18_narrow", "shufflenet_v1", "ts_cnn1d", "mobilenet_v2", "lenet5"}) {
    CAPTURE(name);
    const std::string dir = repo_path(std::string("models/zoo/") + name);
    const Run plan = run_tool("CNNRT_MAX_SM=75", {"plan", dir + "/model.onnx", "--device", "gpu", "--batch", "1"});
    REQUIRE_MESSAGE(plan.status == 0, plan.err);
    CHECK_MESSAGE(plan.out.find("as sm_75") != std::string::npos, plan.out);
    for (const char* absent : {"tc_f", "wgr_", "wgh_", "chain_", "direct_reference"}) {
      CHECK_MESSAGE(plan.out.find(absent) == std::string::npos, absent << " in\n" << plan.out);
    }
    const Run run = run_tool("CNNRT_MAX_SM=75", {"run", dir + "/model.onnx", "--test-data", dir, "--device", "gpu"});
    CHECK_MESSAGE(run.status == 0, run.out << run.err);
  }
}

TEST_CASE("CNNRT_SYNC_STEPS=1 with tuning on: planning measures what it can without graphs, and the model runs") {
  // The launch search times CUDA graphs; step-by-step runs have none, so it must stand aside, not fail the plan.
  if (!have_gpu()) return;
  const std::string dir = repo_path("models/zoo/vgg_small");
  const std::filesystem::path cache =
      std::filesystem::temp_directory_path() / ("cnnrt_sync_cache_" + std::to_string(getpid()));
  const std::string env = "CNNRT_SYNC_STEPS=1 CNNRT_CACHE_DIR='" + cache.string() + "'";
  const Run run = run_tool(env, {"run", dir + "/model.onnx", "--test-data", dir, "--device", "gpu"});
  CHECK_MESSAGE(run.status == 0, run.out << run.err);
  std::error_code ec;
  std::filesystem::remove_all(cache, ec);
}
