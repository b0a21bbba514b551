// Multi-channel direct convolution, after Algorithm 2 of Chen et al., "Optimizing Memory
// Efficiency for Convolution Kernels on Kepler GPUs", DAC 2017.
//
// Block layout: TX threads across filters x TY threads across output pixels. A block owns FTB = FT*TX
// filters and a TH x TW tile of output pixels of one image. Each thread accumulates FT filters x WT
// contiguous pixels of one row in registers (acc[FT][WT]); for every input channel and filter row it
// loads one row of (WT-1)*S+K pixels and reuses it across the K taps of that row. CSH channels of the
// image tile (with halo) and of the filters (transposed to [c][ky][kx][f], so a thread's filters are
// float4s) are staged in shared memory with cp.async, double-buffered: the next channel group streams in
// while the current one is computed.
//
// Small-work path (batch 1, small images): the channel reduction is split across the blocks of a thread
// block cluster (up to 8); each block reduces its channel slice, then the cluster sums the partial tiles
// through distributed shared memory in a fixed order (deterministic, no workspace, one launch). With a
// fused pool, the ranks write the activated conv tile into rank 0's shared memory and pool from there.
//
// Epilogue as in conv_common.cuh (bias, residual, activation, pooling through shared memory).
// Weights must be uploaded in the layout pack_general_filters() produces.
#pragma once

#include <string>
#include <vector>

#include "kernels/conv_common.cuh"
#include "kernels/conv_registry.hpp"

namespace cnnrt::kernels {

// [F][C][K][K] -> [C][K][K][Fpad], Fpad = F rounded up to a multiple of 4 (zeros in the padding).
std::vector<float> pack_general_filters(const float* weights, int F, int C, int KH, int KW);
// The same as the registry's layout "cwf", which the small-map family reads too.
PackedWeights pack_general(const ConvLayer& layer, const float* filters, const float* bias);

// Registry entry "gen": groups == 1, square kernel 1, 3 or 5, stride 1 or 2, dilation 1; pooling only unstrided
// and without a residual. Its variants are the instantiated tiles, each with the cluster splits worth trying.

}  // namespace cnnrt::kernels
