// The cuDNN comparison of a build without cuDNN (CNNRT_WITH_CUDNN=OFF): `cnnrt bench` still measures and
// checks every step of ours, and prints the cuDNN column as "n/a: built without cuDNN".
#include "core/error.hpp"
#include "cudnn/conv_runner.hpp"

namespace cnnrt::cudnn {

namespace {
constexpr const char* kWhy = "built without cuDNN";
}  // namespace

std::string unsupported_reason(const kernels::ConvLayer&) { return kWhy; }

struct ConvRunner::Impl {};

ConvRunner::ConvRunner(const kernels::ConvLayer&, cudaStream_t, const float*, const float*, float*) {
  fail(ErrorCode::Unsupported, "cuDNN comparison: this cnnrt was {} (configured with CNNRT_WITH_CUDNN=OFF)", kWhy);
}
ConvRunner::~ConvRunner() = default;
void ConvRunner::run(const float*, const float*, const float*, const float*, float*, float*) {}
std::string ConvRunner::algorithm() const { return std::string("n/a: ") + kWhy; }
int64_t ConvRunner::conv_out_floats() const { return 0; }
int64_t ConvRunner::output_floats() const { return 0; }
size_t ConvRunner::workspace_bytes() const { return 0; }

std::string version() { return std::string("n/a (") + kWhy + ")"; }

}  // namespace cnnrt::cudnn
