// Transposed convolution (ONNX ConvTranspose), 1-D and 2-D, with bias and the activation fused: a direct
// kernel in the gather formulation. Each thread computes one output pixel for `mt` consecutive output
// channels and sums over exactly the (input pixel, tap) pairs that land on it.
//
// Output row oy receives input row iy through tap ky when oy + pad_top = iy * stride + ky * dilation. The
// output rows therefore fall into `stride` phases (by (oy + pad_top) mod stride); within one phase the taps
// that contribute are fixed and the input row advances by one for each output row of the phase, so one
// phase is an ordinary convolution with a sub-kernel. A block works on one (row phase, column phase):
// its taps are uniform (no divergence), and consecutive threads read consecutive input pixels.
#pragma once

#include <string>
#include <vector>

#include "kernels/conv_common.cuh"
#include "kernels/sliding_window.cuh"

namespace cnnrt::kernels {

// x: contiguous [batch, in_channels, rows.input, cols.input]; weights: [in_channels, out_channels / groups,
// rows.kernel, cols.kernel] (ONNX's ConvTranspose layout); y: [batch, out_channels, rows.output, cols.output].
// Input channel c of group g = c / (in_channels / groups) feeds output channels
// [g * out_channels / groups, (g + 1) * out_channels / groups).
// Each SlidingAxis is read the transposed way: input position i and tap t land on output position
// i * stride + t * dilation - pad_begin (pad_begin may be negative: ir::resolve_transposed_window), and
// `output` is the output extent (pad_end is not read). 1-D: `rows` left at its defaults.
struct ConvTranspose2dDesc {
  int64_t batch = 0;
  int64_t in_channels = 0;
  int64_t out_channels = 0;
  int64_t groups = 1;  // divides in_channels and out_channels
  SlidingAxis rows;    // H
  SlidingAxis cols;    // W
};

struct ConvTransposeVariant {
  std::string name;  // conv_transpose_gather_m<channels a thread>_<none|relu|act>
  int channels_per_thread = 1;
  void (*launch)(const float* x, const float* weights, float* y, const ConvTranspose2dDesc& desc, const Epilogue& e,
                 cudaStream_t stream);
};

// Why the kernel cannot run `desc` with `e` (empty when it can): a residual or pooling epilogue, or an
// extent the kernel's index arithmetic does not hold (every extent and stride must stay below 2^31).
std::string conv_transpose2d_unsupported(const ConvTranspose2dDesc& desc, const Epilogue& e);

// The variants for this layer and epilogue (bias, activation from e.param_act), in heuristic order: more
// output channels a thread first when the groups have that many, fewer when the layer has too few output
// pixels to fill the GPU otherwise. Sums in float, in the order (tap row, tap column, input channel).
std::vector<ConvTransposeVariant> conv_transpose2d_variants(const ConvTranspose2dDesc& desc, const Epilogue& e,
                                                            int sm_count);

}  // namespace cnnrt::kernels
