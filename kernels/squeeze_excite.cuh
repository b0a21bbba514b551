// The squeeze-and-excitation gate in one launch: y = x * gate(W2 act(W1 mean(x) + b1) + b2), the gate one value
// per image and channel (Hu et al. 2018; MobileNet v3 and EfficientNet blocks).
//
// Why: exporters write it as five to six nodes (GlobalAveragePool, Conv, activation, Conv, Sigmoid or
// HardSigmoid, Mul), four steps after fusion: at batch 1 each is a launch of ~4 us around a few thousand
// multiply-adds; at large batch the two 1x1 layers are tiny products that read their weights per step.
//
// One block (or one thread-block cluster, `ranks` blocks) per image, kSqueezeExciteThreads threads:
//   0. before waiting for the prior grid (the weights are constants), the block's rows of both layers are
//      copied into shared memory (cp.async) where they fit, else read in place;
//   1. the means of the block's channels (a thread a channel for maps of up to 32 values, else a warp, or several
//      warps a channel where the block has fewer channels than warps; float4 reads where a map is a whole number
//      of them), in a fixed order;
//   2. the hidden layer, a warp an output (lanes over the channels, a shuffle sum);
//   3. the gate of the block's channels, a warp a channel, the same way over the hidden outputs;
//   4. y = x * gate over the block's maps, four loads in flight a thread.
// With a cluster (compute capability 9.0) the ranks split the channels (steps 1, 3, 4) and the hidden outputs
// (step 2); each rank stores its means and its hidden outputs into every rank (distributed shared memory), a
// cluster barrier after each. x is read twice (the second time mostly from L2) and y written once.
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "kernels/layer.hpp"

namespace cnnrt::kernels {

constexpr int kSqueezeExciteThreads = 256;

struct SqueezeExciteDesc {
  int batch = 1;
  int channels = 1;  // C
  int hidden = 1;    // the first layer's outputs
  int spatial = 1;   // values per map (H * W, or L)
  const float* w1 = nullptr;  // [hidden][C] (the 1x1 convolution's weights)
  const float* b1 = nullptr;  // [hidden], or null
  const float* w2 = nullptr;  // [C][hidden]
  const float* b2 = nullptr;  // [C], or null
  ParamAct act = ParamAct::None;   // after the first layer
  float act_alpha = 0.0f, act_beta = 0.0f;
  ParamAct gate = ParamAct::Sigmoid;  // after the second
  float gate_alpha = 0.0f, gate_beta = 0.0f;
};

struct SqueezeExciteVariant {
  std::string name;  // "squeeze_excite", "squeeze_excite_cl8"
  int ranks = 1;     // blocks per image (a cluster of 2, 4, 8 or 16 above 1: compute capability 9.0)
};

// The variants that run `d` on a device of compute capability `arch` (major * 10 + minor), in heuristic order
// (index 0 the untuned choice); empty when the block's shared memory would not hold the gate's vectors.
std::vector<SqueezeExciteVariant> squeeze_excite_variants(const SqueezeExciteDesc& d, int arch);
// Every name squeeze_excite_variants can return.
std::vector<std::string> squeeze_excite_variant_names();

// x, y: [batch, C, spatial]; y may not alias x.
void launch_squeeze_excite(const SqueezeExciteVariant& v, const float* x, float* y, const SqueezeExciteDesc& d,
                           cudaStream_t stream);

}  // namespace cnnrt::kernels
