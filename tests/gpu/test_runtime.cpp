// The GPU runtime end to end, through the public API: real models against the CPU backend, no allocation
// during inference, CUDA graph replay against step-by-step launches, batch-size changes, the caller's
// stream, profiling, and every graph pass on against every pass off.
//
// Paths: the shipped models and tests/data are found under the source folder this was built from, or, on
// the GPU machine (where the repository lies elsewhere), relative to the working directory (the repository
// root, as scripts/gpu_round.sh runs it). Fashion-MNIST comes from CNNRT_FASHION_MNIST (a folder with the
// t10k-*.gz files; scripts/bundle_device.sh ships them) or Debian's dataset-fashion-mnist.
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "apps/cnnrt/idx.hpp"
#include "apps/cnnrt/images.hpp"
#include "cnnrt/cnnrt.hpp"
#include "conformance.hpp"
#include "gpu/device_memory.hpp"
#include "gpu_test_util.hpp"
#include "kernels/launch.cuh"
#include "kernels/pool.cuh"

using namespace cnnrt;
using testing::max_rel_error;
using testing::repo_path;

namespace {

std::string fashion_file(const std::string& name) {
  const char* env = std::getenv("CNNRT_FASHION_MNIST");
  const std::string dir = env && *env ? env : "/usr/share/datasets/fashion-mnist";
  return dir + "/" + name;
}

Options options_for(Device device) {
  Options options;
  options.device = device;
  options.tuning = false;  // results, not speed, are under test; the tuner has its own cases
  options.tuning_cache = "none";
  return options;
}

// fashion_lenet inputs: `batch` test-set images normalised as the model's metadata says, as `cnnrt infer`
// feeds them.
Tensor fashion_batch(const Model& model, int64_t first, int64_t batch) {
  const cnnrt_cli::IdxArray images = cnnrt_cli::read_idx(fashion_file("t10k-images-idx3-ubyte.gz"));
  const cnnrt_cli::Normalization norm = cnnrt_cli::resolve_normalization(model.metadata(), {}, 1);
  Tensor t{{batch, 1, 28, 28}, std::vector<float>(static_cast<size_t>(batch) * 784)};
  for (int64_t i = 0; i < batch; ++i) {
    const auto pixels = images.values.begin() + (first + i) * 784;
    const cnnrt_cli::Image image{28, 28, 1, std::vector<float>(pixels, pixels + 784)};
    cnnrt_cli::normalise_into(image, norm, t.data.data() + i * 784);
  }
  return t;
}

std::vector<std::string> all_pass_names() {
  std::vector<std::string> names;
  for (const auto& [name, description] : graph_passes()) names.push_back(name);
  return names;
}

}  // namespace

TEST_CASE("models exported by PyTorch (tests/data) give the reference outputs on the GPU") {
  const std::string root = repo_path("tests/data");
  REQUIRE(std::filesystem::is_directory(root));
  set_log_level(LogLevel::Off);
  int passed = 0, compared = 0;
  std::vector<std::filesystem::path> dirs;
  for (const auto& entry : std::filesystem::directory_iterator(root)) {
    if (std::filesystem::exists(entry.path() / "model.onnx")) dirs.push_back(entry.path());
  }
  std::sort(dirs.begin(), dirs.end());
  for (const auto& dir : dirs) {
    const std::string name = dir.filename().string();
    if (testing::run_case(dir, name, Device::Cpu).outcome != "passed") continue;  // the CPU test lists these
    ++compared;
    const testing::CaseResult gpu = testing::run_case(dir, name, Device::Gpu);
    CHECK_MESSAGE(gpu.outcome == "passed", name << ": " << gpu.detail);
    passed += gpu.outcome == "passed";
  }
  set_log_level(LogLevel::Warn);
  std::cout << "exported models (gpu): " << passed << " of " << compared << " passed\n";
  CHECK(compared >= 60);
}

TEST_CASE("fashion_lenet: the GPU predicts the CPU's class for every Fashion-MNIST test image") {
  const Model cpu_model = Model::load(repo_path("models/fashion_lenet.onnx"), options_for(Device::Cpu));
  const Model gpu_model = Model::load(repo_path("models/fashion_lenet.onnx"), options_for(Device::Gpu));
  const cnnrt_cli::IdxArray labels = cnnrt_cli::read_idx(fashion_file("t10k-labels-idx1-ubyte.gz"));
  const Tensor images = fashion_batch(cpu_model, 0, 10000);
  const Tensor cpu = Context(cpu_model).run({images})[0];
  const Tensor gpu = Context(gpu_model).run({images})[0];
  REQUIRE(gpu.shape == std::vector<int64_t>{10000, 10});
  CHECK(max_rel_error(gpu, cpu) < 1e-4);
  int disagree = 0, correct = 0;
  for (int64_t i = 0; i < 10000; ++i) {
    const float* g = gpu.data.data() + i * 10;
    const float* c = cpu.data.data() + i * 10;
    const int64_t gc = std::max_element(g, g + 10) - g, cc = std::max_element(c, c + 10) - c;
    disagree += gc != cc;
    correct += gc == int64_t(labels.values[i]);
  }
  std::cout << "fashion_lenet (gpu): accuracy " << correct / 100.0 << "%, " << disagree << " disagreements with the CPU\n";
  CHECK(disagree == 0);
  CHECK(correct >= 9000);
}

TEST_CASE("inference allocates nothing: 1000 runs leave the allocation counts and free device memory unchanged") {
  const Model model = Model::load(repo_path("models/fashion_lenet.onnx"), options_for(Device::Gpu));
  constexpr int64_t batch = 64;
  const std::vector<float> input = testing::random_floats(batch * 784, 11);
  std::vector<float> output(batch * 10);
  const float* in_ptr = input.data();
  float* out_ptr = output.data();
  testing::DeviceBuffer d_in(input), d_out(output.size());
  const float* d_in_ptr = d_in.get();
  float* d_out_ptr = d_out.get();

  Context context(model);
  context.run(&in_ptr, &out_ptr, batch);  // the first run of a batch size plans and captures
  context.enqueue(&d_in_ptr, &d_out_ptr, batch);
  context.synchronize();
  const gpu::AllocationCounts before = gpu::allocation_counts();
  size_t free_before = 0, free_after = 0, total = 0;
  GPU_CHECK(cudaMemGetInfo(&free_before, &total));
  // 1000 runs; sanitizer rounds set fewer (CNNRT_TEST_RUNS): racecheck does not finish 1000 in 190 s.
  const int64_t half = std::max<int64_t>(1, testing::env_int("CNNRT_TEST_RUNS", 1000) / 2);
  for (int64_t i = 0; i < half; ++i) context.run(&in_ptr, &out_ptr, batch);
  for (int64_t i = 0; i < half; ++i) context.enqueue(&d_in_ptr, &d_out_ptr, batch);
  context.synchronize();
  GPU_CHECK(cudaMemGetInfo(&free_after, &total));
  const gpu::AllocationCounts after = gpu::allocation_counts();
  CHECK(after.device_allocs == before.device_allocs);
  CHECK(after.device_frees == before.device_frees);
  CHECK(after.pinned_allocs == before.pinned_allocs);
  CHECK(after.pinned_frees == before.pinned_frees);
  CHECK(free_after == free_before);
  CHECK(d_out.download() == output);  // both paths computed the same thing
}

TEST_CASE("CUDA graph replay and step-by-step launches agree bit for bit, across batch-size changes") {
  Options graphs = options_for(Device::Gpu);
  Options launches = graphs;
  launches.cuda_graphs = false;
  const Model with_graphs = Model::load(repo_path("models/fashion_lenet.onnx"), graphs);
  const Model without = Model::load(repo_path("models/fashion_lenet.onnx"), launches);
  const Model cpu = Model::load(repo_path("models/fashion_lenet.onnx"), options_for(Device::Cpu));
  Context a(with_graphs), b(without), c(cpu);
  for (int64_t batch : {1, 64, 7, 1, 1000, 64}) {
    CAPTURE(batch);
    const Tensor input{{batch, 1, 28, 28}, testing::random_floats(batch * 784, uint32_t(batch))};
    const Tensor ya = a.run({input})[0], yb = b.run({input})[0], yc = c.run({input})[0];
    CHECK(ya.data == yb.data);
    CHECK(max_rel_error(ya, yc) < 1e-4);
  }
}

TEST_CASE("overlapped launches (PDL) and plain launches agree bit for bit, graphs and step by step") {
  // Each conv, GEMM and pool step may launch while the step before it drains and waits on the device for its
  // results; a kernel touching memory before that wait would read stale inputs or overwrite a buffer still
  // being read. Chains of such steps (LeNet: conv, conv, GEMM; a residual block: conv, conv + Add) at batch
  // 1, where the overlap is largest, and at larger batches, repeated, against plain launches and the CPU.
  struct Restore {
    ~Restore() { set_launch_overlap(true); }
  } restore;
  for (const std::string& path : {repo_path("models/fashion_lenet.onnx"),
                                  repo_path("tests/data/resnet_basic_block_opset13/model.onnx"),
                                  repo_path("tests/data/depthwise_pointwise_opset17/model.onnx")}) {
    CAPTURE(path);
    for (bool graphs : {true, false}) {
      CAPTURE(graphs);
      Options options = options_for(Device::Gpu);
      options.cuda_graphs = graphs;
      set_launch_overlap(true);  // launches made (and graphs captured) from here on overlap
      const Model overlapped_model = Model::load(path, options);
      Context overlapped(overlapped_model);
      set_launch_overlap(false);
      const Model plain_model = Model::load(path, options);
      Context plain(plain_model);
      const Model cpu_model = Model::load(path, options_for(Device::Cpu));
      Context cpu(cpu_model);
      std::vector<int64_t> shape = overlapped_model.inputs()[0].shape;
      for (int64_t batch : {1, 64, 1, 7}) {
        CAPTURE(batch);
        shape[0] = batch;
        for (size_t d = 1; d < shape.size(); ++d) shape[d] = shape[d] < 0 ? 9 : shape[d];
        int64_t count = 1;
        for (int64_t d : shape) count *= d;
        const Tensor input{shape, testing::random_floats(size_t(count), uint32_t(batch) + 40)};
        set_launch_overlap(false);
        const Tensor want = plain.run({input})[0];
        set_launch_overlap(true);
        for (int repeat = 0; repeat < 20; ++repeat) {
          const Tensor got = overlapped.run({input})[0];
          REQUIRE(got.data == want.data);
        }
        CHECK(max_rel_error(want, cpu.run({input})[0]) < 1e-4);
      }
    }
  }
}

TEST_CASE("side steps: a graph running a shortcut or a pool on a second stream gives the CPU's answer, every replay") {
  // ResNet-20's projection shortcuts and ShuffleNet's stride-2 average pools run beside the steps between their
  // inputs and their readers (plan::side_steps): the plan must name them, and every replay must give the first
  // one's outputs, close to the CPU's (a step racing its neighbour for a buffer would not).
  for (const char* name : {"resnet20", "shufflenet_v1"}) {
    CAPTURE(name);
    const std::string path = repo_path(std::string("models/zoo/") + name + "/model.onnx");
    const Model gpu_model = Model::load(path, options_for(Device::Gpu));
    const Model cpu_model = Model::load(path, options_for(Device::Cpu));
    Context gpu(gpu_model), cpu(cpu_model);
    std::vector<int64_t> shape = gpu_model.inputs()[0].shape;
    for (int64_t batch : {1, 3}) {
      CAPTURE(batch);
      shape[0] = batch;
      CHECK(gpu_model.describe_plan(batch).find("on a second stream of the CUDA graph") != std::string::npos);
      int64_t count = 1;
      for (int64_t d : shape) count *= d;
      const Tensor input{shape, testing::random_floats(size_t(count), uint32_t(batch) + 70)};
      const Tensor first = gpu.run({input})[0];
      for (int repeat = 0; repeat < 20; ++repeat) REQUIRE(gpu.run({input})[0].data == first.data);
      CHECK(max_rel_error(first, cpu.run({input})[0]) < 1e-4);
    }
  }
}

TEST_CASE("launch_next_plain: the thread's next overlapped launch waits for the grid before; the ones after overlap") {
  // The request is the thread's, taken by one launch.
  kernels::set_programmatic_launch(true);
  kernels::launch_next_plain();
  CHECK_FALSE(kernels::take_programmatic_launch());
  CHECK(kernels::take_programmatic_launch() == kernels::programmatic_launch());
#if CUDART_VERSION >= 12030
  int device = 0, major = 0;
  REQUIRE(cudaGetDevice(&device) == cudaSuccess);
  REQUIRE(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess);
  if (major < 9 || !kernels::programmatic_launch()) {
    MESSAGE("no programmatic dependent launch on this GPU; the graph edges are not checked");
    return;
  }
  // Three pooling launches captured: A, then B after launch_next_plain(), then C. A -> B must be a full
  // dependency, B -> C a programmatic one.
  gpu::DeviceAllocation x(4 * 8 * 8 * sizeof(float)), y(4 * 4 * 4 * sizeof(float));
  kernels::Pool2dDesc desc;
  desc.planes = 4;
  desc.rows = {8, 4, 2, 2};
  desc.cols = {8, 4, 2, 2};
  cudaStream_t stream = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess);
  cudaGraph_t graph = nullptr;
  REQUIRE(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
  kernels::launch_pool2d(kernels::PoolOp::Max, x.floats(), y.floats(), desc, stream);
  kernels::launch_next_plain();
  kernels::launch_pool2d(kernels::PoolOp::Max, x.floats(), y.floats(), desc, stream);
  kernels::launch_pool2d(kernels::PoolOp::Max, x.floats(), y.floats(), desc, stream);
  REQUIRE(cudaStreamEndCapture(stream, &graph) == cudaSuccess);
  cudaGraphNode_t from[4], to[4];
  cudaGraphEdgeData data[4] = {};
  size_t edges = 4;
#if CUDART_VERSION >= 13000
  REQUIRE(cudaGraphGetEdges(graph, from, to, data, &edges) == cudaSuccess);
#else
  REQUIRE(cudaGraphGetEdges_v2(graph, from, to, data, &edges) == cudaSuccess);
#endif
  REQUIRE(edges == 2);
  // A -> B is the edge whose head is the other's tail.
  const size_t a_edge = (from[0] == to[1]) ? 1 : 0;
  CHECK(data[a_edge].type == cudaGraphDependencyTypeDefault);
  CHECK(data[1 - a_edge].type == cudaGraphDependencyTypeProgrammatic);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
#endif
}

TEST_CASE("runs queue on the caller's stream") {
  // enqueue() takes device pointers and a batch size, so the model's other dimensions must be fixed:
  // the shipped classifier (edges.onnx has a symbolic image size).
  const Model model = Model::load(repo_path("models/fashion_lenet.onnx"), options_for(Device::Gpu));
  const Model cpu = Model::load(repo_path("models/fashion_lenet.onnx"), options_for(Device::Cpu));
  cudaStream_t stream = nullptr;
  GPU_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  {
    Context context(model, stream);
    CHECK(context.stream() == stream);
    const int64_t batch = 3;
    const Tensor input{{batch, 1, 28, 28}, testing::random_floats(batch * 784, 5, 0.0f, 1.0f)};
    testing::DeviceBuffer d_in(input.data), d_out(batch * 10);
    const float* in = d_in.get();
    float* out = d_out.get();
    context.enqueue(&in, &out, batch);
    GPU_CHECK(cudaStreamSynchronize(stream));  // the caller's own wait is enough
    std::vector<float> got(batch * 10);
    GPU_CHECK(cudaMemcpy(got.data(), out, got.size() * sizeof(float), cudaMemcpyDeviceToHost));
    const Tensor want = Context(cpu).run({input})[0];
    CHECK(max_rel_error(Tensor{want.shape, got}, want) < 1e-4);
  }
  GPU_CHECK(cudaStreamDestroy(stream));
}

TEST_CASE("set_stream moves a context between its own stream and the caller's, and runs stay right") {
  const Model model = Model::load(repo_path("models/fashion_lenet.onnx"), options_for(Device::Gpu));
  const Model cpu = Model::load(repo_path("models/fashion_lenet.onnx"), options_for(Device::Cpu));
  const Tensor input{{2, 1, 28, 28}, testing::random_floats(2 * 784, 9, 0.0f, 1.0f)};
  const Tensor want = Context(cpu).run({input})[0];
  cudaStream_t mine = nullptr;
  GPU_CHECK(cudaStreamCreateWithFlags(&mine, cudaStreamNonBlocking));
  {
    Context context(model);
    CHECK(max_rel_error(context.run({input})[0], want) < 1e-4);  // executor exists on the own stream
    context.set_stream(context.stream());  // its own stream again: kept, not destroyed
    CHECK(max_rel_error(context.run({input})[0], want) < 1e-4);
    context.set_stream(mine);  // the own stream is destroyed after the executor has left it
    CHECK(context.stream() == mine);
    CHECK(max_rel_error(context.run({input})[0], want) < 1e-4);
    context.set_stream(nullptr);  // back to a fresh own stream; the caller's stays alive
    CHECK(context.stream() != mine);
    CHECK(max_rel_error(context.run({input})[0], want) < 1e-4);
  }
  GPU_CHECK(cudaStreamSynchronize(mine));
  GPU_CHECK(cudaStreamDestroy(mine));
}

TEST_CASE("profiling reports a GPU time for every step, and the steps cover every ONNX node") {
  const Model model = Model::load(repo_path("models/fashion_lenet.onnx"), options_for(Device::Gpu));
  Context context(model);
  const Tensor input{{64, 1, 28, 28}, testing::random_floats(64 * 784, 3)};
  const std::vector<StepTiming> steps = context.profile({input}, 10);
  REQUIRE(!steps.empty());
  std::set<std::string> covered;
  for (const StepTiming& s : steps) {
    CHECK_MESSAGE(s.median_ms > 0, s.step);
    CHECK_MESSAGE(!s.kernel.empty(), s.step);
    covered.insert(s.nodes.begin(), s.nodes.end());
  }
  for (const char* node : {"/conv1/Conv", "/Relu", "/MaxPool", "/conv2/Conv", "/Relu_1", "/MaxPool_1", "/fc/Gemm"}) {
    CHECK_MESSAGE(covered.count(node) == 1, node << " is in no step");
  }
}

TEST_CASE("every graph pass on and every pass off give the same outputs on the GPU") {
  Options off = options_for(Device::Gpu);
  off.disabled_passes = all_pass_names();
  for (const std::string& path : {repo_path("models/fashion_lenet.onnx"),
                                  repo_path("tests/data/lenet_bn_opset13/model.onnx"),
                                  repo_path("tests/data/resnet_basic_block_opset13/model.onnx"),
                                  repo_path("tests/data/depthwise_pointwise_opset17/model.onnx"),
                                  repo_path("tests/data/activations_opset13/model.onnx")}) {
    CAPTURE(path);
    const Model fused = Model::load(path, options_for(Device::Gpu));
    const Model plain = Model::load(path, off);
    std::vector<int64_t> shape = fused.inputs()[0].shape;
    for (int64_t& d : shape) d = d < 0 ? 3 : d;
    int64_t count = 1;
    for (int64_t d : shape) count *= d;
    const Tensor input{shape, testing::random_floats(size_t(count), 17)};
    const Tensor a = Context(fused).run({input})[0], b = Context(plain).run({input})[0];
    CHECK(max_rel_error(a, b) < 1e-5);
  }
}

TEST_CASE("enqueue refuses a host pointer where device memory belongs, naming which one") {
  const Model model = Model::load(repo_path("models/fashion_lenet.onnx"), options_for(Device::Gpu));
  Context context(model);
  std::vector<float> host_in(784, 0.5f), host_out(10, 0.0f);
  testing::DeviceBuffer d_in(host_in), d_out(10);
  const float* in_host = host_in.data();
  const float* in_dev = d_in.get();
  float* out_host = host_out.data();
  float* out_dev = d_out.get();
  // enqueue must refuse the pair with an InvalidInput error naming `which`.
  auto expect_refused = [&](const float* in, float* out, const std::string& which) {
    CAPTURE(which);
    try {
      context.enqueue(&in, &out, 1);
      FAIL("a pageable host pointer was accepted");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::InvalidInput);
      CHECK(std::string(e.what()).find(which + " is not device memory") != std::string::npos);
    }
  };
  expect_refused(in_host, out_dev, "input 0");
  expect_refused(in_dev, out_host, "output 0");
  context.enqueue(&in_dev, &out_dev, 1);  // and the context still works
  context.synchronize();
  CHECK(std::isfinite(d_out.download()[0]));
}
