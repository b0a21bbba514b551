// The chain kernel's plan-time sources (kernels/conv_chain_jit.hpp) compile with NVRTC for the H100, with no
// GPU: every variant of the shipped LeNet's chain. Whether they compute the right thing is the GPU tests'
// part (tests/gpu/test_conv_chain.cpp runs each variant's compiled kernel against the CPU reference).
#include <doctest/doctest.h>

#ifdef CNNRT_WITH_CUDA
#include <stdexcept>
#include <string>

#include "kernels/conv_chain_jit.hpp"

using namespace cnnrt::kernels;

namespace {

PoolGeometry max_pool(int k, int out) {
  PoolGeometry p;
  p.kind = FusedPool::Max;
  p.kh = p.kw = p.sh = p.sw = k;
  p.PH = p.PW = out;
  return p;
}

// models/fashion_lenet.onnx's chain: conv 1->8 5x5 pad 2 on 28x28 + ReLU + 2x2/2 max pool, conv 8->16 5x5
// pad 2 + ReLU + 3x3/3 max pool, 256->10 dense.
ConvChainDesc lenet_chain() {
  ConvChainDesc d;
  d.a.g.C = 1, d.a.g.H = d.a.g.W = 28, d.a.g.F = 8, d.a.g.KH = d.a.g.KW = 5, d.a.g.OH = d.a.g.OW = 28, d.a.g.pad_top = d.a.g.pad_left = 2;
  d.a.e.param_act = ParamAct::Relu, d.a.e.pool = max_pool(2, 14);
  d.b.g.C = 8, d.b.g.H = d.b.g.W = 14, d.b.g.F = 16, d.b.g.KH = d.b.g.KW = 5, d.b.g.OH = d.b.g.OW = 14, d.b.g.pad_top = d.b.g.pad_left = 2;
  d.b.e.param_act = ParamAct::Relu, d.b.e.pool = max_pool(3, 4);
  d.fc.N = 10;
  return d;
}

// LeNet-5's: conv 1->6 5x5 on 32x32 + Tanh + 2x2/2 average pool, conv 6->16 5x5 + Tanh + 2x2/2 average
// pool, 400->120 Tanh, then its tail: 120->84 Tanh, 84->10.
ConvChainDesc lenet5_chain() {
  ConvChainDesc d;
  auto avg_pool = [](int out) {
    PoolGeometry p = max_pool(2, out);
    p.kind = FusedPool::Avg;
    return p;
  };
  d.a.g.C = 1, d.a.g.H = d.a.g.W = 32, d.a.g.F = 6, d.a.g.KH = d.a.g.KW = 5, d.a.g.OH = d.a.g.OW = 28;
  d.a.e.param_act = ParamAct::Tanh, d.a.e.pool = avg_pool(14);
  d.b.g.C = 6, d.b.g.H = d.b.g.W = 14, d.b.g.F = 16, d.b.g.KH = d.b.g.KW = 5, d.b.g.OH = d.b.g.OW = 10;
  d.b.e.param_act = ParamAct::Tanh, d.b.e.pool = avg_pool(5);
  d.fc.N = 120, d.fc.act = ParamAct::Tanh;
  d.tail_count = 2;
  d.tail[0].N = 84, d.tail[0].act = ParamAct::Tanh;
  d.tail[1].N = 10;
  return d;
}

constexpr int kH100SharedMemory = 227 * 1024;

}  // namespace

TEST_CASE("chain JIT: every LeNet variant's source compiles for sm_90 without a GPU") {
  const ConvChainDesc d = lenet_chain();
  const auto variants = conv_chain_variants(d, kH100SharedMemory);
  REQUIRE(variants.size() >= 2);
  for (const ConvChainVariant& v : variants) {
    CAPTURE(v.name);
    const std::string source = conv_chain_jit_source(d, v);
    CHECK(source.find(kChainJitEntry) != std::string::npos);
    const std::string cubin = compile_chain_jit_source(source, 90);
    CHECK(cubin.size() > 1000);
    CHECK(cubin.compare(0, 4, "\x7f" "ELF") == 0);
  }
}

// Compiled for the shapes, the desc's fields are constants: a runtime index into it (the tail's layers in a
// loop the compiler cannot unroll) puts the whole desc in local memory, and every constant with it. ptxas
// says so in the log (--warn-on-local-memory-usage).
TEST_CASE("chain JIT: LeNet-5's kernels, with their dense tail, use no local memory") {
  const ConvChainDesc d = lenet5_chain();
  const auto variants = conv_chain_variants(d, kH100SharedMemory);
  REQUIRE(!variants.empty());
  for (const ConvChainVariant& v : variants) {
    CAPTURE(v.name);
    std::string log;
    compile_chain_jit_source(conv_chain_jit_source(d, v), 90, &log);
    CHECK_MESSAGE(log.find("ocal memory") == std::string::npos, log);  // "Local memory used for function ..."
    CHECK_MESSAGE(log.find("spill") == std::string::npos, log);
  }
}

TEST_CASE("chain JIT: the source depends on the shapes, not on where the weights are") {
  ConvChainDesc d = lenet_chain();
  const ConvChainVariant v = conv_chain_variants(d, kH100SharedMemory).front();
  const std::string before = conv_chain_jit_source(d, v);
  d.a.weights = reinterpret_cast<const float*>(0x1000);
  d.fc.bias = reinterpret_cast<const float*>(0x2000);
  CHECK(conv_chain_jit_source(d, v) == before);
  d.b.e.pool.PH = d.b.e.pool.PW = 5;  // another shape: another kernel
  CHECK(conv_chain_jit_source(d, v) != before);
}

TEST_CASE("chain JIT: a source that does not compile names NVRTC's error") {
  try {
    compile_chain_jit_source("#include \"kernels/conv_chain_device.cuh\"\nthis is not C++;\n", 90);
    FAIL("compiled");
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    CHECK(what.find("NVRTC could not compile the chain kernel") != std::string::npos);
    CHECK(what.find("error") != std::string::npos);
  }
}
#endif  // CNNRT_WITH_CUDA
