// launch_gemm against the CPU reference (sums in double): ONNX Gemm with every transpose combination, alpha,
// beta and each broadcast form of C, and MatMul with 1-D operands and broadcast batch axes. Sizes cover the
// small-M kernels (both layouts of B, one to four chunks of 4 rows), partial 64 x 64 tiles, K not a multiple
// of 16, K = 0 and 1000; K split over blocks (poisoned workspace) and the fused activation.
#include <algorithm>

#include "kernel_test_util.hpp"
#include "kernels/gemm.cuh"

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

}  // namespace
}  // namespace cnnrt::testing
