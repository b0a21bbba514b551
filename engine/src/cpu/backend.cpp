// The CPU reference backend behind the runtime's Executor interface.
#include <algorithm>
#include <cstring>

#include "core/error.hpp"
#include "cpu/executor.hpp"
#include "runtime/executor.hpp"

namespace cnnrt::runtime {

namespace {

class CpuExecutor final : public Executor {
 public:
  explicit CpuExecutor(std::shared_ptr<const plan::Prepared> prepared) : prepared_(std::move(prepared)) {}

  void run_host(const float* const* inputs, float* const* outputs) override {
    std::vector<ir::HostTensor> in;
    in.reserve(prepared_->input_shapes.size());
    for (size_t i = 0; i < prepared_->input_shapes.size(); ++i) {
      const ir::Shape& shape = prepared_->input_shapes[i];
      const int64_t n = ir::numel(shape);
      in.push_back(ir::HostTensor::floats(shape, std::vector<float>(inputs[i], inputs[i] + n)));
    }
    std::vector<ir::HostTensor> out = cpu::run_graph(prepared_->graph, in);
    for (size_t i = 0; i < out.size(); ++i) {
      CNNRT_CHECK(out[i].dtype() == ir::DType::Float32, ErrorCode::Internal, "output {} is not float32", i);
      // An empty output (a zero dim) may have null data on both sides; memcpy must not see null.
      if (out[i].numel() == 0) continue;
      std::memcpy(outputs[i], out[i].f32(), static_cast<size_t>(out[i].numel()) * sizeof(float));
    }
  }

  void enqueue_device(const float* const*, float* const*) override {
    fail(ErrorCode::Usage, "device buffers need the GPU backend; this model runs on the CPU");
  }
  void synchronize() override {}
  void set_stream(Stream) override {}
  Stream stream() const override { return nullptr; }
  std::vector<StepTiming> profile(const float* const*, int) override {
    fail(ErrorCode::Usage, "profiling times GPU steps; this model runs on the CPU (use --device gpu)");
  }

 private:
  std::shared_ptr<const plan::Prepared> prepared_;
};

}  // namespace

std::unique_ptr<Executor> make_cpu_executor(std::shared_ptr<const plan::Prepared> prepared) {
  return std::make_unique<CpuExecutor>(std::move(prepared));
}

}  // namespace cnnrt::runtime
