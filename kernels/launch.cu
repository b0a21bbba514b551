// The process-wide programmatic-launch switch of launch.cuh.
#include <atomic>

#include "kernels/launch.cuh"

namespace cnnrt::kernels {

namespace {
std::atomic<bool> g_programmatic_launch{true};  // constant-initialised: no CUDA call at static-init time
}  // namespace

void set_programmatic_launch(bool on) { g_programmatic_launch.store(on, std::memory_order_relaxed); }
bool programmatic_launch() { return g_programmatic_launch.load(std::memory_order_relaxed); }

}  // namespace cnnrt::kernels
