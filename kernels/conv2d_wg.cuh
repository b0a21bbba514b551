// Multi-channel direct convolution on Hopper's warpgroup tensor-core instructions (wgmma), at FP32 accuracy
// by the 3xTF32 split of conv2d_tc.cuh (big*big + big*small + small*big, accumulated in FP32): two families,
//   "wgr" (conv2d_wgr.cu): implicit GEMM with output pixels as the rows (64 a warpgroup) and filters as the
//         columns; the input goes to shared memory unsplit by cp.async, stages ahead, and each thread splits
//         its own A fragment in registers for the register-operand form of wgmma;
//   "wgh" (conv2d_wgh.cu): wgr with a rectangle of output pixels of one image, whose input lands in shared
//         memory once a channel group with its halo and serves every filter tap; filters by TMA.
// The K dimension is ordered (ky, kx, c): k = (ky*KW + kx)*C + c, in 32-wide stages. wgh takes C a multiple of
// 32 (a stage is one filter tap and 32 consecutive channels), wgr a multiple of 16 (a stage is two halves of
// 16 channels, each of one tap). Both read the filters packed by pack_wg_filters.
//
// Compiled for sm_90a only (wgmma is an arch-specific feature): offered on devices of compute capability 9.0
// (H100, H200), never elsewhere (their Needs say kWgmma).
#pragma once

#include <string>
#include <vector>

#include "kernels/conv_common.cuh"
#include "kernels/conv_registry.hpp"

namespace cnnrt::kernels {

// Weight layout both families read: [2][Fpad][K] floats, half 0 the big and half 1 the small TF32 part of
// w[f][c][ky][kx] at k = (ky*KW + kx)*C + c; Fpad = F rounded up to a multiple of 128, K = C*KH*KW rounded up to
// a multiple of 32 (wg_common::packed_k), zeros past both.
std::vector<float> pack_wg_filters(const float* weights, int F, int C, int KH, int KW);

// The limits both families share: groups == 1, dilation 1, equal strides 1 or 2, no fused pooling, C a
// multiple of 16 (wgh asks 32), and extents inside their 32-bit index arithmetic ("" when the layer is within them).
std::string wg_reject(const ConvLayer& layer);

// The packed filters as both families read them (layout "wg_split").
PackedWeights pack_wg(const ConvLayer& layer, const float* filters, const float* bias);

}  // namespace cnnrt::kernels
