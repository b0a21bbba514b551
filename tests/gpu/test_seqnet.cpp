// The sequence kernel (kernels/seqnet.cuh): networks planned through it, forced, against the CPU backend.
// A 1-D network (odd channel counts and lengths, stride, unequal padding, dilation, a depthwise layer, max and
// average pools, a standalone normalization, a global pool, two dense layers) and a 2-D one (a non-square
// filter of uneven padding and stride, an average pool counting its padding, a grouped layer, a 1x1 layer and
// a max pool, a flatten into dense layers), and one of residuals, nested Concats, a depthwise layer and a
// squeeze-excitation gate, at batches 1, 3 and 7, on every variant, each as built and as compiled for the model at
// plan time; zoo networks' tails. Random inputs and weights; the kernel writes no intermediate to global memory, so
// a halo or share it forgot to write shows up in the output.
#include <string>
#include <vector>

#include "cnnrt/cnnrt.hpp"
#include "gpu/device_info.hpp"
#include "gpu_test_util.hpp"
#include "kernel_test_util.hpp"
#include "kernels/seqnet.cuh"
#include "tests/model_builder.hpp"

namespace cnnrt::testing {
namespace {

struct Builder {
  ModelBuilder m;
  uint32_t seed = 500;
  onnx::NodeProto& conv(const std::string& in, const std::string& out, std::vector<int64_t> w_dims, bool bias = true) {
    size_t n = 1;
    for (int64_t d : w_dims) n *= static_cast<size_t>(d);
    m.initializer("w_" + out, w_dims, random_floats(n, seed++, -0.5f, 0.5f));
    if (!bias) return m.node("Conv", {in, "w_" + out}, {out}, out);
    m.initializer("b_" + out, {w_dims[0]}, random_floats(static_cast<size_t>(w_dims[0]), seed++, -0.3f, 0.3f));
    return m.node("Conv", {in, "w_" + out, "b_" + out}, {out}, out);
  }
  void gemm(const std::string& in, const std::string& out, int64_t k, int64_t n) {
    m.initializer("w_" + out, {n, k}, random_floats(static_cast<size_t>(n * k), seed++, -0.5f, 0.5f));
    m.initializer("b_" + out, {n}, random_floats(static_cast<size_t>(n), seed++, -0.3f, 0.3f));
    ModelBuilder::attr_int(m.node("Gemm", {in, "w_" + out, "b_" + out}, {out}, out), "transB", 1);
  }
};

// x [N, 7, 333] -> Conv1d 7->31 k7 s2 pads (3, 2) + Relu -> MaxPool k3 s2 p1 -> BatchNormalization -> Conv1d
// 31->33 k5 dilation 2 pads 4 + LeakyRelu -> depthwise Conv1d k3 s3 p1 + HardSigmoid -> Conv1d 1x1 33->32 ->
// AveragePool k2 s2 -> GlobalAveragePool -> Flatten -> Gemm 32->10 + Sigmoid -> Gemm 10->7.
std::string series_model() {
  Builder b;
  ModelBuilder& m = b.m;
  m.input("x", {-1, 7, 333}).output("y");
  auto& c1 = b.conv("x", "c1", {31, 7, 7});
  ModelBuilder::attr_ints(c1, "strides", {2});
  ModelBuilder::attr_ints(c1, "pads", {3, 2});
  m.node("Relu", {"c1"}, {"r1"}, "r1");
  auto& p1 = m.node("MaxPool", {"r1"}, {"p1"}, "p1");
  ModelBuilder::attr_ints(p1, "kernel_shape", {3});
  ModelBuilder::attr_ints(p1, "strides", {2});
  ModelBuilder::attr_ints(p1, "pads", {1, 1});
  m.initializer("bn_s", {31}, random_floats(31, 40, 0.5f, 1.5f)).initializer("bn_b", {31}, random_floats(31, 41));
  m.initializer("bn_m", {31}, random_floats(31, 42)).initializer("bn_v", {31}, random_floats(31, 43, 0.5f, 1.5f));
  m.node("BatchNormalization", {"p1", "bn_s", "bn_b", "bn_m", "bn_v"}, {"n1"}, "n1");
  auto& c2 = b.conv("n1", "c2", {33, 31, 5});
  ModelBuilder::attr_ints(c2, "dilations", {2});
  ModelBuilder::attr_ints(c2, "pads", {4, 4});
  ModelBuilder::attr_float(m.node("LeakyRelu", {"c2"}, {"r2"}, "r2"), "alpha", 0.1f);
  auto& c3 = b.conv("r2", "c3", {33, 1, 3});
  ModelBuilder::attr_int(c3, "group", 33);
  ModelBuilder::attr_ints(c3, "strides", {3});
  ModelBuilder::attr_ints(c3, "pads", {1, 1});
  m.node("HardSigmoid", {"c3"}, {"r3"}, "r3");
  b.conv("r3", "c4", {32, 33, 1}, false);
  auto& p4 = m.node("AveragePool", {"c4"}, {"p4"}, "p4");
  ModelBuilder::attr_ints(p4, "kernel_shape", {2});
  ModelBuilder::attr_ints(p4, "strides", {2});
  m.node("GlobalAveragePool", {"p4"}, {"g"}, "g");
  m.node("Flatten", {"g"}, {"f"}, "f");
  b.gemm("f", "d1", 32, 10);
  m.node("Sigmoid", {"d1"}, {"s1"}, "s1");
  b.gemm("s1", "y", 10, 7);
  return m.bytes();
}

// x [N, 3, 31, 33] -> Conv 3->8 3x5 s(2, 1) pads (1, 2, 0, 2) + Tanh -> AveragePool 3x3 s2 p1 counting the
// padding -> Conv 8->16 3x3 group 4 p1 + Relu -> Conv 1x1 16->16 -> MaxPool 2x2 s2 -> Flatten -> Gemm 512->31 +
// Relu -> Gemm 31->5.
std::string image_model() {
  Builder b;
  ModelBuilder& m = b.m;
  m.input("x", {-1, 3, 31, 33}).output("y");
  auto& c1 = b.conv("x", "c1", {8, 3, 3, 5});
  ModelBuilder::attr_ints(c1, "strides", {2, 1});
  ModelBuilder::attr_ints(c1, "pads", {1, 2, 0, 2});
  m.node("Tanh", {"c1"}, {"t1"}, "t1");
  auto& p1 = m.node("AveragePool", {"t1"}, {"p1"}, "p1");
  ModelBuilder::attr_ints(p1, "kernel_shape", {3, 3});
  ModelBuilder::attr_ints(p1, "strides", {2, 2});
  ModelBuilder::attr_ints(p1, "pads", {1, 1, 1, 1});
  ModelBuilder::attr_int(p1, "count_include_pad", 1);
  auto& c2 = b.conv("p1", "c2", {16, 2, 3, 3});
  ModelBuilder::attr_int(c2, "group", 4);
  ModelBuilder::attr_ints(c2, "pads", {1, 1, 1, 1});
  m.node("Relu", {"c2"}, {"r2"}, "r2");
  b.conv("r2", "c3", {16, 16, 1, 1});
  auto& p3 = m.node("MaxPool", {"c3"}, {"p3"}, "p3");
  ModelBuilder::attr_ints(p3, "kernel_shape", {2, 2});
  ModelBuilder::attr_ints(p3, "strides", {2, 2});
  m.node("Flatten", {"p3"}, {"f"}, "f");
  b.gemm("f", "d1", 512, 31);
  m.node("Relu", {"d1"}, {"r4"}, "r4");
  b.gemm("r4", "y", 31, 5);
  return m.bytes();
}

// x [N, 8, 9, 9] -> Conv 3x3 8->12 + Relu (a) -> Conv 3x3 12->12 + a + Relu (b) -> Conv 1x1 12->6 and Conv 3x3
// 12->6 p1, concatenated (d) -> Concat(b, d) (e: 24 channels) -> a channel shuffle of 3 groups -> depthwise 3x3 s2
// p1 + Relu (f, 5x5) -> the
// squeeze-excitation gate: GlobalAveragePool, Conv 1x1 24->6 + Relu, Conv 1x1 6->24 + Sigmoid, f times it (g) ->
// Conv 1x1 24->24 + f + Relu -> GlobalAveragePool -> Flatten -> Gemm 24->5.
std::string graph_model() {
  Builder b;
  ModelBuilder& m = b.m;
  m.input("x", {-1, 8, 9, 9}).output("y");
  auto pads = [](onnx::NodeProto& n, int64_t p) { ModelBuilder::attr_ints(n, "pads", {p, p, p, p}); };
  pads(b.conv("x", "ca", {12, 8, 3, 3}), 1);
  m.node("Relu", {"ca"}, {"a"}, "a");
  pads(b.conv("a", "cb", {12, 12, 3, 3}), 1);
  m.node("Add", {"cb", "a"}, {"ab"}, "ab");
  m.node("Relu", {"ab"}, {"b"}, "b");
  b.conv("b", "d1", {6, 12, 1, 1});
  pads(b.conv("b", "d3", {6, 12, 3, 3}), 1);
  ModelBuilder::attr_int(m.node("Concat", {"d1", "d3"}, {"d"}, "d"), "axis", 1);
  ModelBuilder::attr_int(m.node("Concat", {"b", "d"}, {"e"}, "e"), "axis", 1);
  // A channel shuffle of 3 groups.
  m.int_initializer("shape5", {5}, {0, 3, 8, 9, 9}).int_initializer("shape4", {4}, {0, 24, 9, 9});
  m.node("Reshape", {"e", "shape5"}, {"e5"}, "e5");
  ModelBuilder::attr_ints(m.node("Transpose", {"e5"}, {"t5"}, "t5"), "perm", {0, 2, 1, 3, 4});
  m.node("Reshape", {"t5", "shape4"}, {"es"}, "es");
  auto& dw = b.conv("es", "cf", {24, 1, 3, 3});
  ModelBuilder::attr_int(dw, "group", 24);
  ModelBuilder::attr_ints(dw, "strides", {2, 2});
  pads(dw, 1);
  m.node("Relu", {"cf"}, {"f"}, "f");
  m.node("GlobalAveragePool", {"f"}, {"s0"}, "s0");
  b.conv("s0", "s1", {6, 24, 1, 1});
  m.node("Relu", {"s1"}, {"s2"}, "s2");
  b.conv("s2", "s3", {24, 6, 1, 1});
  m.node("Sigmoid", {"s3"}, {"s4"}, "s4");
  m.node("Mul", {"f", "s4"}, {"g"}, "g");
  b.conv("g", "h0", {24, 24, 1, 1});
  m.node("Add", {"h0", "f"}, {"h1"}, "h1");
  m.node("Relu", {"h1"}, {"h"}, "h");
  m.node("GlobalAveragePool", {"h"}, {"p"}, "p");
  m.node("Flatten", {"p"}, {"fl"}, "fl");
  b.gemm("fl", "y", 24, 5);
  return m.bytes();
}

// `bytes` planned with `forced` at `batch` (the plan must run it) against the CPU backend on one random input.
void check_forced(const std::string& bytes, const char* name, std::vector<int64_t> shape, const std::string& forced,
                  uint32_t seed) {
  const int64_t batch = shape[0];
  const Tensor x{shape, random_floats(static_cast<size_t>(product(shape)), seed)};
  Options cpu_options;
  cpu_options.device = Device::Cpu;
  const Model cpu = Model::load_from_memory(bytes.data(), bytes.size(), cpu_options, name);
  Options gpu_options = forced_gpu_options(forced);
  gpu_options.batch_sizes = {batch};
  const Model gpu = Model::load_from_memory(bytes.data(), bytes.size(), gpu_options, name);
  const std::string plan = gpu.describe_plan(batch);
  CHECK_MESSAGE(plan.find("one launch, " + forced) != std::string::npos, plan);
  const Tensor want = Context(cpu).run({x})[0];
  const Tensor got = Context(gpu).run({x})[0];
  CHECK(max_rel_error(got, want) < 1e-4);
}

// Every variant here, each as built and as compiled for the model at plan time ("_jit").
std::vector<std::string> variants_here() {
  std::vector<std::string> names;
  for (const kernels::SeqVariant& v : kernels::seqnet_variants(gpu::current_device().arch(), max_cluster_size())) {
    names.push_back(v.name);
    names.push_back(v.name + "_jit");
  }
  return names;
}

}  // namespace

TEST_CASE("sequence kernel: 1-D and 2-D chains on every variant match the CPU backend") {
  uint32_t seed = 10;
  for (const std::string& variant : variants_here()) {
    for (int64_t batch : {1, 3, 7}) {
      CAPTURE(variant);
      CAPTURE(batch);
      check_forced(series_model(), "series.onnx", {batch, 7, 333}, variant, seed++);
      check_forced(image_model(), "image.onnx", {batch, 3, 31, 33}, variant, seed++);
      check_forced(graph_model(), "graph.onnx", {batch, 8, 9, 9}, variant, seed++);
    }
  }
}

// The zoo's time-series network whole (three Conv1d + BN + ReLU, two with a max pool, the global pool and the
// dense layer) and VGG's last layers after its steps, at batches 1, 3 and 16; the tails of ResNet-20 (a residual
// from before the cut), DenseNet-BC (Concats in place) and MobileNet v2 (inverted residuals) at batches 1 and 3;
// each through the kernel as built and as compiled for the model.
TEST_CASE("sequence kernel: zoo networks forced through it match the CPU backend") {
  Options cpu_options;
  cpu_options.device = Device::Cpu;
  uint32_t seed = 90;
  struct Case {
    const char* zoo;
    std::vector<int64_t> image;
    std::vector<int64_t> batches;
  };
  const std::vector<Case> cases = {{"ts_cnn1d", {9, 128}, {1, 3, 16}},        {"vgg_small", {1, 64, 64}, {1, 3, 16}},
                                   {"resnet20", {3, 32, 32}, {1, 3}},          {"densenet_bc", {3, 32, 32}, {1, 3}},
                                   {"mobilenet_v2", {3, 96, 96}, {1, 3}}};
  for (const Case& c : cases) {
    const std::string path = repo_path(std::string("models/zoo/") + c.zoo + "/model.onnx");
    const Model cpu = Model::load(path, cpu_options);
    // The first variant here, as built and as compiled for the model's program.
    const std::string first = kernels::seqnet_variants(gpu::current_device().arch(), max_cluster_size()).front().name;
    for (const std::string& forced : {first, first + "_jit"}) {
      const Model gpu = Model::load(path, forced_gpu_options(forced));
      for (int64_t batch : c.batches) {
        CAPTURE(c.zoo);
        CAPTURE(forced);
        CAPTURE(batch);
        const std::string plan = gpu.describe_plan(batch);
        CHECK_MESSAGE(plan.find("one launch, " + forced) != std::string::npos, plan);
        std::vector<int64_t> shape = {batch};
        shape.insert(shape.end(), c.image.begin(), c.image.end());
        const Tensor x{shape, random_floats(static_cast<size_t>(product(shape)), seed++)};
        CHECK(max_rel_error(Context(gpu).run({x})[0], Context(cpu).run({x})[0]) < 1e-4);
      }
    }
  }
}

}  // namespace cnnrt::testing
