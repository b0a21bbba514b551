#include "runtime/gpu_model.hpp"

#include <cuda_runtime.h>

#include "core/error.hpp"
#include "core/log.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/device_info.hpp"
#include "gpu/weight_store.hpp"
#include "kernels/launch.cuh"
#include "plan/gpu/planner.hpp"
#include "plan/gpu/tuner.hpp"
#include "runtime/device.hpp"
#include "runtime/gpu_executor.hpp"

namespace cnnrt::runtime {

namespace {

class GpuModelImpl final : public GpuModel {
 public:
  explicit GpuModelImpl(const Options& options)
      : options_(options), device_(gpu::current_device()), tuner_(plan::make_tuner(options, device_)) {
    plan::check_forced_kernel(options.force_kernel);
    kernels::set_programmatic_launch_for_device(device_.ordinal, device_.arch() >= 90);
    log().info("GPU: {} ({} SMs, compute capability {}.{})", device_.name, device_.sm_count, device_.cc_major,
               device_.cc_minor);
  }

  std::shared_ptr<const plan::GpuPlan> plan(const plan::Prepared& prepared) override {
    plan::PlanContext context{device_, weights_, options_, tuner_.get()};
    return plan::build_gpu_plan(prepared, context);
  }

  std::unique_ptr<Executor> make_executor(std::shared_ptr<const plan::Prepared> prepared, Stream stream) override {
    return make_gpu_executor(std::move(prepared), stream, options_.cuda_graphs);
  }

  Stream create_stream() override {
    cudaStream_t stream = nullptr;
    CNNRT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    return stream;
  }

  void destroy_stream(Stream stream) noexcept override {
    if (stream) cudaStreamDestroy(stream);
  }

 private:
  Options options_;
  const gpu::DeviceInfo& device_;
  gpu::WeightStore weights_;
  std::unique_ptr<plan::Tuner> tuner_;
};

}  // namespace

std::shared_ptr<GpuModel> GpuModel::create(const Options& options) {
  std::string why;
  CNNRT_CHECK(cuda_device_available(&why), ErrorCode::DeviceUnavailable, "no usable CUDA device: {}", why);
  return std::make_shared<GpuModelImpl>(options);
}

}  // namespace cnnrt::runtime
