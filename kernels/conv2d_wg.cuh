// Multi-channel direct convolution on Hopper's warpgroup tensor-core instructions (wgmma), FP32 accuracy by
// the same 3xTF32 split as conv2d_tc.cuh (big*big + big*small + small*big, accumulated in FP32).
//
// Implicit GEMM with the K dimension ordered (ky, kx, c): k = (ky*KW + kx)*C + c. With C a multiple of 32
// every 32-wide K slice is one filter tap and 32 consecutive channels, so the input gather of a slice is one
// bounds test per pixel and 32 loads a channel plane apart. Each warpgroup (128 threads) multiplies 64
// filters x 128 pixels with wgmma m64n128k8 from shared memory; the block has 1 or 2 warpgroups. The gather
// splits each input value once, into separate big and small tiles; the filters are split on the host.
//
// The transposed variant `wgr` (conv2d_wgr.cu) puts output pixels on the rows and filters on the columns:
// the input goes to shared memory unsplit by cp.async, stages ahead, and each thread splits its wgmma
// fragment in registers (A from registers, B = the filters from shared memory). Both read the same packed
// filters, and conv2d_wg_variants offers both.
//
// `wgh` (conv2d_wgh.cu) is wgr with a rectangular pixel tile of one image: the input of 32 channels lands in
// shared memory once with its halo and serves every filter tap (stride 1, KH*KW >= 4).
//
// Compiled for sm_90a only (wgmma is an arch-specific feature): offered on devices of compute capability
// 9.0 (H100, H200), and never elsewhere.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "kernels/conv2d_tc.cuh"
#include "kernels/conv_common.cuh"

namespace cnnrt::kernels {

// Weight layout the kernel reads: [2][Fpad][K] floats, half 0 the big and half 1 the small TF32 part of
// w[f][c][ky][kx] at k = (ky*KW + kx)*C + c; Fpad = F rounded up to a multiple of 128, zeros there.
std::vector<float> pack_wg_filters(const float* weights, int F, int C, int KH, int KW);

// groups == 1, dilation 1, C a multiple of 32, equal strides 1 or 2, any kernel size and padding, no fused
// pooling, and a device of compute capability 9.0.
bool conv2d_wg_supports(const ConvGeometry& g, const Epilogue& e, int cc_major, int cc_minor,
                        std::string* why = nullptr);

// The configurations for this layer, in heuristic order (best first); empty when unsupported. Same launch
// signature as the mma.sync kernel (the weights argument is the pack_wg_filters buffer).
std::vector<TcVariant> conv2d_wg_variants(const ConvGeometry& g, const Epilogue& e, int sm_count, int cc_major,
                                          int cc_minor);

// The wgr configurations for this layer, each with its score (estimated relative time, the units of
// conv2d_wg_variants' own); conv2d_wg_variants merges them. Eligibility as conv2d_wg_supports.
std::vector<std::pair<TcVariant, double>> conv2d_wgr_scored(const ConvGeometry& g, const Epilogue& e, int sm_count);
std::vector<std::pair<TcVariant, double>> conv2d_wgh_scored(const ConvGeometry& g, const Epilogue& e, int sm_count);

}  // namespace cnnrt::kernels
