// A run of a network's layers in one launch: the network kernel.
//
// Why: at small batch a layer of a small CNN is a few hundred thousand multiply-adds, and what a step plan pays is
// the step (launch, prologue, drain: a few microseconds each). Here one thread-block cluster an image runs the
// layers in order, each layer's work spread over every thread of the cluster, a cluster barrier (release/acquire:
// the layer's global writes visible to every block of it) between a layer and the first layer that reads it.
// Activations stay in global memory (L2 at these sizes); weights are read through the read-only path.
//
// The layers it runs (NetOp): convolutions of any geometry (groups, stride, dilation, padding; a dense layer is a
// 1x1 convolution of a 1x1 map) with bias, residual and activation; pooling windows; global pooling; broadcast
// binary ops; a per-channel affine map with an activation (a standalone BatchNormalization or activation); copies
// into a slice (Concat); permutations of the axes after the batch (Transpose). The planner (plan/gpu/lower_net.cpp)
// measures it on the last layers of a network against their steps and keeps the faster.
//
// Convolutions are split over the cluster's blocks by filters; each block copies the input channels it reads and its
// filters' weights into shared memory (the weights before the barrier), so the sums read shared memory, not L2 at
// a round trip a load. How a block's outputs are shared: `lanes` threads (a power of two up to 32, within a warp) compute one output,
// each summing a share of the input channels, then add their partial sums by shuffles in a fixed order (results
// are the same run to run). One lane suits layers of many outputs (a depthwise 3x3), 32 suit layers of few outputs
// and long sums (a 1x1 convolution of 336 channels on a 3x3 map, a dense layer).
//
// The op table is uploaded once at plan time and copied into shared memory by each block before it waits for the
// grid before it (PDL); the tensors' addresses are a kernel parameter, bound per launch.
#pragma once

#ifndef __CUDACC_RTC__  // (NVRTC: the op kinds only, for the sequence kernel compiled at plan time)
#include <cuda_runtime.h>

#include <string>
#include <vector>
#endif

#include "kernels/layer.hpp"

namespace cnnrt::kernels {

constexpr int kNetThreads = 512;
constexpr int kNetMaxTensors = 320;  // tensor addresses a launch binds (a kernel parameter: 2.5 KB)
constexpr int kNetMaxOps = 384;
constexpr int kNetMaxBatch = 16;     // one cluster an image: beyond this the step plan's kernels win
constexpr int kNetMaxRank = 5;       // axes after the batch of a Binary or Permute op

enum class NetOpKind : int {
  Conv,        // y = act(conv(x) + bias + residual); `g` (N unused), `w` [F][C/groups][KH][KW]
  Pool,        // max or average window over x [C][H][W]: `g` holds C, H, W, OH, OW; `pool` the window
  GlobalPool,  // x [C][H*W] -> y [C]: average, or maximum when pool.kind == Max
  Binary,      // y = a op b over `dims`, a and b read through their strides (0: broadcast)
  Affine,      // y = act(x * scale[c] + shift[c]) over [C][inner] (scale, shift: null for 1 and 0)
  Copy,        // y[out_offset + i] = x[i] for i < count (a block of a Concat)
  Permute,     // y over `dims`, x read through strides `sa` (the axes after the batch, permuted)
};

enum class NetBinary : int { Add = 0, Sub, Mul, Div };

// a op b (the network and sequence kernels' binary ops).
__host__ __device__ inline float apply_binary(NetBinary op, float a, float b) {
  switch (op) {
    case NetBinary::Add: return a + b;
    case NetBinary::Sub: return a - b;
    case NetBinary::Mul: return a * b;
    default: return a / b;
  }
}

struct alignas(16) NetOp {  // (blocks copy the table as 16-byte words)
  NetOpKind kind = NetOpKind::Conv;
  int out = -1, in0 = -1, in1 = -1;         // tensor indices; in1: the residual (Conv), operand b (Binary)
  int out_stride = 0, in0_stride = 0, in1_stride = 0;  // floats from one image to the next (0: one for all)
  int out_offset = 0;                       // Copy: where the block starts in the output image
  int barrier = 1;                          // a cluster barrier before this op (it reads what an op since wrote)
  int lanes = 1;                            // threads that share one output's sum (power of two <= 32)
  // Conv: block r of the cluster computes filters [r * fb, (r + 1) * fb). With `stage`, its weights (copied before the
  // barrier: they are constants) and the input channels it reads are copied into shared memory first; for a
  // `pointwise` layer (a 1x1 convolution of stride 1, no padding, one group: a GEMM) each group of lanes computes one
  // filter at `rp` adjacent pixels.
  int fb = 1;
  int stage = 0;
  int pointwise = 0;
  int rp = 1;
  int w_at = 0;  // where the staged weights start (floats after the staged input)
  ConvGeometry g;                           // Conv; Pool and GlobalPool read C, H, W, OH, OW
  PoolGeometry pool;                        // Pool (kind, window); GlobalPool (kind)
  const float* w = nullptr;                 // Conv weights; Affine scale
  const float* bias = nullptr;              // Conv bias; Affine shift
  ParamAct act = ParamAct::None;            // Conv, Affine
  float alpha = 0.0f, beta = 0.0f;
  NetBinary binary = NetBinary::Add;        // Binary
  int count = 0;                            // Copy: floats; Affine: C * inner
  int inner = 1;                            // Affine: floats a channel
  int rank = 0;                             // Binary, Permute
  int dims[kNetMaxRank] = {};
  int sa[kNetMaxRank] = {}, sb[kNetMaxRank] = {};
};

#ifndef __CUDACC_RTC__
struct NetVariant {
  std::string name;  // "net_cl16"
  int ranks = 16;    // blocks a cluster (one cluster an image)
};

// The variants on a device of compute capability `arch` (major * 10 + minor) at most `max_cluster` blocks a
// cluster: none below 9.0 (clusters).
std::vector<NetVariant> net_variants(int arch, int max_cluster = 16);
// Every name net_variants can return.
std::vector<std::string> net_variant_names();

// Shared memory (floats) a Conv op's staging takes a block, as its fb says.
struct NetStaging {
  int x_floats = 0, w_floats = 0;
  int total() const { return x_floats + w_floats; }
};
NetStaging net_conv_staging(const NetOp& op, int ranks);
// Configures a Conv op (its geometry set) for clusters of `ranks` blocks: the filters a block, the staging where it
// fits `budget_floats`, the GEMM layout for a pointwise layer, the lanes an output and pixels a group. Returns what
// it stages (zeros: nothing).
NetStaging configure_net_conv(NetOp& op, int ranks, int budget_floats);

// The shared memory a block of the kernel has for staging: (the device's opt-in limit) - the op table.
int net_staging_floats(int n_ops, int smem_optin_bytes);

// Runs `n_ops` ops of the device table `ops` for `batch` images over the tensors at `tensors[0 .. n_tensors)`, with
// `staging_floats` of shared memory a block for the staged inputs and weights (the most any op stages). `trace`
// (the lab's): null, or 6 * n_ops device words for the global timer at the phases of each op in the first block.
void launch_net(const NetVariant& v, const NetOp* ops, int n_ops, const float* const* tensors, int n_tensors, int batch,
                int staging_floats, cudaStream_t stream, unsigned long long* trace = nullptr);
#endif  // __CUDACC_RTC__

}  // namespace cnnrt::kernels
