// Direct convolution for small feature maps at small batches (LeNet-class layers: a few channels of 28x28
// or 14x14, batch 1 to 64), where the other families leave most SMs idle or give each thread a long serial
// chain of FMAs: at batch 1, LeNet's conv2 (8 -> 16 channels, 5x5, 14x14, 3x3/3 max-pool) is 2 blocks of the
// general kernel, each thread summing 1600 products.
//
// A block owns one image, FB filters and a tile of output rows (with a fused pool: of pooled rows, so that
// the conv tile is the pool windows' source region). Everything it reads is staged once in shared memory:
// its filters (issued before the wait on the previous kernel: no kernel writes weights) and the input
// region of every channel with its halo, zero-filled outside the image. Then every thread computes one conv
// output pixel, or a run of WT = 2 along a row, for FT filters over a slice of the channels (c = s, s + CS,
// ...): the work of a block is FG filter groups x CS channel slices x the tile's pixels, spread over up to
// 1024 threads, so the serial chain of a thread is C/CS * K*K taps. The CS partial sums meet in shared
// memory and are added in slice order (deterministic); then bias, residual, activation, and either the
// store or the pool of the activated tile (conv_device.cuh's pool_tile, which unrolls max windows up to
// 3x3).
//
// The input rows are pitched so that the 32 lanes of a warp (consecutive pixels of the tile, wrapping to
// the next rows) fall on distinct banks: pitch = tile width (mod 32). A thread's FT filters are contiguous
// in shared memory ([c][group][tap][FT], one vector load) and the same for the lanes of a group (broadcast).
// Weights use pack_general_filters()' layout ([C][K][K][Fpad]).
#pragma once

#include "kernels/conv_common.cuh"

namespace cnnrt::kernels {

// One configuration of the kernel for one layer (host side; the launch derives the rest).
struct SmallConfig {
  int ft = 1;         // filters a thread accumulates (compile-time: 1 or 4)
  int wt = 1;         // consecutive pixels of a row a thread computes (compile-time: 1, or 2 with ft 4)
  int fg = 1;         // filter groups a block holds: FB = ft * fg filters
  int cs = 1;         // channel slices summed in shared memory
  int tile_rows = 1;  // output rows a block covers (pooled rows when the pool is fused)
};

// Registry entry "small": groups == 1, square kernel 3 or 5, stride 1, dilation 1, a small map (output at
// most 64 wide, input at most 32K floats an image) whose staged input of every channel fits in shared
// memory. Its variants are configurations (SmallConfig) of a few instantiations, scored for the layer.

}  // namespace cnnrt::kernels
