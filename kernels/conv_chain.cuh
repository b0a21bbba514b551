// A LeNet-class network in one launch: convolution A (one input channel) + bias + activation + pooling,
// convolution B + bias + activation + pooling, flatten, fully connected layer (+ bias, activation).
//
// Why: at batch 1 each of those three steps is latency-bound (a launch, a global round trip, a few hundred
// FMAs per thread); as separate steps LeNet took 16.3 us on the H100. Here every
// intermediate stays in shared memory and the chain pays one launch and one input round trip.
//
// One thread block cluster per image, `ranks` blocks of kChainThreads threads:
//   0. every block loads the weights it needs into registers before waiting for the prior grid (they are
//      constants: no kernel writes them), then the zero-padded image; both sets of loads fly while the
//      block zeroes the margins of B's input (where anything reads them) and sets up its mbarriers, and
//      are stored into shared memory after;
//   1. rank r computes its share of A's pooled rows (channel, pooled row; split across the ranks), one of
//      two ways: a group of lanes per pooled value, a conv output a lane, pooled by shuffles (variants
//      "_aw", windows of up to 32 positions without pads), or the conv rows under them, SEG_A outputs per
//      thread, into shared memory, then the pooling; each value is stored into every rank's copy of B's
//      zero-padded input (distributed shared memory, asynchronous stores that the destination's mbarrier
//      counts: each rank waits for its own bytes, no cluster barrier);
//   2. rank r computes B's filters [r*FB, (r+1)*FB) (FB = B.F / ranks) and pools them, one of two ways:
//      window lanes (variants "_bw", where a warp holds every (pool window row, input channel)): one warp
//      per pooled output, each lane one channel's share of a window row's conv outputs, summed and pooled
//      by shuffles; or grouped: partial sums over channel groups of B's input, each thread SEG outputs of
//      one row in registers, then, for each pooled output, a few lanes (one per window position, up to a
//      warp) sum the groups' partials in a fixed order, add the bias and activate, and pool across the
//      lanes with shuffles;
//   3. rank r multiplies its pooled features (a contiguous slice of the flattened B output) with its slice
//      of the fully connected weights (brought into its shared memory by one bulk copy issued at the start),
//      a few lanes per output (dense_lanes: the block's threads spread over the outputs), and stores the
//      partial dot products into rank 0's shared memory (asynchronous stores counted by an mbarrier there:
//      only rank 0 waits); rank 0 sums the ranks' partials in rank order (deterministic), a thread an output,
//      adds the bias, activates and writes the outputs;
//   4. where more dense layers follow (up to kChainTailMax: LeNet-5's F6 and output layer), rank 0 runs them
//      from its shared memory, a few lanes per output; their weights (tens of kilobytes) arrive there by bulk
//      copies issued at the start, while the convolutions run. As steps of their own they cost ~5 us each at
//      batch 1.
// The device code is in conv_chain_device.cuh: conv_chain.cu builds it for any shapes, and conv_chain_jit.hpp
// compiles it at plan time for one model's shapes (NVRTC), where the shapes fold into constants.
// Limits (conv_chain_supports): stride 1, dilation 1, one group, square kernels of 3 or 5 (A and B the
// same size: the instantiations built), A has one input channel, B.F divisible by the ranks, and the
// staged tensors fit in shared memory.
#pragma once

#ifndef __CUDACC_RTC__  // (NVRTC: the structs only, conv_chain_device.cuh)
#include <string>
#include <vector>
#endif

#include "kernels/conv_common.cuh"
#include "kernels/fast_div.cuh"

namespace cnnrt::kernels {

constexpr int kChainThreads = 512;  // threads per block
constexpr int kChainSeg = 4;        // B outputs per thread along a row (register blocking)
constexpr int kChainSegA = 2;       // A outputs per thread along a row (shorter: A has fewer rows per rank)
constexpr int kChainImageRegs = 3;  // image floats a thread holds in registers while the block sets up
                                    // (LeNet: its 32 x 32 tile in one pass)
constexpr int kChainRun = 3;        // conv outputs a lane of b_window_lanes computes along a window row (the
                                    // widest window served)
constexpr int kChainWeightRegs = 2;  // weights a thread holds in registers likewise (LeNet: 579 a rank, one pass)

// One convolution of the chain: [C, H, W] -> conv [F, OH, OW] -> pooled [F, PH, PW] (per image), as the layer
// description has it (kernels/layer.hpp): square kernel (KH = KW), stride 1, dilation 1, one group, no residual.
struct ChainConv {
  ConvGeometry g;                   // g.N: the batch (ConvChainDesc::batch)
  Epilogue e;                       // bias, activation, pooling (kind None: PH = OH and PW = OW)
  const float* weights = nullptr;   // device, [F][C][K][K]

  __host__ __device__ int PH() const { return e.pool.kind == FusedPool::None ? g.OH : e.pool.PH; }
  __host__ __device__ int PW() const { return e.pool.kind == FusedPool::None ? g.OW : e.pool.PW; }
};

// The fully connected layer over B's flattened pooled output: out[n] = act(sum_k w[n][k] * f[k] + bias[n]).
struct ChainDense {
  int N = 1;                        // outputs per image
  const float* weights = nullptr;   // device, Gemm's alpha folded in. fc: per filter f of B, an [N][B.PH * B.PW]
                                    // block padded to whole float4s (chain_fc_weights; 16-byte aligned);
                                    // tail: [N][the previous layer's N]
  const float* bias = nullptr;      // device, [N] (Gemm's beta * C), or null
  ParamAct act = ParamAct::None;
  float alpha = 0.0f, beta = 0.0f;
};

// Dense layers after the first, in order (LeNet-5's F6 and output layer): each reads the one before
// (tail[0] reads fc's outputs) and the last writes y. Their weights and biases are copied into rank 0's
// shared memory whole, by bulk asynchronous copies issued at the kernel's start: each must be 16-byte
// aligned and readable to the next whole float4 (kChainTailAlign floats; the planner pads its uploads).
constexpr int kChainTailMax = 2;
constexpr int kChainTailAlign = 4;
constexpr int kChainTailMaxBytes = (1 << 20) - 16;  // what one mbarrier counts

struct ConvChainDesc {
  int batch = 1;
  ChainConv a, b;
  ChainDense fc;
  int tail_count = 0;               // of kChainTailMax
  ChainDense tail[kChainTailMax];   // weights [N][the previous layer's N]
};

// Where each staged tensor lives in a block's dynamic shared memory (float offsets), and how the work of
// one image is split; computed on the host for one (desc, ranks).
struct ChainLayout {
  int ranks = 1;          // blocks per image (the cluster)
  int fb = 1;             // B's filters per rank
  int groups = 1;         // channel groups of B's input (partial sums per group, then summed in order)
  int group_channels = 1; // channels per group (the last group may have fewer)
  int segs = 1;           // kChainSeg-wide segments per row of B's output
  int segs_a = 1;         // kChainSegA-wide segments per row of A's output
  int img_h = 1, img_w = 1;  // A's zero-padded input window
  int src_h = 1, src_w = 1;  // B's zero-padded input (A's pooled output), rows per channel and row pitch
  int src_floats = 0;     // B's input, rounded up to whole float4s
  int src_col0 = 0;       // the column of B's padded input's first column in a staged row (a left margin)
  int rows_a = 1;         // A's pooled rows (channel, row) per rank (the last rank may have fewer)
  int span_a = 1;         // conv rows under one pooling window: (kh - 1) * dil_h + 1 (1 without pooling)
  int pool_lanes_log2 = 0;  // log2 of the lanes per pooled output of B (its window size rounded up to a power
                            // of two, at most 32)
  bool window_lanes = false;  // B's sums and pooling as one warp per pooled output (b_window_lanes), not groups
  bool zero_margins = true;   // whether B's staged input has margins or padding that something reads
  bool a_window = false;      // A's pooled values as lanes of a warp each, a conv output a lane (a_window_lanes)
  int a_lanes_log2 = 0;       // log2 of those lanes: A's window size rounded up to a power of two
  int c_lanes_log2 = 0;       // log2 of B's channels rounded up to a power of two (window lanes)
  // The divisions of the item loops (see fast_div.cuh): by segs_a, A's window rows, PH and PW; by segs, B's
  // OH, the groups, B's pooled outputs per filter, PW and pool window width; by this rank's feature count.
  FastDiv by_segs_a, by_win_rows, by_pha, by_pwa, by_segs, by_ohb, by_groups, by_pb, by_pwb, by_pool_kw, by_slice;
  FastDiv by_pool_kw_a;        // A's pooling window width
  FastDiv by_src_w, by_src_h;  // B's staged input: row pitch and rows per channel
  FastDiv by_img_w;            // A's staged image: row pitch
  int img = 0, wa = 0, ba = 0, map_a = 0, src = 0, wb = 0, bb = 0, part = 0, feat = 0, wfc = 0, bfc = 0, fc_part = 0;
  int tail_w[2] = {0, 0}, tail_b[2] = {0, 0};  // the tail's weights and biases (kChainTailMax layers)
  int tail_w_bytes[2] = {0, 0}, tail_b_bytes[2] = {0, 0};  // their bulk copies' sizes (whole float4s)
  int tail_bytes = 0;     // what the copies bring in all (the biases only where the desc has them)
  int fc_stride = 0;      // floats per filter block of the dense layer's weights (chain_fc_weights)
  int fc_bytes = 0;       // this rank's blocks: fb * fc_stride floats, one bulk copy
  int dense_io = 0;       // two buffers of dense_width floats: the inputs and outputs of the tail's layers
  int dense_width = 0;    // the widest dense output before the last (0 without a tail)
  int floats = 0;         // total
};

#ifndef __CUDACC_RTC__
struct ConvChainVariant {
  std::string name;       // e.g. "chain_k5k5_cl16_aw_bw" (docs/kernels.md)
  ChainLayout layout;
};

// The dense layer's weights as the kernel reads them, from Gemm's [N][K] (K = B.F * P, P = B.PH * B.PW, alpha
// folded in): filter-major, each filter's [N][P] block padded to whole float4s, so that every rank's filters are
// one contiguous, aligned run (one bulk copy) whatever the cluster size.
std::vector<float> chain_fc_weights(const std::vector<float>& nk, const ConvChainDesc& d);

// Whether the chain kernel runs `d`; `why` (if given) says what does not fit.
bool conv_chain_supports(const ConvChainDesc& d, int smem_optin_bytes, std::string* why = nullptr);

// A variant's name: kernel sizes, cluster size, and whether A's and B's pooling run as window lanes.
std::string chain_variant_name(int ka, int kb, int ranks, bool a_window, bool b_window);
// Every name conv_chain_variants can return (for the tuning cache's kernel-set version).
std::vector<std::string> conv_chain_variant_names();

// Cluster sizes worth trying for `d`, in heuristic order (portable sizes first).
std::vector<ConvChainVariant> conv_chain_variants(const ConvChainDesc& d, int smem_optin_bytes);

// How one chain launch runs, for the built kernels and those compiled at plan time alike: a cluster of
// L.ranks blocks of kChainThreads per image (the cluster along z), L.floats of dynamic shared memory, PDL
// when it is on (launch.cuh). `attributes` must outlive the returned config.
cudaLaunchConfig_t chain_launch_config(const ChainLayout& L, int batch, cudaStream_t stream,
                                       cudaLaunchAttribute (&attributes)[2]);

// x: [batch, 1, A.H, A.W]; y: [batch, N of the last dense layer (fc, or tail[tail_count - 1])]. `image_once`:
// x is mapped pinned host memory; each rank of a cluster reads its share of the image over the bus and passes
// it to the others through distributed shared memory (on device memory every rank reading all of it is faster).
// `done` (batch 1 only; null otherwise): the device address of a word of mapped host memory, set to 1 once y
// is written, so that a host waiting for y can spin on it instead of waiting for the stream.
void launch_conv_chain(const ConvChainVariant& v, const float* x, float* y, const ConvChainDesc& d,
                       cudaStream_t stream, bool image_once = false, unsigned* done = nullptr);
#endif  // __CUDACC_RTC__

}  // namespace cnnrt::kernels
