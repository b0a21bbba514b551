// Under study: the single-input-channel kernel with its filters split into groups across blocks
// (blockIdx.z), so that a small image (512x512 gives 256 tiles of 32x32) puts F / FMAX times more blocks
// on the 132 SMs and each thread chains fewer FFMAs. The H100 run of 2026-11-23 showed the 512x512 layers
// bound by per-thread compute latency at 8 warps per SM (docs/perf-notes.md, v3). Promote into
// kernels/conv2d_c1.cu (and the planner) once conv_lab shows it ahead on the GPU.
#pragma once

#include <vector>

#include "kernels/conv2d_c1.cuh"

namespace cnnrt::kernels::lab {

// Stride 1, square K of 1, 3 or 5, no pooling or residual, Act::None; filters from pack_c1_smem_filters.
std::vector<C1Variant> c1_filter_group_variants(const ConvGeometry& g, const Epilogue& e);

}  // namespace cnnrt::kernels::lab
