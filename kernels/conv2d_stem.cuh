// Direct convolution for layers with few input channels: the RGB and single-channel stems of image
// networks (3x3 stride 2, 7x7 stride 2, 11x11 stride 4, often with a max pool after them) and the first
// layer of 1-D signal networks. Such a layer has a short reduction (C * KH * KW taps, 27 to a few hundred)
// and many outputs, so the work is all in the outputs' reuse of the input tile and of the filters.
//
// A block owns one image, FB filters and a tile of outputs (with a fused pool: of pooled outputs, so that
// the conv tile is the pool windows' source region). Every tap of its FB filters and the input region of
// every channel with its halo (zero outside the image) are staged once in shared memory by cp.async, the
// filters before the wait on the previous kernel. The input columns are stored de-interleaved by stride
// phase (column x at (x mod S) * phase_width + x / S), so that the lanes of a warp, which own consecutive
// output columns, read consecutive words at every tap whatever the stride: no bank conflicts at stride 2
// or 4. The row pitch is chosen so that a warp's pixels on the next tile row fall on the next banks.
//
// Each thread accumulates RP pixels (the tile's pixels q, q + NPT, ...: every lane of a warp on the same
// tap) for FT filters in registers: per tap RP shared loads, FT / 4 broadcast vector loads of the filters
// ([tap][FB]) and FT * RP FMAs. Then bias, residual, activation, and either the store (lanes on
// consecutive columns: coalesced) or the activated conv tile in shared memory, pooled by pool_tile.
// Weights use pack_general_filters()' layout ([C][KH][KW][Fpad]).
//
// The row kernel, for the common stems (3x3 and 7x7 filters at stride 2), has the filter size, the stride and the
// staged row pitch as compile-time constants: a warp's lanes own 32 adjacent output columns, each thread RP rows
// of its column for FT filters, and every tap's loads are a register plus an immediate offset, so the unrolled
// taps run no index arithmetic (the general kernel spent about four instructions of it per FMA).
#pragma once

#include "kernels/conv_common.cuh"

namespace cnnrt::kernels {

// One configuration of the kernel for one layer (host side; the launch derives the rest).
struct StemConfig {
  int ft = 8;          // filters a thread accumulates (compile-time)
  int rp = 2;          // pixels a thread accumulates (compile-time)
  int fb = 32;         // filters a block holds (a multiple of ft)
  int tile_h = 16;     // outputs a block covers, rows x columns (pooled outputs when the pool is fused)
  int tile_w = 16;
};

// Registry entry "stem": groups == 1, at most 16 input channels, filters up to 11 x 11 (1-D: 128 taps), strides 1 to 4, dilation
// 1; pooling without a residual. Its variants are configurations (StemConfig) of a few instantiations,
// scored for the layer.

}  // namespace cnnrt::kernels
