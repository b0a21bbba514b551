// A small network in one launch with its activations in shared memory: the sequence kernel.
//
// Why: the network kernel (net.cuh) keeps activations in L2 and stages each op's input and weights from there,
// about a microsecond an op before any sum. Layers whose activations fit in a block's shared memory
// (1-D networks of sensor series and audio, the small maps at the end of a CNN) needs neither: one cluster of
// `ranks` blocks an image holds every activation of its image in each rank's shared memory. Rank r computes its
// share of a layer's output channels from its own copy of the layer's input and stores them into every rank's
// copy of the output (distributed shared memory), laid out with the zero halo its readers' padding needs, so that
// the sums test no bounds. Those stores are asynchronous, counted by the receiving rank's
// mbarrier for the layer, which is all a rank waits for before the next layer (no cluster barrier between layers);
// every layer's weights for the rank's filters are staged once, at the start, before the wait for the grid before
// (they are constants).
//
// A convolution's outputs go a warp item at a time: `fb` filters (of one group) at 32 * `pb` consecutive output
// positions, lane l the positions l, l + 32, ...; the taps (input channel, filter row and column) summed over one
// index through a table of their offsets, each one broadcast vector read of the filters' weights (staged
// tap-major) and one read of the input per position; where a rank has too few outputs to give every warp an
// item, the taps are split over items too, and the split sums added in a fixed order. Layers of few output
// positions (a dense layer is a 1x1 convolution of a 1x1 map) run `lanes` threads an output instead, each a share
// of the input channels, added by shuffles in a fixed order (results are the same run to run). The weights are
// packed per rank at plan time as they lie in shared memory, and copied in by 16-byte cp.async; the weights of
// layers of one output position (read once an image) stay in global memory where they do not all fit.
//
// The layers it runs: convolutions of any geometry (groups, stride, dilation, padding) with bias, a residual and an
// activation, and a max or average pool after them; pools; global pools; per-channel affine maps with an activation;
// elementwise binary ops (one operand per channel where it broadcasts: a squeeze-excitation gate); the blocks of a
// concatenation, which their producers write in place; channel shuffles. A layer reads any tensor an earlier layer wrote (or the
// input): tensors lie at offsets of one activation area assigned at plan time, so that no tensor a rank may still
// read is overwritten. The planner (plan/gpu/lower_net.cpp) offers it for the same cuts as the network kernel,
// measured against the steps.
#pragma once

#ifndef __CUDACC_RTC__  // (NVRTC: the layer table only, seqnet_device.cuh)
#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>
#endif

#include "kernels/fast_div.cuh"
#include "kernels/layer.hpp"
#include "kernels/net.cuh"

namespace cnnrt::kernels {

constexpr int kSeqThreads = 512;
constexpr int kSeqMaxLayers = 64;
constexpr int kSeqMaxBatch = 64;  // one cluster an image: beyond this the step plan's kernels win
constexpr int kSeqMaxInputs = 4;  // tensors from before the cut it stages (the first op's input, residuals)

struct alignas(16) SeqLayer {  // (blocks copy the table as 16-byte words)
  // Conv (a pool after it where pool.kind is set), Pool, GlobalPool, Affine, Binary, Permute (a channel shuffle)
  NetOpKind kind = NetOpKind::Conv;
  // The input [C][H][W]: element (c, y, x) at c * in_cs + y * in_rs + x + in_off from in_base of the activation area.
  int C = 1, H = 1, W = 1;
  int in_base = 0, in_cs = 1, in_rs = 1, in_off = 0;
  // The output [OC][OH][OW] (after the pool): element (c, y, x) at c * out_cs + y * out_rs + x + out_off from
  // out_base of every rank's activation area, each channel's plane out_hp x out_wp floats with the interior from row
  // out_pt, column out_pl (zeros around it); the last layer's into global memory, dense.
  int OC = 1, OH = 1, OW = 1;
  int out_base = 0, out_cs = 1, out_rs = 1, out_off = 0, out_pt = 0, out_pl = 0, out_hp = 1, out_wp = 1;
  int cb = 1;  // output channels a rank: rank r computes [r * cb, min(OC, (r + 1) * cb))
  // `local`: every layer that reads the output reads only the rank's own channels of it (a per-channel layer: pool,
  // global pool, affine map, binary op, depthwise convolution, a residual), so it stays in the rank (no share, no
  // wait).
  int local = 0;
  // The second operand (res_base >= 0): Conv, the residual added before the activation; Binary, b. Element (c, y, x)
  // at res_base + c * res_cs + y * res_rs + x * res_xs + res_off (one value a channel: res_rs = res_xs = 0).
  int res_base = -1, res_cs = 0, res_rs = 0, res_xs = 0, res_off = 0;
  NetBinary binary = NetBinary::Add;  // Binary: out = in op res
  // Conv: the geometry (OH, OW: before the pool); the register block (fb filters x 32 * pb positions a warp item)
  // and the splits of its taps (ks) where `direct`, else the lanes an output; where the rank's weights and biases
  // are staged (floats into the weight area; -1: read from global memory) and the taps' offsets (ints into the
  // tap area; -1: none). Permute: its channel map at t_at of the tap area.
  int direct = 0;  // 1: warp items; 0: lanes an output
  int fb = 1, pb = 1, ks = 1, lanes = 1;
  int w_at = -1, b_at = -1, t_at = -1;
  ConvGeometry g;
  PoolGeometry pool;              // Conv: the pool after it (kind None: none); Pool: its window
  const float* w = nullptr;       // Conv weights [F][C / groups][KH][KW]; Affine scale (null: 1)
  const float* bias = nullptr;    // Conv bias; Affine shift (null: 0)
  ParamAct act = ParamAct::None;  // Conv, Affine
  float alpha = 0.0f, beta = 0.0f;
  // The index arithmetic's constants, computed by build_seqnet (the loops divide by multiply-high and shift: a
  // division sequence is some 25 dependent instructions, and a layer's index arithmetic is most of its issue).
  int cg = 1;                  // Conv: input channels a group
  int T = 1, per = 1, tiles = 1;  // Conv direct: taps a filter, taps a split, items of 32 * pb positions
  FastDiv ks_d, tiles_d;       // Conv direct: by ks, by tiles
  FastDiv fg_d, ow_d, p_d;     // Conv: by F / groups, by the convolution's OW and OH * OW (before the pool)
  FastDiv kk_d, kw_d;          // Conv: by KH * KW and by KW (the tap table)
  FastDiv out_p_d, out_w_d;    // by the layer's OH * OW and OW (after the pool)
  FastDiv in_p_d, in_w_d;      // by the input's H * W and W
  // The output's zero halo a channel: its floats, those above the interior, the side columns a row; by each.
  int halo_n = 0, halo_top = 0, halo_sides = 0;
  FastDiv halo_d, halo_wp_d, halo_sides_d;  // by halo_n, out_wp, halo_sides
};

#ifndef __CUDACC_RTC__
// A tensor the program reads from global memory, [c][h][w] dense there (`image_floats` from one image to the next), as
// it is staged: planes cs floats apart from `base` of the activation area, rows rs, the interior from row pt, column
// pl (zeros around it).
struct SeqInput {
  int slot = -1;  // the op tables' tensor
  int image_floats = 0;
  int base = 0, c = 1, h = 1, w = 1, cs = 1, rs = 1, pt = 0, pl = 0;
};

// A program of layers as the kernel runs it, for clusters of `ranks` blocks.
struct SeqProgram {
  std::vector<SeqLayer> layers;
  int ranks = 1;
  int act_floats = 0;      // the activation area: every tensor a layer reads, at the offsets the layers name
  int partial_floats = 0;  // a convolution's sums before its epilogue (split, or pooled)
  int weight_floats = 0;   // the rank's staged weights of every layer
  int tap_ints = 0;        // the channel maps of the shuffles, then the tap offsets of the direct convolutions
  std::vector<int> channel_maps;  // Permute: out channel c reads in channel channel_maps[t_at + c]
  int out_image_floats = 0;       // from one output image to the next in global memory
  std::vector<SeqInput> inputs;   // the first op's input first
  // Device: every rank's weights and biases, then the tap offsets, as they lie in its shared memory
  // (seqnet_packed_weights, uploaded), staged_floats() a rank.
  const float* packed = nullptr;
  int staged_floats() const { return weight_floats + (tap_ints + 3) / 4 * 4; }
  size_t smem_bytes() const;      // a block of the built kernel's (its layer table first)
  size_t jit_smem_bytes() const;  // a block of the kernel compiled for the program (no table)
};

struct SeqVariant {
  std::string name;  // "seqnet_cl8"
  int ranks = 1;     // blocks a cluster (one cluster an image)
};

// The variants on a device of compute capability `arch` (major * 10 + minor), at most `max_cluster` blocks a
// cluster: one block an image everywhere, clusters from 9.0.
std::vector<SeqVariant> seqnet_variants(int arch, int max_cluster = 16);
// Every name seqnet_variants can return.
std::vector<std::string> seqnet_variant_names();

// Per tensor slot that lies inside another (a block of an in-place Concat): that tensor's slot and the byte offset
// of the block in an image.
using SeqAliases = std::map<int, std::pair<int, int64_t>>;

// The network kernel's ops `ops` (from a cut to the end of a network; tensors as the planner's slots, `aliases`
// the blocks of in-place Concats among them) as the sequence kernel's program for clusters of `ranks` blocks, where
// it runs them: each op reads what an op before it wrote or a tensor from before (the first op's input, and up to
// kSeqMaxInputs in all), of the kinds above, the last op writes the output, and the tensors, the sums and the staged weights fit `smem_optin` bytes of shared memory.
// Otherwise nullopt, and `why` says why.
std::optional<SeqProgram> build_seqnet(const std::vector<NetOp>& ops, int ranks, int smem_optin, std::string* why,
                                       const SeqAliases* aliases = nullptr);

// Host copies of device arrays, each read back once (by device address) for every program packed with it.
using SeqHostCopies = std::unordered_map<const float*, std::vector<float>>;

// The weights and biases of `program`'s layers (read back from the device, or found in `copies`, which keeps
// what it reads) and the tap offsets of its direct convolutions, packed for its ranks, to upload as
// SeqProgram::packed: rank r's block at r * staged_floats(), each value where the rank stages it.
std::vector<float> seqnet_packed_weights(const SeqProgram& program, SeqHostCopies* copies = nullptr);

// Runs `program` (its layers uploaded at `layers`) for `batch` images from its inputs `x` (program.inputs' order)
// into `y`. `trace` (the lab's): null, or 4 + 3 * layers device words for the global timer at the phases of the first
// block.
void launch_seqnet(const SeqProgram& program, const SeqLayer* layers, const float* const* x, float* y, int batch,
                   cudaStream_t stream, unsigned long long* trace = nullptr);
// The same for a program of one input.
void launch_seqnet(const SeqProgram& program, const SeqLayer* layers, const float* x, float* y, int batch,
                   cudaStream_t stream, unsigned long long* trace = nullptr);

// The kernel compiled at plan time for one program, with NVRTC (jit.hpp). The built kernel reads every layer's
// fields from its table in shared memory, each a load and most of them index arithmetic (a layer's set-up, its
// loops' bounds, the FastDiv constants, the register block's dispatch); compiled with the program's layers and
// layout as constants, the same code (seqnet_device.cuh) folds them away. The layers' weight addresses are
// constants of the source too: a compiled kernel serves the program it was built from, whose weights live as long
// as the plan. Only the inputs, the output and the packed weights are parameters.
std::string seqnet_jit_source(const SeqProgram& program);
extern const char* const kSeqJitEntry;

class JitKernel;

class SeqJitKernel {
 public:
  // `cubin` (compile_jit_source of seqnet_jit_source(program)) loaded for the current device. Throws
  // std::runtime_error when the load fails.
  SeqJitKernel(const std::string& cubin, const SeqProgram& program);
  ~SeqJitKernel();
  SeqJitKernel(const SeqJitKernel&) = delete;
  SeqJitKernel& operator=(const SeqJitKernel&) = delete;
  // As launch_seqnet, for the program it was compiled from (the same layers, layout and weights).
  void launch(const SeqProgram& program, const float* const* x, float* y, int batch, cudaStream_t stream) const;

 private:
  std::unique_ptr<JitKernel> kernel_;
};

#endif  // __CUDACC_RTC__

}  // namespace cnnrt::kernels
