// A depthwise convolution and the pointwise (1x1) convolution after it in one launch: the MobileNet block's
// pair, y = pw(act(dw(x) + b_dw)) with the pointwise layer's own epilogue (bias, residual, activation). The
// pointwise layer may be grouped and the depthwise layer may read its input through a channel shuffle (ShuffleNet's
// unit: shuffle, depthwise, grouped 1x1).
//
// Why: at small batch each of the two is a launch of a few microseconds around a few hundred thousand
// multiply-adds; one launch saves a step and the depthwise output's round trip through memory.
//
// One block computes a TH x TW tile of output pixels of one image for FB pointwise filters, 256 or 512 threads:
//   0. before waiting for the prior grid (the weights are constants), the block's FB pointwise rows and the
//      depthwise weights and biases are copied into shared memory (cp.async);
//   1. the input tile with its halo, every channel, into shared memory (zeros outside the image);
//   2. the depthwise outputs of the tile, every channel, a thread an output, into shared memory;
//   3. the pointwise outputs, each thread an RF x RP block of (filter, pixel) over every channel of its filters' group
//      (or over a share of them, the KS shares' partials added in order through shared memory), then the epilogue,
//      stored to NCHW. The depthwise outputs lie group by group, each group's channels rounded up to 4 with zeros,
//      so that a thread's RF filters (one group) sum exactly their group's channels.
// Blocks of other filter groups of the same tile recompute the depthwise outputs (K*K multiply-adds an output
// against FB a pointwise output), and each loads the whole input tile: cheap on large maps of few channels. On
// small maps of many channels (4x4 of 256) that work dominates; there the `_cl` variants (compute capability 9.0)
// launch a tile's filter groups as one thread-block cluster: each rank loads and computes the depthwise outputs of
// a share of the channels and stores them into every rank (distributed shared memory), a cluster barrier after.
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "kernels/layer.hpp"

namespace cnnrt::kernels {

struct DwPwDesc {
  ConvGeometry dw;            // the depthwise layer: groups == C == F
  int F = 1;                  // the pointwise layer's outputs
  const float* w_dw = nullptr;  // [C][KH][KW]
  Epilogue dw_epilogue;         // the depthwise layer's bias and activation (no pool; it takes no residual)
  const float* w_pw = nullptr;  // [F][C / pw_groups]
  int pw_groups = 1;            // the pointwise layer's groups (F and C multiples of it)
  int shuffle = 1;              // > 1: the depthwise input read through a channel shuffle (InputPrologue::shuffle)
  Epilogue pw_epilogue;         // the pointwise layer's bias and activation (no pool); its residual bound per launch
  bool residual = false;        // whether launches add a residual operand [N, F, OH, OW]
};

struct DwPwVariant {
  std::string name;  // "dw_pw_8x8_f32"
  int th = 8, tw = 8;  // output tile
  int fb = 32;         // pointwise filters a block
  int rf = 2, rp = 4;  // a thread's register block: filters x adjacent pixels
  int ks = 1;          // thread groups splitting the channels of the pointwise sums
  int ranks = 1;       // a cluster of the tile's filter groups sharing the depthwise outputs (_cl), or 1
  int threads = 256;   // a block's (512: `_t512`)
};

// Whether the kernel runs `d` at all (geometry it takes; not whether it fits shared memory), and why not.
bool dw_pw_supports(const DwPwDesc& d, std::string* why = nullptr);
// The variants that run `d` within `smem_optin_bytes` of shared memory a block on a device of compute capability
// `arch` (major * 10 + minor), in heuristic order (index 0 the untuned choice); empty when none fits.
std::vector<DwPwVariant> dw_pw_variants(const DwPwDesc& d, int smem_optin_bytes, int arch);
// Every name dw_pw_variants can return.
std::vector<std::string> dw_pw_variant_names();

// x: [N, C, H, W] (before the shuffle, where there is one); residual: [N, F, OH, OW] or null; y: [N, F, OH, OW], aliasing neither.
void launch_dw_pw(const DwPwVariant& v, const float* x, const float* residual, float* y, const DwPwDesc& d,
                  int smem_optin_bytes, cudaStream_t stream);

}  // namespace cnnrt::kernels
