// A convolution and the 1x1 convolution that alone reads its output, in one launch on wgmma: y = pw(act(conv(x)))
// with the 1x1 layer's own epilogue (bias, activation). SqueezeNet's expand layers (merged into one convolution)
// and the next fire module's squeeze layer are such a pair.
//
// Why: at small batch each of the two is a launch of a few microseconds, and the first layer's output (the wider
// tensor) makes a round trip through memory only to be read once.
//
// The first layer runs as `wgr` runs it (conv2d_wgr.cu: 64 output pixels by 64 filters a block, 3xTF32 wgmma with
// the input split in registers). Its filters are split over a thread-block cluster of F / 64 blocks along z (times
// two with `_split2`, whose pairs split the reduction and add their halves through distributed shared memory, each
// keeping half the columns); each rank adds bias and activation to its columns in registers, which then are the A
// operand of a second 3xTF32 wgmma against those columns of the 1x1 weights (staged in shared memory before the
// wait for the prior grid): a partial of the 1x1 outputs over the rank's channels. The ranks' partials are added in
// rank order through distributed shared memory (the same sums in the same order on every run), each rank owning a
// share of the 1x1 filters, and stored with the 1x1 layer's epilogue. The accumulator's columns of an n8 tile are the A fragment's
// k slots in the order 0 2 4 6 1 3 5 7: the packed 1x1 weights follow that order (pack_conv_pw_weights).
//
// Compiled for sm_90a only, as wgr: offered on devices of compute capability 9.0.
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "kernels/layer.hpp"

namespace cnnrt::kernels {

struct ConvPwDesc {
  ConvGeometry conv;            // the first layer (any geometry wgr takes; F a multiple of 64, at most 512)
  const float* w_conv = nullptr;  // packed by pack_wg_filters
  Epilogue conv_epilogue;       // its bias and activation (ReLU; no residual or pool)
  int pw_filters = 0;           // the 1x1 layer's outputs S (at most 64)
  const float* w_pw = nullptr;  // packed by pack_conv_pw_weights
  Epilogue pw_epilogue;         // the 1x1 layer's bias and activation (no residual or pool)
};

struct ConvPwVariant {
  std::string name;  // "wgr_pw_n32"
  int n2 = 32;       // the second product's columns: the 1x1 filters rounded up to 32 or 64
  int split = 1;     // blocks sharing a filter tile's reduction (1 or 2)
  int ranks = 1;     // F / 64 * split: the cluster along z
};

// Whether the kernel runs `d` (its geometry and epilogues) on a device of compute capability `arch`, and why not.
bool conv_pw_supports(const ConvPwDesc& d, int arch, std::string* why = nullptr);
// The variants that run `d` (empty when conv_pw_supports says no).
std::vector<ConvPwVariant> conv_pw_variants(const ConvPwDesc& d, int arch);
// Every name conv_pw_variants can return.
std::vector<std::string> conv_pw_variant_names();
// The 1x1 weights w[S][F] as the kernel reads them: for each rank r (F / 64) two 32-channel stages, each the big and
// the small TF32 half of n2 rows (zeros past S) of 32 floats in the k-slot order above.
std::vector<float> pack_conv_pw_weights(const float* w, int S, int F, int n2);

// x: [N, C, H, W]; y: [N, S, OH, OW] (no aliasing).
void launch_conv_pw(const ConvPwVariant& v, const float* x, float* y, const ConvPwDesc& d, cudaStream_t stream);

}  // namespace cnnrt::kernels
