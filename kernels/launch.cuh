// Kernel launches that overlap the launch of a step with the tail of the step before it (Hopper's
// programmatic dependent launch, PDL).
//
// Two kernels back to back on a stream normally leave a gap: the second is launched only once the first
// has finished. With PDL the second grid is launched while the first drains; each of its blocks then waits
// in wait_for_prior_grid() until the first grid has completed and its memory is visible, so results are
// exactly those of plain launches. Captured into a CUDA graph, the same launches become programmatic edges.
//
// Rule: a kernel launched through launch_overlapped() calls wait_for_prior_grid() before its first access to
// global memory (reading a __grid_constant__ parameter is fine). The call is a no-op in a kernel launched
// without the attribute, so every launch of that kernel may use it.
#pragma once

#ifndef __CUDACC_RTC__  // (NVRTC compiles only wait_for_prior_grid: conv_chain_device.cuh)
#include <cuda_runtime.h>

#include <utility>
#endif

namespace cnnrt::kernels {

#ifndef __CUDACC_RTC__
// Process-wide switch, on by default; off, launch_overlapped() launches as plain <<<>>> would (for comparison
// and debugging: `cnnrt --no-launch-overlap`, cnnrt::set_launch_overlap).
void set_programmatic_launch(bool on);
// PDL needs compute capability 9.0: a device planned as an older architecture (its own, or CNNRT_MAX_SM's)
// launches plainly, whatever the switch says.
void set_programmatic_launch_for_device(int ordinal, bool allowed);
bool programmatic_launch();
// The next launch_overlapped() on this thread launches plainly (it waits for the grid before it to finish),
// whatever the switch says; the launches after it overlap again. The executor sets this for the steps whose
// overlap measured slower in the whole network (see plan::Step::overlap).
void launch_next_plain();
// Whether the next launch_overlapped() on this thread uses PDL, forgetting a launch_next_plain() request.
bool take_programmatic_launch();
#endif  // __CUDACC_RTC__

#ifdef __CUDACC__
// Waits until the grid before this one on the stream has completed and flushed its writes, then lets the next
// grid launch (once every block of this one has got here). In that order, so at most one grid waits behind a
// running one: with the release first, each waiting grid released the next, every launch in a graph was
// soon resident and waiting, and the late grids' blocks landed wherever SM space was left (512x512 c1
// layers ran up to 3.5x slower back to back on the H100).
__device__ __forceinline__ void wait_for_prior_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n\tgriddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Waits as wait_for_prior_grid(), but lets the next grid launch only as this grid's blocks exit: for kernels of
// many short blocks, which the next grid's waiting blocks slowed (MobileNet v2 at batch 1 on the H100: 237
// against 196 us with its small convolutions on `dot`).
__device__ __forceinline__ void wait_for_prior_grid_release_at_exit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
#endif  // __CUDACC__

#ifndef __CUDACC_RTC__
// The launch configuration of launch_overlapped() (`attributes` must outlive `config`): PDL when the switch is
// on, clusters of `cluster_z` blocks along z when cluster_z > 1.
inline cudaLaunchConfig_t overlapped_config(dim3 grid, dim3 block, size_t smem_bytes, cudaStream_t stream,
                                            unsigned cluster_z, cudaLaunchAttribute (&attributes)[2]) {
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem_bytes;
  config.stream = stream;
  unsigned count = 0;
  if (take_programmatic_launch()) {
    attributes[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[count].val.programmaticStreamSerializationAllowed = 1;
    ++count;
  }
  if (cluster_z > 1) {
    attributes[count].id = cudaLaunchAttributeClusterDimension;
    attributes[count].val.clusterDim.x = 1;
    attributes[count].val.clusterDim.y = 1;
    attributes[count].val.clusterDim.z = cluster_z;
    ++count;
  }
  config.attrs = attributes;
  config.numAttrs = count;
  return config;
}

// Launches `kernel` on `stream`, with PDL when the switch is on, and as clusters of `cluster_z` blocks along z
// when cluster_z > 1. Returns the launch's error (callers check cudaGetLastError after the step, as for <<<>>>).
template <class... Params, class... Args>
cudaError_t launch_overlapped(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem_bytes, cudaStream_t stream,
                              unsigned cluster_z, Args&&... args) {
  cudaLaunchAttribute attributes[2];
  const cudaLaunchConfig_t config = overlapped_config(grid, block, smem_bytes, stream, cluster_z, attributes);
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}
#endif  // __CUDACC_RTC__

}  // namespace cnnrt::kernels
