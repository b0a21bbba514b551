// A DenseNet bottleneck layer in one launch:
//   y = act2(conv3x3(act1(conv1x1(act0(scale * x + shift)) + b1)) + b2)
// where x is the block's running stack (a block of an in-place Concat: any image stride), the prologue is the
// layer's BatchNormalization + ReLU (absent: x as is), conv1x1 has the second BatchNormalization folded into its
// weights and bias, and conv3x3 (stride 1, padding 1) writes the layer's new channels into their block of the next
// Concat (any image stride).
//
// Why: at batch 1 those are three steps of about 3 us each in the graph (the affine, a 1x1 on `pw`, a 3x3 on
// `wgr` or `small`) around a few hundred thousand multiply-adds.
//
// A block computes a TH x TW tile of every output channel of one image:
//   0. before waiting for the prior grid (they are constants), both layers' weights, the 1x1's bias and the
//      prologue's scale and shift into shared memory;
//   1. the input over the tile and its one-pixel halo, every channel, through the prologue;
//   2. the 1x1 layer over the same pixels (4 hidden channels x 4 pixels a thread), its bias and activation; the
//      hidden values of halo pixels outside the image are the 3x3's zero padding;
//   3. the 3x3 layer (4 outputs x 1 pixel a thread over a share of the hidden channels; the shares' sums added in
//      a fixed order), its bias and activation, stored.
// The halo's hidden values are computed by every tile that reads them: 2.25x the 1x1's work at 4x4 tiles, 1.56x
// at 8x8.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/layer.hpp"

namespace cnnrt::kernels {

constexpr int kDenseLayerThreads = 256;

struct DenseLayerDesc {
  int batch = 1;
  int C = 1, H = 1, W = 1;     // the input [batch, C, H, W]
  int64_t x_image = 0;         // floats from one input image to the next (0: C * H * W)
  const float* scale = nullptr;  // [C] the prologue's affine, or null (no prologue)
  const float* shift = nullptr;  // [C]
  ParamAct act0 = ParamAct::None;
  float alpha0 = 0.0f, beta0 = 0.0f;
  int M = 1;                   // the hidden channels (the 1x1's outputs)
  const float* b1 = nullptr;   // [M], or null
  ParamAct act1 = ParamAct::None;
  float alpha1 = 0.0f, beta1 = 0.0f;
  int F = 1;                   // the 3x3's outputs
  const float* b2 = nullptr;   // [F], or null
  ParamAct act2 = ParamAct::None;
  float alpha2 = 0.0f, beta2 = 0.0f;
  int64_t y_image = 0;         // floats from one output image to the next (0: F * H * W)
  // The packed weights (dense_layer_pack): w1 as [C][M rounded up to 4], w2 as [M][9][F rounded up to 4].
  const float* w1 = nullptr;
  const float* w2 = nullptr;
};

struct DenseLayerVariant {
  std::string name;  // "dense_layer_t4x4"
  int th = 4, tw = 4;  // the output tile
};

// Whether the kernel runs `d` (not whether it fits shared memory), and why not.
bool dense_layer_supports(const DenseLayerDesc& d, std::string* why = nullptr);
// The variants whose shared memory fits `smem_optin_bytes`, in heuristic order (index 0 the untuned choice).
std::vector<DenseLayerVariant> dense_layer_variants(const DenseLayerDesc& d, int smem_optin_bytes);
// Every name dense_layer_variants can return.
std::vector<std::string> dense_layer_variant_names();

// The weights as the kernel reads them, from ONNX's [M][C][1][1] and [F][M][3][3] (zeros past M and F): the
// concatenation of the packed w1 and w2; w2's starts at dense_layer_w2_offset(d).
std::vector<float> dense_layer_pack(const std::vector<float>& w1, const std::vector<float>& w2, const DenseLayerDesc& d);
size_t dense_layer_w2_offset(const DenseLayerDesc& d);

// x: [batch, C, H, W] at d.x_image; y: [batch, F, H, W] at d.y_image, aliasing neither x nor the weights.
void launch_dense_layer(const DenseLayerVariant& v, const float* x, float* y, const DenseLayerDesc& d,
                        cudaStream_t stream);

}  // namespace cnnrt::kernels
