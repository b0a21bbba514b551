// launch_gemm against the CPU reference (sums in double): ONNX Gemm with every transpose combination, alpha,
// beta and each broadcast form of C, and MatMul with 1-D operands and broadcast batch axes. Sizes cover the
// small-M kernels (both layouts of B, one to four chunks of 4 rows), partial 64 x 64 tiles, K not a multiple
// of 16, K = 0 and 1000; K split over blocks (poisoned workspace) and the fused activation.
#include <algorithm>

#include "cnnrt/cnnrt.hpp"
#include "kernel_test_util.hpp"
#include "tests/model_builder.hpp"
#include "kernels/gemm.cuh"
#include "kernels/gemm_cublas.hpp"

namespace cnnrt::testing {
namespace {

struct GemmCase {
  int64_t m, n, k;
  bool trans_a, trans_b;
  float alpha, beta;
  bool has_c;
  ir::Shape c_shape;
};

TEST_CASE("Gemm matches the CPU reference") {
  const std::vector<GemmCase> cases = {
      {1, 1, 1, false, false, 1.0f, 1.0f, false, {}},
      {1, 1000, 33, false, true, 1.0f, 1.0f, true, {1000}},       // FC, weights [N, K]: a warp per column
      {1, 1000, 512, false, false, 1.0f, 1.0f, true, {1, 1000}},  // FC, weights [K, N]: 32 columns x 8 K-slices
      {3, 7, 31, true, false, 0.5f, 2.0f, true, {3, 1}},
      {4, 5, 1000, true, true, 1.0f, 0.5f, true, {}},     // scalar C
      {5, 5, 5, false, false, 1.0f, 1.0f, true, {5, 5}},  // two chunks of rows, the second of one row
      {8, 84, 120, false, true, 1.0f, 1.0f, true, {84}},   // LeNet's f6 at batch 8: rows in two chunks
      {13, 10, 84, true, true, 1.0f, 1.0f, true, {10}},    // A transposed, a partial last chunk
      {16, 128, 3136, false, true, 1.0f, 1.0f, true, {128}},  // batch 16: 4 chunks, warps split K, float4
      {16, 70, 515, false, false, 2.0f, 0.5f, true, {16, 70}},  // B along N: 32 columns x 8 K-slices a chunk
      {17, 33, 40, false, true, 1.0f, 1.0f, true, {33}},   // just above the small-M kernels: tiled
      {33, 31, 7, true, true, -1.5f, 1.0f, true, {33, 31}},
      {64, 64, 64, false, false, 1.0f, 1.0f, false, {}},
      {65, 129, 17, false, true, 1.0f, -1.0f, true, {1, 129}},
      {1000, 33, 100, true, false, 1.0f, 1.0f, true, {33}},
      {128, 1000, 257, false, true, 1.0f, 1.0f, true, {1000}},  // FC at batch 128
      {7, 1, 1000, false, true, 1.0f, 1.0f, true, {7, 1}},
      {1, 128, 3136, false, true, 1.0f, 1.0f, true, {128}},  // FC at batch 1: 8 warps a column, float4
      {2, 10, 4099, false, true, 1.0f, 1.0f, true, {10}},    // K not a multiple of 4: 8 warps a column, floats
      {5, 3, 0, false, false, 1.0f, 2.0f, true, {3}},  // K = 0: only beta * C
      {2, 3, 4, true, false, 1.0f, 1.0f, true, {1}},
  };
  uint32_t seed = 1000;
  for (const GemmCase& c : cases) {
    INFO("Gemm M=" << c.m << " N=" << c.n << " K=" << c.k << " transA=" << c.trans_a << " transB=" << c.trans_b
                   << " C=" << (c.has_c ? ir::shape_str(c.c_shape) : "none"));
    const ir::Shape a_shape = c.trans_a ? ir::Shape{c.k, c.m} : ir::Shape{c.m, c.k};
    const ir::Shape b_shape = c.trans_b ? ir::Shape{c.n, c.k} : ir::Shape{c.k, c.n};
    const ir::HostTensor a = random_tensor(a_shape, seed++);
    const ir::HostTensor b = random_tensor(b_shape, seed++);
    const ir::HostTensor cin = random_tensor(c.c_shape, seed++);
    std::vector<const ir::HostTensor*> inputs = {&a, &b};
    if (c.has_c) inputs.push_back(&cin);
    const ir::Attributes attrs = make_attrs({{"alpha", c.alpha},
                                             {"beta", c.beta},
                                             {"transA", int64_t{c.trans_a ? 1 : 0}},
                                             {"transB", int64_t{c.trans_b ? 1 : 0}}});
    const ir::HostTensor want = cpu_reference("Gemm", attrs, inputs, {c.m, c.n});

    DeviceBuffer a_device(a.float_values());
    DeviceBuffer b_device(b.float_values());
    DeviceBuffer c_device(cin.float_values());
    DeviceBuffer out(static_cast<size_t>(want.numel()));
    const kernels::GemmDesc desc =
        kernels::onnx_gemm_desc(a_shape.data(), c.trans_a, b_shape.data(), c.trans_b, c.alpha, c.beta,
                                c.has_c ? static_cast<int>(c.c_shape.size()) : -1, c.c_shape.data());
    kernels::launch_gemm(a_device.get(), b_device.get(), c.has_c ? c_device.get() : nullptr, out.get(), desc, nullptr);
    finish_launch();
    CHECK(error_against(out, want) < kTolerance);
  }
}

TEST_CASE("Gemm with K split over blocks and a fused activation matches the CPU reference") {
  struct SplitCase {
    int64_t m, n, k;
    bool trans_a;
    kernels::ParamAct act;
  };
  const std::vector<SplitCase> cases = {
      {17, 128, 2048, false, kernels::ParamAct::Relu},  // a classifier at batch 17: 2 tiles
      {32, 16, 1920, false, kernels::ParamAct::None},   // a low-rank bottleneck: 1 tile
      {16, 128, 2048, false, kernels::ParamAct::Relu},  // batch 16: the small-M kernels, no split
      {256, 120, 400, false, kernels::ParamAct::Tanh},  // LeNet's first fully connected layer at batch 256
      {33, 70, 1000, true, kernels::ParamAct::Clip},    // partial tiles, K not a multiple of the split
      {5, 1000, 64, false, kernels::ParamAct::None},    // K too shallow to split
  };
  uint32_t seed = 1200;
  for (const SplitCase& c : cases) {
    const ir::Shape a_shape = c.trans_a ? ir::Shape{c.k, c.m} : ir::Shape{c.m, c.k};
    const ir::Shape b_shape = {c.n, c.k};
    const ir::Shape c_shape = {c.n};
    const ir::HostTensor a = random_tensor(a_shape, seed++);
    const ir::HostTensor b = random_tensor(b_shape, seed++);
    const ir::HostTensor cin = random_tensor(c_shape, seed++);
    const ir::Attributes attrs = make_attrs({{"transA", int64_t{c.trans_a ? 1 : 0}}, {"transB", int64_t{1}}});
    ir::HostTensor want = cpu_reference("Gemm", attrs, {&a, &b, &cin}, {c.m, c.n});
    kernels::GemmDesc desc = kernels::onnx_gemm_desc(a_shape.data(), c.trans_a, b_shape.data(), true, 1.0f, 1.0f, 1,
                                                     c_shape.data());
    desc.act = c.act;
    desc.act_alpha = -0.5f;
    desc.act_beta = 0.5f;
    float* w = want.f32();
    for (int64_t i = 0; i < want.numel(); ++i) w[i] = kernels::apply_activation(c.act, w[i], -0.5f, 0.5f);
    desc.split_k = kernels::gemm_split_k(desc, 132);
    INFO("Gemm M=" << c.m << " N=" << c.n << " K=" << c.k << " split " << desc.split_k);
    if (c.m <= 16) {
      CHECK(desc.split_k == 1);  // the small-M kernels take K whole
    } else if (c.k >= 400) {
      CHECK(desc.split_k > 1);
    }
    CHECK(int64_t(desc.split_k) * 64 <= c.k + 63);  // every split at least 4 slices of 16, none empty
    DeviceBuffer a_device(a.float_values());
    DeviceBuffer b_device(b.float_values());
    DeviceBuffer c_device(cin.float_values());
    DeviceBuffer out(static_cast<size_t>(want.numel()));
    DeviceBuffer workspace(static_cast<size_t>(std::max<int64_t>(1, kernels::gemm_workspace_floats(desc))));
    kernels::launch_gemm(a_device.get(), b_device.get(), c_device.get(), out.get(), desc, nullptr, workspace.get());
    finish_launch();
    CHECK(error_against(out, want) < kTolerance);
  }
}

// Every cuBLASLt algorithm the heuristic offers, against the CPU reference: each epilogue form (none, the row bias
// with and without ReLU, a whole C matrix with beta; Tanh and Clip as a pass after the product), both transposes,
// odd sizes from 1 to 1000, outputs poisoned before each run and a second run equal bit for bit; operands off the
// alignment an algorithm was chosen for (run by launch_gemm instead, the same answer); none for a form cuBLASLt is
// not offered.
TEST_CASE("cuBLASLt Gemm candidates match the CPU reference") {
  struct LtCase {
    int64_t m, n, k;
    bool trans_a, trans_b;
    float alpha, beta;
    ir::Shape c_shape;  // empty: no C
    kernels::ParamAct act;
  };
  using kernels::ParamAct;
  const std::vector<LtCase> cases = {
      {1, 1, 1, false, false, 1.0f, 1.0f, {}, ParamAct::None},
      {1, 128, 3136, false, true, 1.0f, 1.0f, {128}, ParamAct::Relu},    // a fully connected layer at batch 1
      {7, 31, 33, true, false, 0.5f, 1.0f, {1, 31}, ParamAct::None},      // row bias [1, N], A transposed
      {33, 1000, 31, false, true, 1.0f, 1.0f, {1000}, ParamAct::None},   // a classifier head
      {31, 7, 1000, true, true, -1.5f, 0.5f, {31, 7}, ParamAct::Relu},   // C matrix with beta, ReLU after it
      {1000, 33, 7, false, false, 1.0f, 2.0f, {1000, 33}, ParamAct::None},
      {256, 120, 400, false, true, 1.0f, 1.0f, {120}, ParamAct::Relu},   // LeNet's first dense layer, batch 256
      {4096, 10, 84, false, true, 1.0f, 1.0f, {10}, ParamAct::None},     // its last at batch 4096
      {33, 120, 400, false, true, 1.0f, 1.0f, {120}, ParamAct::Tanh},    // LeNet-5's: Tanh in a pass of its own
      {7, 9, 31, true, false, 1.0f, 1.0f, {}, ParamAct::Clip},          // Clip(-0.5, 0.5) after the product
  };
  uint32_t seed = 1500;
  size_t algorithms = 0;
  for (const LtCase& c : cases) {
    const bool has_c = !c.c_shape.empty();
    INFO("cuBLASLt Gemm M=" << c.m << " N=" << c.n << " K=" << c.k << " transA=" << c.trans_a << " transB="
                            << c.trans_b << " C=" << (has_c ? ir::shape_str(c.c_shape) : "none"));
    const ir::Shape a_shape = c.trans_a ? ir::Shape{c.k, c.m} : ir::Shape{c.m, c.k};
    const ir::Shape b_shape = c.trans_b ? ir::Shape{c.n, c.k} : ir::Shape{c.k, c.n};
    const ir::HostTensor a = random_tensor(a_shape, seed++);
    const ir::HostTensor b = random_tensor(b_shape, seed++);
    const ir::HostTensor cin = random_tensor(has_c ? c.c_shape : ir::Shape{1}, seed++);
    std::vector<const ir::HostTensor*> inputs = {&a, &b};
    if (has_c) inputs.push_back(&cin);
    const ir::Attributes attrs = make_attrs({{"alpha", c.alpha},
                                             {"beta", c.beta},
                                             {"transA", int64_t{c.trans_a ? 1 : 0}},
                                             {"transB", int64_t{c.trans_b ? 1 : 0}}});
    ir::HostTensor want = cpu_reference("Gemm", attrs, inputs, {c.m, c.n});
    float* w = want.f32();
    for (int64_t i = 0; i < want.numel(); ++i) w[i] = kernels::apply_activation(c.act, w[i], -0.5f, 0.5f);
    kernels::GemmDesc desc =
        kernels::onnx_gemm_desc(a_shape.data(), c.trans_a, b_shape.data(), c.trans_b, c.alpha, c.beta,
                                has_c ? static_cast<int>(c.c_shape.size()) : -1, c.c_shape.data());
    desc.act = c.act;
    desc.act_alpha = -0.5f;
    desc.act_beta = 0.5f;
    REQUIRE(kernels::CublasGemm::unsupported(desc, has_c).empty());
    const auto algos = kernels::CublasGemm::algorithms(desc, has_c, 3);
    CHECK(!algos.empty());
    // A and the output one float past an aligned address (a view's offset): launch_gemm runs them.
    DeviceBuffer a_device(static_cast<size_t>(a.numel()) + 4);
    DeviceBuffer b_device(b.float_values());
    DeviceBuffer c_device(cin.float_values());
    DeviceBuffer out(static_cast<size_t>(want.numel()) + 4);
    DeviceBuffer workspace(kernels::CublasGemm::kWorkspaceBytes / 4);
    for (const size_t offset : {size_t(0), size_t(1)}) {
      std::vector<float> host_a(a_device.size(), 0.0f);
      std::copy(a.float_values().begin(), a.float_values().end(), host_a.begin() + static_cast<std::ptrdiff_t>(offset));
      a_device.upload(host_a);
      for (size_t i = 0; i < algos.size(); ++i) {
        INFO("algorithm " << i << ", operands " << offset << " floats off");
        std::vector<float> first;
        for (int run = 0; run < 2; ++run) {
          out.poison();
          algos[i]->launch(a_device.get() + offset, b_device.get(), has_c ? c_device.get() : nullptr,
                           out.get() + offset, workspace.get(), nullptr);
          finish_launch();
          const std::vector<float> all = out.download();
          const std::vector<float> got(all.begin() + static_cast<std::ptrdiff_t>(offset),
                                       all.begin() + static_cast<std::ptrdiff_t>(offset + want.float_values().size()));
          if (run == 0) {
            CHECK(relative_error(got, want.float_values()) < kTolerance);
            first = got;
          } else {
            CHECK(got == first);
          }
        }
      }
    }
    algorithms += algos.size();
  }
  MESSAGE(algorithms << " cuBLASLt algorithms checked");

  // What cuBLASLt is not offered (tests/test_gemm_cublas.cpp has every form) yields no algorithm.
  const int64_t c_row[] = {5};
  kernels::GemmDesc scaled_bias = kernels::onnx_gemm_desc(std::vector<int64_t>{4, 8}.data(), false,
                                                          std::vector<int64_t>{8, 5}.data(), false, 1.0f, 0.5f, 1, c_row);
  REQUIRE(!kernels::CublasGemm::unsupported(scaled_bias, true).empty());
  CHECK(kernels::CublasGemm::algorithms(scaled_bias, true, 3).empty());
}

// numpy matmul output shape: 1-D operands are promoted and their unit axis dropped again.
ir::Shape matmul_shape(const ir::Shape& a, const ir::Shape& b) {
  const ir::Shape a_batch(a.begin(), a.size() > 2 ? a.end() - 2 : a.begin());
  const ir::Shape b_batch(b.begin(), b.size() > 2 ? b.end() - 2 : b.begin());
  ir::Shape out = a_batch.size() >= b_batch.size() ? a_batch : b_batch;
  const ir::Shape& shorter = a_batch.size() >= b_batch.size() ? b_batch : a_batch;
  for (size_t i = 0; i < shorter.size(); ++i) {
    int64_t& extent = out[out.size() - shorter.size() + i];
    if (extent == 1) extent = shorter[i];
  }
  if (a.size() >= 2) out.push_back(a[a.size() - 2]);
  if (b.size() >= 2) out.push_back(b.back());
  return out;
}

TEST_CASE("MatMul matches the CPU reference") {
  struct MatMulCase {
    ir::Shape a;
    ir::Shape b;
  };
  const std::vector<MatMulCase> cases = {
      {{3, 4}, {4, 5}},
      {{4}, {4, 6}},              // 1-D A
      {{2, 3, 4}, {4}},           // 1-D B
      {{6}, {6}},                 // both 1-D: a scalar
      {{2, 1, 5, 7}, {3, 7, 6}},  // batch axes broadcast both ways
      {{1, 33, 31}, {5, 31, 1}},
      {{4, 1, 64}, {64, 100}},                 // M = 1 per batch, B shared by every batch
      {{2, 2, 2, 65, 33}, {2, 2, 2, 33, 70}},  // rank 5
      {{8, 2, 100}, {8, 100, 3}},
      {{3, 11, 50}, {50, 20}},  // 11 rows a batch in 3 chunks, B shared by every batch
  };
  uint32_t seed = 1100;
  for (const MatMulCase& c : cases) {
    const ir::Shape out_shape = matmul_shape(c.a, c.b);
    INFO("MatMul " << ir::shape_str(c.a) << " x " << ir::shape_str(c.b) << " -> " << ir::shape_str(out_shape));
    const ir::HostTensor a = random_tensor(c.a, seed++);
    const ir::HostTensor b = random_tensor(c.b, seed++);
    const ir::HostTensor want = cpu_reference("MatMul", {}, {&a, &b}, out_shape);
    DeviceBuffer a_device(a.float_values());
    DeviceBuffer b_device(b.float_values());
    DeviceBuffer out(static_cast<size_t>(want.numel()));
    const kernels::GemmDesc desc =
        kernels::matmul_desc(static_cast<int>(c.a.size()), c.a.data(), static_cast<int>(c.b.size()), c.b.data());
    kernels::launch_gemm(a_device.get(), b_device.get(), nullptr, out.get(), desc, nullptr);
    finish_launch();
    CHECK(error_against(out, want) < kTolerance);
  }
}

// The model `bytes` on `device` at one batch, tuned afresh (or with `forced`'s kernels); its plan, explained, into
// `plan` when given.
std::vector<Tensor> run_model(const std::string& bytes, Device device, const std::string& forced,
                              const std::vector<Tensor>& inputs, int64_t batch, std::string* plan) {
  Options options;
  options.device = device;
  options.batch_sizes = {batch};
  options.tuning_cache = "none";
  options.force_kernel = forced;
  const Model model = Model::load_from_memory(bytes.data(), bytes.size(), options, "model.onnx");
  Context context(model);
  std::vector<Tensor> out = context.run(inputs);
  if (plan) *plan = model.describe_plan(batch, true);
  return out;
}

}  // namespace

// A classifier head at batch 256 (beyond the dense chain kernel's batches): Gemm + ReLU, then Gemm. Measured, the
// plan times cuBLASLt beside our kernel and reports both; forced, cuBLASLt runs both steps. Either way the GPU's
// outputs match the CPU backend's.
TEST_CASE("Gemm steps offer cuBLASLt beside our kernel, measured") {
  ModelBuilder m;
  m.input("x", {-1, 256}).output("y");
  const std::vector<float> w1 = random_floats(64 * 256, 1601, -0.1f, 0.1f), b1 = random_floats(64, 1602);
  const std::vector<float> w2 = random_floats(10 * 64, 1603, -0.2f, 0.2f), b2 = random_floats(10, 1604);
  m.initializer("w1", {64, 256}, w1).initializer("b1", {64}, b1).initializer("w2", {10, 64}, w2).initializer("b2", {10}, b2);
  ModelBuilder::attr_int(m.node("Gemm", {"x", "w1", "b1"}, {"h"}, "fc1"), "transB", 1);
  m.node("Relu", {"h"}, {"r"}, "relu");
  ModelBuilder::attr_int(m.node("Gemm", {"r", "w2", "b2"}, {"y"}, "fc2"), "transB", 1);
  const std::string bytes = m.bytes();
  const int64_t batch = 256;
  const std::vector<Tensor> inputs = {{{batch, 256}, random_floats(static_cast<size_t>(batch * 256), 1605)}};

  const std::vector<Tensor> want = run_model(bytes, Device::Cpu, "", inputs, batch, nullptr);
  for (const std::string forced : {"", "cublaslt"}) {
    std::string plan;
    const std::vector<Tensor> got = run_model(bytes, Device::Gpu, forced, inputs, batch, &plan);
    INFO("forced '" << forced << "'\n" << plan);
    CHECK(plan.find("cublaslt_h0") != std::string::npos);
    if (forced.empty()) {
      CHECK(plan.find("measured") != std::string::npos);
    } else {
      CHECK(occurrences(plan, "cuBLASLt's algorithm") == 2);
    }
    REQUIRE(got.size() == 1);
    CHECK(relative_error(got[0].data, want[0].data) < kTolerance);
  }
}

// A squeeze-and-excitation gate's two 1x1 convolutions of 1x1 maps at batch 256: the first with a bias and a
// Sigmoid, the second without a bias and with the first's output added back (a residual). Both are fully connected
// layers, offered to the Gemm kernels beside the convolution families; measured, and forced onto our Gemm kernel and
// onto cuBLASLt, the GPU's outputs match the CPU backend's.
TEST_CASE("1x1 convolutions of 1x1 maps are offered to the Gemm kernels") {
  ModelBuilder m;
  m.input("x", {-1, 64, 1, 1}).output("y");
  m.initializer("w1", {96, 64, 1, 1}, random_floats(96 * 64, 1701, -0.2f, 0.2f));
  m.initializer("b1", {96}, random_floats(96, 1702));
  m.initializer("w2", {96, 96, 1, 1}, random_floats(96 * 96, 1703, -0.2f, 0.2f));
  m.node("Conv", {"x", "w1", "b1"}, {"c1"}, "conv1");
  m.node("Sigmoid", {"c1"}, {"s1"}, "gate");
  m.node("Conv", {"s1", "w2"}, {"c2"}, "conv2");
  m.node("Add", {"c2", "s1"}, {"y"}, "residual");
  const std::string bytes = m.bytes();
  const int64_t batch = 256;
  const std::vector<Tensor> inputs = {{{batch, 64, 1, 1}, random_floats(static_cast<size_t>(batch * 64), 1704)}};
  const std::vector<Tensor> want = run_model(bytes, Device::Cpu, "", inputs, batch, nullptr);
  for (const std::string forced : {"", "gemm", "cublaslt"}) {
    std::string plan;
    const std::vector<Tensor> got = run_model(bytes, Device::Gpu, forced, inputs, batch, &plan);
    INFO("forced '" << forced << "'\n" << plan);
    if (forced.empty()) {  // timed beside the convolution families, on both layers
      CHECK(occurrences(plan, "gemm+activation") >= 1);
      CHECK(occurrences(plan, "cublaslt_h0") >= 2);
    } else {
      CHECK(occurrences(plan, "forced") == 2);
      CHECK(occurrences(plan, "as a matrix product") >= 2);
    }
    REQUIRE(got.size() == 1);
    CHECK(relative_error(got[0].data, want[0].data) < kTolerance);
  }
}

}  // namespace cnnrt::testing
