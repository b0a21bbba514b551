// Convolution kernel lab: every variant of every family of the kernel registry (kernels/conv_registry.hpp) that
// runs one layer (conv + bias), each checked against the double-accumulating plain direct kernel on random
// input with a poisoned output, then timed (median over 15 replays of a CUDA graph of 50 launches), printed
// fastest first with GFLOP/s, GB/s and the share of the physical floor (bytes once / 3.0 TB/s, FLOPs / 51.6
// TFLOP/s: an H100's measured copy and FP32 SGEMM rates). The families that decline the layer say why.
//
//   cmake --preset release && cmake --build --preset release --target conv_lab
//   build/release/bin/conv_lab N,C,H,W,F,K[,stride,pad[,groups]]      e.g.  conv_lab 1,1,512,512,8,5
//
// A variant that disagrees with the oracle by more than 1e-5 (relative L2) is marked WRONG. Notes on each
// family (its design, its figures, what was tried): kernels/lab/NOTES.md.
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
#include "kernels/conv2d_direct.cuh"
#include "kernels/conv_registry.hpp"

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
    std::fprintf(stderr, "usage: conv_lab N,C,H,W,F,K[,stride,pad[,groups]]\n");
    return 2;
  }
  std::vector<int> v;
  std::stringstream in(argv[1]);
  for (std::string item; std::getline(in, item, ',');) v.push_back(std::atoi(item.c_str()));
  if (v.size() != 6 && v.size() != 8 && v.size() != 9) {
    std::fprintf(stderr, "conv_lab: expected N,C,H,W,F,K[,stride,pad[,groups]], got '%s'\n", argv[1]);
    return 2;
  }
  const int N = v[0], C = v[1], H = v[2], W = v[3], F = v[4], K = v[5];
  const int stride = v.size() >= 8 ? v[6] : 1, pad = v.size() >= 8 ? v[7] : K / 2, groups = v.size() == 9 ? v[8] : 1;
  if (std::min({N, C, H, W, F, K, stride, groups}) < 1 || pad < 0 || C % groups != 0 || F % groups != 0) {
    std::fprintf(stderr, "conv_lab: '%s' is not a convolution\n", argv[1]);
    return 2;
  }
  auto axis = [&](int input) {
    kernels::SlidingAxis a;
    a.input = input;
    a.kernel = K;
    a.stride = stride;
    a.pad_begin = a.pad_end = pad;
    a.output = (input + 2 * pad - K) / stride + 1;
    return a;
  };
  kernels::ConvLayer layer;
  layer.g = kernels::conv_geometry(N, C, F, groups, axis(H), axis(W));
  const kernels::ConvGeometry& g = layer.g;
  if (g.OH < 1 || g.OW < 1) {
    std::fprintf(stderr, "conv_lab: '%s' has no output\n", argv[1]);
    return 2;
  }
  kernels::DeviceCaps dev;
  check_cuda(cudaDeviceGetAttribute(&dev.sm_count, cudaDevAttrMultiProcessorCount, 0), "device");
  check_cuda(cudaDeviceGetAttribute(&dev.cc_major, cudaDevAttrComputeCapabilityMajor, 0), "device");
  check_cuda(cudaDeviceGetAttribute(&dev.cc_minor, cudaDevAttrComputeCapabilityMinor, 0), "device");
  check_cuda(cudaDeviceGetAttribute(&dev.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0), "device");

  const size_t in_n = size_t(N) * C * H * W, out_n = size_t(layer.out_floats());
  const size_t w_n = size_t(F) * (C / groups) * K * K;
  const std::vector<float> x = random_values(in_n, 1, 1.0f);
  const std::vector<float> w = random_values(w_n, 2, 1.0f / std::sqrt(float((C / groups) * K * K)));
  const std::vector<float> b = random_values(size_t(F), 3, 0.1f);
  const gpu::DeviceAllocation dx = upload(x), dw = upload(w), db = upload(b);
  const gpu::DeviceAllocation y(out_n * sizeof(float)), oracle(out_n * sizeof(float));
  layer.e.bias = db.floats();
  kernels::launch_conv2d_direct(dx.floats(), dw.floats(), db.floats(), oracle.floats(), g, nullptr);
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

  std::vector<gpu::DeviceAllocation> packed;  // the families' uploads, alive while their variants run
  const auto families = kernels::conv_candidates(layer, dev, w.data(), b.data(), dw.floats(),
                                                 [&](const std::vector<float>& data, const std::string&) {
                                                   packed.push_back(upload(data));
                                                   return packed.back().floats();
                                                 });
  std::vector<std::string> declined;
  for (const kernels::FamilyCandidates& fc : families) {
    if (!fc.rejected.empty()) declined.push_back(std::string(fc.family->name()) + ": " + fc.rejected);
    for (const kernels::ConvVariant& var : fc.variants) {
      const gpu::DeviceAllocation scratch = upload(std::vector<float>(std::max<int64_t>(1, var.workspace_floats)));
      kernels::ConvArgs args;
      args.x = dx.floats();
      args.y = y.floats();
      args.workspace = var.workspace_floats > 0 ? const_cast<float*>(scratch.floats()) : nullptr;
      run(var.name, [&] { var.launch(args, stream); });
    }
  }
  run("direct (oracle)", [&] { kernels::launch_conv2d_direct(dx.floats(), dw.floats(), db.floats(), y.floats(), g, stream); });
  cudaStreamDestroy(stream);

  const double flops = layer.flops();
  const double bytes = 4.0 * (in_n + w_n + out_n);
  const double floor_us = std::max(bytes / 3.0e12, flops / 51.6e12) * 1e6;
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& c) { return a.us < c.us; });
  std::printf("conv %s: %.3g GFLOP, %.3g MB moved once, floor %.2f us\n", argv[1], flops / 1e9, bytes / 1e6, floor_us);
  std::printf("%-48s %10s %9s %9s %6s %9s\n", "variant", "us", "GFLOP/s", "GB/s", "floor", "rel err");
  for (const Row& r : rows) {
    std::printf("%-48s %10.2f %9.0f %9.0f %5.0f%% %9.1e%s\n", r.name.c_str(), r.us, flops / r.us / 1e3, bytes / r.us / 1e3,
                100.0 * floor_us / r.us, r.err, r.err > 1e-5 ? "  WRONG" : "");
  }
  for (const std::string& d : declined) std::printf("not eligible: %s\n", d.c_str());
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
