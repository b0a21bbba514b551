// An inverted residual block in one launch (MobileNet v2 and v3, EfficientNet's MBConv):
//   y = project(gate(dw(expand(x)))) [+ residual]
// where expand is a 1x1 convolution with its activation (absent when the block does not expand), dw a depthwise
// convolution (any filter size, stride, dilation and padding) with its activation, gate an optional
// squeeze-and-excitation gate over dw's output (global average pool, 1x1 + activation, 1x1 + gate activation,
// multiply), and project a 1x1 convolution with its own epilogue (bias, residual, activation).
//
// Why: at small batch each of those layers is a step of a few microseconds around a few hundred thousand
// multiply-adds (two to five steps a block); the dw_pw and squeeze_excite kernels fuse parts of a block, this one
// the whole block, and no intermediate leaves the SM.
//
// One thread-block cluster of `ranks` blocks an image (one block where ranks == 1); rank r owns a share of the
// hidden (expanded) channels, every pixel of them, so the expand, depthwise and gate of a channel need no other
// rank:
//   0. before waiting for the prior grid (they are constants), the rank's rows of every layer's weights are copied
//      into shared memory (cp.async);
//   1. the image's input (every channel, where the block expands and it fits; else the rank's channels) into shared
//      memory;
//   2. expand: 4 hidden channels of one pixel a thread, the input from shared memory;
//   3. depthwise: a thread an output, from shared memory;
//   4. the gate: the means of the rank's channels (a warp a channel), its share of the squeeze layer's sums stored
//      into every rank, a cluster barrier, every rank the squeeze layer from the ranks' shares added in rank order,
//      the gate of its own channels, its depthwise outputs scaled;
//   5. project: the rank's partial sums over its channels for every output, each stored into the rank that adds up
//      that output (distributed shared memory), a cluster barrier, then each rank its share of the outputs, the
//      ranks' partials added in rank order (results are the same run to run), the epilogue, stored to NCHW.
// Ranks only store into each other (never load), so no rank waits for another after the last barrier.
// The `_px` variants split the other way, for the first blocks of a network (large maps, few channels, small
// weights): each rank a band of output rows and every channel of it (the expanded rows its band reads computed by
// it, halo included), every weight staged in every rank; only the gate's channel sums cross ranks.
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "kernels/layer.hpp"

namespace cnnrt::kernels {

constexpr int kMbconvThreads = 256;
constexpr int kMbconvMaxBatch = 16;  // one cluster an image: offered up to here

struct MbconvDesc {
  int batch = 1;
  int C = 1, H = 1, W = 1;  // the block's input [batch, C, H, W]
  int hidden = 1;           // the expanded channels (C where the block does not expand)
  bool expand = false;
  const float* w_exp = nullptr;  // [hidden][C]
  Epilogue exp_epilogue;         // bias and activation (no residual, no pool)
  ConvGeometry dw;               // the depthwise layer: C == F == groups == hidden, over H x W
  const float* w_dw = nullptr;   // [hidden][KH][KW]
  Epilogue dw_epilogue;
  int squeeze = 0;               // the gate's squeeze channels; 0: no gate
  const float* w_se1 = nullptr;  // [squeeze][hidden]
  const float* b_se1 = nullptr;  // [squeeze], or null
  ParamAct se_act = ParamAct::None;
  float se_alpha = 0.0f, se_beta = 0.0f;
  const float* w_se2 = nullptr;  // [hidden][squeeze]
  const float* b_se2 = nullptr;  // [hidden], or null
  ParamAct se_gate = ParamAct::Sigmoid;
  float gate_alpha = 0.0f, gate_beta = 0.0f;
  int F = 1;                     // the project layer's outputs
  const float* w_pj = nullptr;   // [F][hidden]
  Epilogue pj_epilogue;          // bias and activation; the residual bound per launch
  bool residual = false;         // whether launches add a residual operand [batch, F, OH, OW]
  // The split's second launch reads the project and gate weights in its own layouts (mbconv_split_pack, uploaded):
  // set by whoever runs a split variant; no other variant reads it.
  const float* w_split = nullptr;
};

struct MbconvVariant {
  std::string name;  // "mbconv_cl16"
  int ranks = 1;     // blocks an image (a cluster above 1: compute capability 9.0)
  bool stage_x = true;  // the expand layer's input copied into shared memory (false: read from L2, where it does not fit)
  bool pixel_split = false;  // `_px`: ranks split the output rows instead of the hidden channels
  // `_split`: two launches over every SM (below); 0 for one launch.
  int split_channels = 0;  // hidden channels a block of the first launch
  int split_outputs = 0;   // outputs x pixels a block of the second
  int split_pixels = 0;
  // `_tile`: one launch, a block per output tile of tile_h x tile_w (below); 0 otherwise.
  int tile_h = 0, tile_w = 0;
};

// Whether the kernel runs `d` at all (geometry it takes; not whether it fits shared memory), and why not.
bool mbconv_supports(const MbconvDesc& d, std::string* why = nullptr);
// The variants that run `d` within `smem_optin_bytes` of shared memory a block on a device of compute capability
// `arch` (major * 10 + minor), in heuristic order (index 0 the untuned choice); empty when none fits.
std::vector<MbconvVariant> mbconv_variants(const MbconvDesc& d, int smem_optin_bytes, int arch);
// Every name mbconv_variants can return.
std::vector<std::string> mbconv_variant_names();

// Scratch (floats) `v` needs to run `d`: the split's depthwise outputs and squeeze sums; 0 for one launch.
int64_t mbconv_workspace_floats(const MbconvVariant& v, const MbconvDesc& d);

// x: [batch, C, H, W]; residual: [batch, F, OH, OW] or null; y: [batch, F, OH, OW], aliasing neither; workspace:
// mbconv_workspace_floats(v, d) floats (16-byte aligned), or null where that is 0.
void launch_mbconv(const MbconvVariant& v, const float* x, const float* residual, float* y, const MbconvDesc& d,
                   int smem_optin_bytes, cudaStream_t stream, float* workspace = nullptr);

// The split (`mbconv_split{hc}_{FO}x{PG}`, mbconv_split.cu), for blocks of many hidden channels on small maps, where
// one cluster an image leaves most SMs idle and the block's time is its staging and barriers, not its work:
//   1. a block per hc hidden channels of an image (every SM busy at batch 1): expand, depthwise with its activation
//      (to the workspace), and with a gate, the channels' means and their share of the squeeze layer's sums;
//   2. a block per FO outputs x PG pixels of an image (PG clipped to the map): the squeeze layer from the shares (a
//      fixed order), the gate of every hidden channel folded into its project weights, the project layer in 4 x 4
//      register tiles over shares of the hidden channels (added in order), the epilogue.
// Any compute capability; the weights of each launch are staged before it waits for the launch before it.
std::vector<MbconvVariant> mbconv_split_variants(const MbconvDesc& d, int smem_optin_bytes);
std::vector<std::string> mbconv_split_variant_names();
// MbconvDesc::w_split's contents from host copies of w_pj [F][hidden] and w_se2 [hidden][squeeze] (empty without a
// gate): w_pj transposed to [hidden][F rounded up to 16] (zeros past F), then w_se2 transposed to [squeeze][hidden],
// so that a block of the second launch stages its weights by 16-byte copies with no index arithmetic.
std::vector<float> mbconv_split_pack(const std::vector<float>& w_pj, const std::vector<float>& w_se2,
                                     const MbconvDesc& d);
// Throws std::invalid_argument where d.w_split is not set.
void launch_mbconv_split(const MbconvVariant& v, const float* x, const float* residual, float* y, const MbconvDesc& d,
                         float* workspace, int smem_optin_bytes, cudaStream_t stream);

// The tile (`mbconv_tile{TH}x{TW}`, mbconv_tile.cu), for blocks without a gate on large maps of few channels (a
// network's first blocks), where one cluster an image has too little of the GPU and a block's two or three steps each
// pay a launch: one launch, a block per TH x TW output tile of an image (clipped to the map), every channel of it.
// Each block expands the input over its tile's depthwise window (the halo recomputed by the neighbouring tiles), runs
// the depthwise layer and the project layer (4 x 4 register tiles over shares of the hidden channels, added in
// order); every weight is staged by every block before it waits for the launch before it. Any compute capability.
std::vector<MbconvVariant> mbconv_tile_variants(const MbconvDesc& d, int smem_optin_bytes);
std::vector<std::string> mbconv_tile_variant_names();
void launch_mbconv_tile(const MbconvVariant& v, const float* x, const float* residual, float* y, const MbconvDesc& d,
                        int smem_optin_bytes, cudaStream_t stream);

// Consecutive blocks in one launch (a chain): the same clusters run each block in turn, a cluster barrier between
// them (a block's outputs, in global memory, visible to every rank before the next reads them); each block's weights
// are staged while the block before it adds up its outputs. The planner keeps a chain only where it measures faster
// than the blocks' steps: at batch 1 it rarely does (programmatic dependent launch already hides most of a launch).
constexpr int kMbconvChainMax = 16;  // blocks a chain

struct MbconvChainTensors {  // per block: its input, residual (or null) and output
  const float* x[kMbconvChainMax] = {};
  const float* residual[kMbconvChainMax] = {};
  float* y[kMbconvChainMax] = {};
};

// The variants that run `blocks` (2 to kMbconvChainMax, one batch) as a chain: clusters of 16 and 8 on compute
// capability 9.0 where every block's regions fit shared memory together; in heuristic order.
std::vector<MbconvVariant> mbconv_chain_variants(const std::vector<MbconvDesc>& blocks, int smem_optin_bytes, int arch);
std::vector<std::string> mbconv_chain_variant_names();
// The chain's table for `v` (bytes to upload once to device memory, 8-byte aligned): each block's layer and layout.
std::vector<unsigned char> mbconv_chain_table(const MbconvVariant& v, const std::vector<MbconvDesc>& blocks);
// Runs the chain: `table` the uploaded mbconv_chain_table; a block's output may be a later block's input or residual.
void launch_mbconv_chain(const MbconvVariant& v, const std::vector<MbconvDesc>& blocks, const void* table,
                         const MbconvChainTensors& t, int smem_optin_bytes, cudaStream_t stream);

}  // namespace cnnrt::kernels
