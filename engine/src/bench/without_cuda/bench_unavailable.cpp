// The bench library of a build without CUDA: every measurement needs a GPU.
#include "cnnrt/bench.hpp"
#include "core/error.hpp"

namespace cnnrt::bench {

namespace {
[[noreturn]] void no_gpu() {
  fail(ErrorCode::DeviceUnavailable, "cnnrt bench measures GPU kernels, but this build of cnnrt has no CUDA "
       "support (configured with CNNRT_ENABLE_CUDA=OFF)");
}
}  // namespace

Environment environment() { no_gpu(); }
Comparison bench_conv_layer(const ConvLayer&, const BenchOptions&) { no_gpu(); }
ModelReport bench_model(const std::string&, int64_t, const BenchOptions&, int, double, bool) { no_gpu(); }
ModelReport bench_model(const std::string&, const std::vector<Shape>&, const BenchOptions&, int, double, bool) {
  no_gpu();
}

}  // namespace cnnrt::bench
