// The parts of the bench library that need no GPU: suites, --conv parsing, the floor.
#include <fmt/format.h>

#include <algorithm>
#include <sstream>

#include "cnnrt/bench.hpp"
#include "core/error.hpp"

namespace cnnrt::bench {

double floor_us(double flops, double bytes) {
  return std::max(bytes / kMemoryBytesPerSecond, flops / kFp32FlopsPerSecond) * 1e6;
}

std::vector<LayerSpec> suite(const std::string& name) {
  std::vector<LayerSpec> layers;
  if (name == "special") {
    for (int64_t size : {512, 1024, 2048, 4096}) {
      for (int64_t k : {1, 3, 5}) {
        for (int64_t f : {1, 8, 32}) {
          LayerSpec L;
          L.name = fmt::format("special {}x{} k{} f{}", size, size, k, f);
          L.H = L.W = size;
          L.K = k;
          L.F = f;
          layers.push_back(L);
        }
      }
    }
  } else if (name == "general") {
    const int64_t shapes[][3] = {{56, 64, 64}, {28, 128, 128}, {14, 256, 256}, {112, 32, 64}, {32, 64, 128}};
    for (int64_t batch : {1, 32}) {
      for (const auto& s : shapes) {
        for (int64_t k : {3, 5}) {
          LayerSpec L;
          L.name = fmt::format("general b{} {}x{} c{} f{} k{}", batch, s[0], s[0], s[1], s[2], k);
          L.N = batch;
          L.H = L.W = s[0];
          L.C = s[1];
          L.F = s[2];
          L.K = k;
          layers.push_back(L);
        }
      }
    }
  } else if (name == "small") {
    for (int64_t batch : {1, 64, 1024}) {
      LayerSpec c1;
      c1.name = fmt::format("small b{} conv1 1->8 5x5 28x28 +relu +pool2/2", batch);
      c1.N = batch;
      c1.C = 1;
      c1.H = c1.W = 28;
      c1.F = 8;
      c1.K = 5;
      c1.bias = true;
      c1.activation = "Relu";
      c1.pool = "MaxPool";
      c1.pool_k = c1.pool_s = 2;
      LayerSpec c2 = c1;
      c2.name = fmt::format("small b{} conv2 8->16 5x5 14x14 +relu +pool3/3", batch);
      c2.C = 8;
      c2.H = c2.W = 14;
      c2.F = 16;
      c2.pool_k = c2.pool_s = 3;
      layers.push_back(c1);
      layers.push_back(c2);
    }
  } else {
    fail(ErrorCode::Usage, "unknown suite '{}' (special, general, small)", name);
  }
  return layers;
}

LayerSpec parse_conv(const std::string& spec) {
  std::vector<int64_t> v;
  std::stringstream in(spec);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      size_t used = 0;
      v.push_back(std::stoll(item, &used));
      CNNRT_CHECK(used == item.size(), ErrorCode::Usage, "--conv '{}': '{}' is not a number", spec, item);
    } catch (const std::logic_error&) {
      fail(ErrorCode::Usage, "--conv '{}': '{}' is not a number", spec, item);
    }
  }
  CNNRT_CHECK(v.size() == 6 || v.size() == 8, ErrorCode::Usage,
              "--conv '{}': expected N,C,H,W,F,K or N,C,H,W,F,K,stride,pad", spec);
  for (size_t i = 0; i < 6; ++i) {
    CNNRT_CHECK(v[i] >= 1, ErrorCode::Usage, "--conv '{}': every size must be at least 1", spec);
  }
  LayerSpec L;
  L.N = v[0]; L.C = v[1]; L.H = v[2]; L.W = v[3]; L.F = v[4]; L.K = v[5];
  if (v.size() == 8) {
    L.stride = v[6];
    L.pad = v[7];
    CNNRT_CHECK(L.stride >= 1 && L.pad >= 0, ErrorCode::Usage, "--conv '{}': stride >= 1 and pad >= 0", spec);
  }
  L.name = fmt::format("conv {}", spec);
  return L;
}

}  // namespace cnnrt::bench
