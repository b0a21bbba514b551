// Convolution kernel lab: every variant of every direct-convolution family that can run one layer
// (conv + bias), each checked against the double-accumulating plain direct kernel on random input with a
// poisoned output, then timed (median over 15 replays of a CUDA graph of 50 launches), printed fastest
// first with GFLOP/s, GB/s and the share of the physical floor (bytes once / 3.0 TB/s, FLOPs / 51.6
// TFLOP/s, the H100 ceilings of shared/device/README.md).
//
//   cmake --preset release && cmake --build --preset release --target conv_lab
//   build/release/bin/conv_lab N,C,H,W,F,K[,stride,pad]      e.g.  conv_lab 1,1,512,512,8,5
//
// Families (kernels/): c1 (one input channel; filters from the constant bank, or "_smemw" from shared
// memory), small (small maps: every channel staged at once, one pixel a thread), gen (DAC 2017 Algorithm 2,
// with cluster split-K), tc3, wg3, wgr and wgh (3xTF32 tensor cores; wgr and wgh split the input in
// registers, wgh from a halo tile), and the plain direct kernel itself. Ungrouped convolutions only (depthwise layers: the GPU tests and
// `cnnrt plan --explain`).
// A variant under study lives in kernels/lab/ beside this file and is listed here marked "(lab)" until it is
// promoted (the c1 filter groups were: docs/perf-notes.md, v4).
// A variant that disagrees with the oracle by more than 1e-5 (relative L2) is marked WRONG.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gpu/device_memory.hpp"
#include "gpu/graph_timing.hpp"
#include "kernels/conv2d_c1.cuh"
#include "kernels/conv2d_direct.cuh"
#include "kernels/conv2d_general.cuh"
#include "kernels/conv2d_small.cuh"
#include "kernels/conv2d_tc.cuh"
#include "kernels/conv2d_wg.cuh"

namespace {

using namespace cnnrt;

void check_cuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "conv_lab: %s: %s\n", what, cudaGetErrorString(err));
    std::exit(1);
  }
}

gpu::DeviceAllocation upload(const std::vector<float>& host) {
  gpu::DeviceAllocation d(std::max<size_t>(host.size(), 1) * sizeof(float));
  check_cuda(cudaMemcpy(d.get(), host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice), "upload");
  return d;
}

std::vector<float> download(const gpu::DeviceAllocation& d, size_t count) {
  std::vector<float> host(count);
  check_cuda(cudaMemcpy(host.data(), d.get(), count * sizeof(float), cudaMemcpyDeviceToHost), "download");
  return host;
}

std::vector<float> random_values(size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(got[i])) return INFINITY;
    num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    den += double(want[i]) * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

struct Row {
  std::string name;
  double us = 0, err = 0;
};

}  // namespace

int run_lab(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: conv_lab N,C,H,W,F,K[,stride,pad]\n");
    return 2;
  }
  std::vector<int> v;
  std::stringstream in(argv[1]);
  for (std::string item; std::getline(in, item, ',');) v.push_back(std::atoi(item.c_str()));
  if (v.size() != 6 && v.size() != 8) {
    std::fprintf(stderr, "conv_lab: expected N,C,H,W,F,K[,stride,pad], got '%s'\n", argv[1]);
    return 2;
  }
  kernels::ConvGeometry g;
  g.N = v[0]; g.C = v[1]; g.H = v[2]; g.W = v[3]; g.F = v[4]; g.KH = g.KW = v[5];
  g.stride_h = g.stride_w = v.size() == 8 ? v[6] : 1;
  g.pad_top = g.pad_left = v.size() == 8 ? v[7] : v[5] / 2;
  g.OH = (g.H + 2 * g.pad_top - g.KH) / g.stride_h + 1;
  g.OW = (g.W + 2 * g.pad_left - g.KW) / g.stride_w + 1;
  if (g.OH < 1 || g.OW < 1 || std::min({g.N, g.C, g.H, g.W, g.F, g.KH}) < 1) {
    std::fprintf(stderr, "conv_lab: '%s' has no output\n", argv[1]);
    return 2;
  }
  int sm_count = 0;
  check_cuda(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, 0), "device");

  const size_t in_n = size_t(g.N) * g.C * g.H * g.W, out_n = size_t(g.N) * g.F * g.OH * g.OW;
  const size_t w_n = size_t(g.F) * g.C * g.KH * g.KW;
  const std::vector<float> x = random_values(in_n, 1, 1.0f);
  const std::vector<float> w = random_values(w_n, 2, 1.0f / std::sqrt(float(g.C * g.KH * g.KW)));
  const std::vector<float> b = random_values(size_t(g.F), 3, 0.1f);
  const gpu::DeviceAllocation dx = upload(x), dw = upload(w), db = upload(b);
  const gpu::DeviceAllocation y(out_n * sizeof(float)), oracle(out_n * sizeof(float));
  kernels::Epilogue e;
  e.bias = db.floats();

  kernels::Conv2dDesc d;
  d.batch = g.N; d.in_channels = g.C; d.out_channels = g.F;
  d.rows = {g.H, g.OH, g.KH, g.stride_h, 1, g.pad_top, (g.OH - 1) * g.stride_h + g.KH - g.H - g.pad_top};
  d.cols = {g.W, g.OW, g.KW, g.stride_w, 1, g.pad_left, (g.OW - 1) * g.stride_w + g.KW - g.W - g.pad_left};
  kernels::launch_conv2d_direct(dx.floats(), dw.floats(), db.floats(), oracle.floats(), d, nullptr);
  check_cuda(cudaDeviceSynchronize(), "oracle");
  const std::vector<float> want = download(oracle, out_n);

  cudaStream_t stream = nullptr;
  check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  std::vector<Row> rows;
  auto run = [&](const std::string& name, const std::function<void()>& launch) {
    check_cuda(cudaMemsetAsync(y.get(), 0xFF, out_n * sizeof(float), stream), "poison");
    launch();
    check_cuda(cudaGetLastError(), name.c_str());
    check_cuda(cudaStreamSynchronize(stream), name.c_str());
    Row r{name, 0, relative_error(download(y, out_n), want)};
    r.us = gpu::median(gpu::time_captured_runs(stream, 50, 15, launch));
    rows.push_back(r);
  };

  if (kernels::conv2d_c1_supports(g, e)) {
    kernels::C1Filters filters;
    kernels::pack_c1_filters(w.data(), b.data(), g.F, g.KH, g.KW, &filters);
    const gpu::DeviceAllocation smem_filters = upload(kernels::pack_c1_smem_filters(w.data(), b.data(), g.F, g.KH));
    for (const auto& var : kernels::conv2d_c1_variants(g, e)) {
      run(var.name, [&] { var.launch(dx.floats(), y.floats(), g, e, filters, smem_filters.floats(), stream); });
    }
  }
  if (kernels::conv2d_small_supports(g, e)) {
    const gpu::DeviceAllocation packed = upload(kernels::pack_general_filters(w.data(), g.F, g.C, g.KH, g.KW));
    for (const auto& var : kernels::conv2d_small_variants(g, e, sm_count)) {
      run(var.name, [&] { var.launch(dx.floats(), y.floats(), packed.floats(), g, e, var.config, stream); });
    }
  }
  if (kernels::conv2d_general_supports(g, e)) {
    const gpu::DeviceAllocation packed = upload(kernels::pack_general_filters(w.data(), g.F, g.C, g.KH, g.KW));
    for (const auto& var : kernels::conv2d_general_variants(g, e, sm_count)) {
      run(var.name, [&] { var.launch(dx.floats(), y.floats(), packed.floats(), g, e, var.split, stream); });
    }
  }
  if (kernels::conv2d_tc_supports(g, e)) {
    const gpu::DeviceAllocation packed = upload(kernels::pack_tc_filters(w.data(), g.F, g.C, g.KH, g.KW));
    for (const auto& var : kernels::conv2d_tc_variants(g, e, sm_count)) {
      run(var.name, [&] { var.launch(dx.floats(), y.floats(), packed.floats(), g, e, stream); });
    }
  }
  int cc_major = 0, cc_minor = 0;
  check_cuda(cudaDeviceGetAttribute(&cc_major, cudaDevAttrComputeCapabilityMajor, 0), "device");
  check_cuda(cudaDeviceGetAttribute(&cc_minor, cudaDevAttrComputeCapabilityMinor, 0), "device");
  if (kernels::conv2d_wg_supports(g, e, cc_major, cc_minor)) {
    const gpu::DeviceAllocation packed = upload(kernels::pack_wg_filters(w.data(), g.F, g.C, g.KH, g.KW));
    for (const auto& var : kernels::conv2d_wg_variants(g, e, sm_count, cc_major, cc_minor)) {
      run(var.name, [&] { var.launch(dx.floats(), y.floats(), packed.floats(), g, e, stream); });
    }
  }
  run("direct (oracle)", [&] { kernels::launch_conv2d_direct(dx.floats(), dw.floats(), db.floats(), y.floats(), d, stream); });
  cudaStreamDestroy(stream);

  const double flops = 2.0 * out_n * g.C * g.KH * g.KW;
  const double bytes = 4.0 * (in_n + w_n + out_n);
  const double floor_us = std::max(bytes / 3.0e12, flops / 51.6e12) * 1e6;
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& c) { return a.us < c.us; });
  std::printf("conv %s: %.3g GFLOP, %.3g MB moved once, floor %.2f us\n", argv[1], flops / 1e9, bytes / 1e6, floor_us);
  std::printf("%-44s %10s %9s %9s %6s %9s\n", "variant", "us", "GFLOP/s", "GB/s", "floor", "rel err");
  for (const Row& r : rows) {
    std::printf("%-44s %10.2f %9.0f %9.0f %5.0f%% %9.1e%s\n", r.name.c_str(), r.us, flops / r.us / 1e3, bytes / r.us / 1e3,
                100.0 * floor_us / r.us, r.err, r.err > 1e-5 ? "  WRONG" : "");
  }
  return 0;
}

int main(int argc, char** argv) {
  try {
    return run_lab(argc, argv);
  } catch (const std::exception& e) {  // the engine's allocations throw cnnrt::Error
    std::fprintf(stderr, "conv_lab: %s\n", e.what());
    return 1;
  }
}
