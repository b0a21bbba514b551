// A classifier's dense head in one launch: two or three dense layers (Gemm, bias, activation), each reading
// the one before, at small batch; or a global average pool and one to three dense layers; or a 1x1 convolution
// with its activation, the global average pool of its output, and one to three dense layers.
//
// Why: at batch 1 a dense layer of a few hundred kilobytes of weights is a step of its own, ~4-5 us in the
// plan's CUDA graph, where reading its weights takes well under a microsecond. kws_cnn ends in three such
// layers, vgg_small in two; MobileNet v2 ends in a 1x1 convolution to 1280 channels over a 3x3 map, the pool
// and one layer: the convolution alone is a step (two where its channel sum is split), for ~1 M multiply-adds.
//
// One thread-block cluster per image, `ranks` blocks of kDenseChainThreads threads:
//   0. before waiting for the prior grid (the weights are constants), every rank starts one bulk copy of its
//      block of the first layer's weights (its slice of the inputs, for every output: dense_chain_weights)
//      and, with a convolution in front, one of the convolution's filters that make its slice
//      (dense_chain_conv_weights); rank 0 copies of the first layer's bias and the later layers' weights and
//      biases; then, once the prior grid is done, the rank loads its slice of the image's inputs (with a pool
//      in front: averages them, a warp per input, lanes over its values, in a fixed order; with a convolution:
//      stages the image's every channel, computes its slice of the filters at every pixel, a thread an output,
//      activates and averages them, a thread a filter, in pixel order);
//   1. rank r computes its partial dot products for every output of the first layer, one warp per output,
//      and stores them into rank 0's shared memory (asynchronous stores counted by an mbarrier there);
//   2. rank 0 sums the partials in rank order (deterministic), adds the bias and activates, then runs the
//      later layers from shared memory, a few lanes per output (the block's threads spread over the outputs:
//      chain_detail::dense_layer), and writes the last layer's outputs.
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "kernels/conv_chain.cuh"

namespace cnnrt::kernels {

constexpr int kDenseChainThreads = 512;
constexpr int kDenseChainMax = 3;  // layers

// A 1x1 convolution (stride 1, one group) and its activation in front of the pool: its filters are the first
// dense layer's k inputs.
struct DenseChainConv {
  int channels = 0;                 // its input channels; 0: no convolution
  const float* weights = nullptr;   // device, dense_chain_conv_weights for the variant's cluster size
  const float* bias = nullptr;      // device, [k], or null
  ParamAct act = ParamAct::None;
  float alpha = 0.0f, beta = 0.0f;
};

struct DenseChainDesc {
  int batch = 1;
  int k = 1;                          // the first layer's inputs per image
  int pool = 1;                       // values averaged into each input (a GlobalAveragePool's H * W in front;
                                      // x is then [batch, k, pool]), 1 for none
  DenseChainConv conv;                // with conv.channels > 0, x is [batch, conv.channels, pool] (pool >= 1)
  int count = 2;                      // layers, 2 .. kDenseChainMax (1 .. with a pool)
  ChainDense layers[kDenseChainMax];  // layers[0].weights: dense_chain_weights for the variant's cluster size;
                                      // the others [N][the previous N] and every bias, padded to whole float4s
                                      // (kChainTailAlign) and 16-byte aligned
};

// Shared-memory offsets (floats) and bulk-copy sizes for one (desc, ranks).
struct DenseChainLayout {
  int ranks = 1;
  bool by_thread = false; // the first layer's outputs one a thread (variants "_t"; weights [slice][N0] a rank),
                          // else one a warp ([N0][slice]): many outputs over short slices want the former
  int slice = 1;          // first-layer inputs per rank (the last rank's past k read as zeros)
  int block = 0;          // floats of one rank's first-layer weights: round4(N0 * slice)
  int x = 0, w0 = 0, part = 0, io = 0;
  int conv_block = 0;     // floats of one rank's convolution filters: round4(slice * conv.channels); 0 without
  int conv_w = 0, conv_x = 0, conv_out = 0;  // its filters, the image's channels, its activated outputs
  int io_width = 0;       // each of the two buffers between layers
  int bias[kDenseChainMax] = {0, 0, 0};
  int weights[kDenseChainMax] = {0, 0, 0};  // layers 1.. (layer 0's is w0)
  int bias_bytes[kDenseChainMax] = {0, 0, 0}, weight_bytes[kDenseChainMax] = {0, 0, 0};  // their bulk copies
  int rank0_bytes = 0;    // what rank 0's extra copies bring (biases present, later layers' weights)
  int floats = 0;
};

struct DenseChainVariant {
  std::string name;  // "dense_chain_cl8", "dense_chain_cl8_t" (by_thread); "conv_dense_chain_cl8" with a convolution
  DenseChainLayout layout;
};

// Whether the kernel runs `d` at some cluster size; `why` (if given) says what does not fit.
bool dense_chain_supports(const DenseChainDesc& d, int smem_optin_bytes, std::string* why = nullptr);
// The cluster sizes that fit, portable ones first.
std::vector<DenseChainVariant> dense_chain_variants(const DenseChainDesc& d, int smem_optin_bytes);
// Every name dense_chain_variants can return.
std::vector<std::string> dense_chain_variant_names();

// The first layer's weights as a variant reads them, from [N0][k] (alpha folded in): per rank, its slice of
// the inputs for every output, [N0][slice] ([slice][N0] by_thread; zeros past k), padded to whole float4s: one
// aligned run a rank.
std::vector<float> dense_chain_weights(const std::vector<float>& nk, const DenseChainDesc& d, const DenseChainLayout& L);

// The convolution's filters as a variant reads them, from [k][channels]: per rank, its slice of the filters,
// [slice][channels] (zeros past k), padded to whole float4s: one aligned run a rank.
std::vector<float> dense_chain_conv_weights(const std::vector<float>& kc, const DenseChainDesc& d,
                                            const DenseChainLayout& L);

// x: [batch, k] ([batch, k, pool] with a pool, [batch, conv.channels, pool] with a convolution); y: [batch, N of
// the last layer]. d.layers[0].weights (and d.conv.weights) must be in v's layout.
// `done` (batch 1 only; null otherwise): a word of mapped host memory set to 1 once y is written (launch_conv_chain).
void launch_dense_chain(const DenseChainVariant& v, const float* x, float* y, const DenseChainDesc& d, cudaStream_t stream,
                        unsigned* done = nullptr);

}  // namespace cnnrt::kernels
