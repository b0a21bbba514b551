// Multi-channel direct convolution on the tensor cores at FP32 accuracy ("3xTF32").
//
// Implicit GEMM: M = F (filters), N = batch * OH * OW (output pixels, over the whole batch), K = C*KH*KW;
// a grouped convolution is one such GEMM per group (C/groups input channels, F/groups filters).
// A[f][k] is the filter tensor as stored ([F][C][KH][KW] flattened is already k = (c*KH + ky)*KW + kx);
// B[k][p] is gathered from the NCHW input on the fly (zero outside the image), never materialised.
// Block tiles of BM filters x BN pixels step through K in slices of 32, staged in shared memory by
// cp.async in a 3-deep pipeline; warps multiply with mma.sync m16n8k8 TF32.
//
// Accuracy: every FP32 operand v is split as big = tf32(v), small = tf32(v - big), and each product is
// taken as big*big + big*small + small*big (small*small is below FP32 resolution), accumulated in FP32.
// The filters are split once on the host (pack_tc_filters); the kernel splits the gathered input.
//
// Epilogue as in conv_common.cuh: + bias, + residual, activation. No fused pooling.
#pragma once

#include <vector>

#include "kernels/conv_common.cuh"

namespace cnnrt::kernels {

// Weight layout the kernel reads: [Kpad][groups * FGpad][2] floats, (big, small) TF32 halves of w[f][k],
// with k = (c*KH + ky)*KW + kx over the group's channels, Kpad = C/groups*KH*KW rounded up to a multiple of
// 32 and FGpad = F/groups rounded up to a multiple of 128 (group g's filters in columns g*FGpad on), zeros
// in the padding. Upload it to a 16-byte aligned buffer (cudaMalloc is).
std::vector<float> pack_tc_filters(const float* weights, int F, int C, int KH, int KW, int groups);

// Registry entry "tc": any groups, strides, dilations, kernel size and padding (1-D and 2-D), no fused
// pooling; the variants whose shared memory the device has.

}  // namespace cnnrt::kernels
