// Convolution with one input channel (image processing, the first layer of grayscale CNNs), after
// Algorithm 1 of Chen et al., "Optimizing Memory Efficiency for Convolution Kernels on Kepler GPUs", DAC 2017.
//
// A thread block owns a TW x TH tile of output pixels for all F filters (F <= 32). It stages the input
// tile with its halo in shared memory once. Each thread owns 4 adjacent output columns (n = 4: one
// float4 store per row and filter, 16-byte accesses that match the 4-byte banks) over ROWS consecutive
// rows: it keeps the K x (3*S + K) input window in registers and slides it down, reading only the S new
// rows per output row from shared memory as float4s (vertical reuse in registers, horizontal reuse
// through shared memory). Filters and bias are a kernel parameter block passed by value
// (__grid_constant__), i.e. they live in the constant bank and the whole warp reads each weight at once;
// with F <= FMAX known at compile time every weight address is an immediate operand of its FFMA.
//
// Epilogue: bias, optional residual, activation, optional pooling (conv tile -> shared memory -> pooled
// tile), so a fused conv+ReLU+max-pool never writes its full-resolution output.
#pragma once

#include <string>
#include <vector>

#include "kernels/conv_common.cuh"
#include "kernels/conv_registry.hpp"

namespace cnnrt::kernels {

constexpr int kC1MaxFilters = 32;   // F per launch
constexpr int kC1MaxTaps = 121;     // KH * KW (11 x 11)

// Filters by value: [F][KH][KW] then bias [F]. 15.9 KB at most, inside the 32 KB parameter limit.
struct C1Filters {
  float w[kC1MaxFilters * kC1MaxTaps];
  float bias[kC1MaxFilters];
};

// Packs host weights [F][1][KH][KW] and bias [F] (nullptr: zeros) into the parameter block.
void pack_c1_filters(const float* weights, const float* bias, int F, int KH, int KW, C1Filters* out);

// The same filters for the variants that stage them in shared memory ("_smemw"): per filter its K*K weights
// (row-major), then its bias, padded with zeros to c1_packed_filter_floats(K) (a multiple of 4), so a thread
// reads one filter as (K*K + 1) / 4 rounded up float4 broadcasts: 7 for 5x5 (rows padded to 8 floats each
// took 11 loads). Upload to a 16-byte aligned buffer.
// Why both: filters in the parameter block are FFMA operands straight from the constant bank, but every
// launch starts with a cold constant cache, and on the H100 each missed 64-byte line costs a serial trip
// to L2; staged with the input tile, all lines arrive in one latency and are read as
// float4 broadcasts. The planner times both.
std::vector<float> pack_c1_smem_filters(const float* weights, const float* bias, int F, int K);
constexpr int c1_packed_filter_floats(int K) { return (K * K + 1 + 3) / 4 * 4; }

// One instantiation of the tiled kernel or of the streaming kernel (conv2d_c1_stream.cuh): both read the
// parameter block, the "_smemw" variants the shared-memory pack.
using C1LaunchFn = void (*)(const float* x, float* y, const ConvGeometry& g, const Epilogue& e, const C1Filters& f,
                            const float* smem_packed, cudaStream_t stream);

// What the two single-channel families (registry entries "c1" and "c1stream") share: the layers the
// parameter block holds (one input channel, F <= 32, KH, KW <= 11, stride 1 or 2, no dilation, pooling only
// unstrided and without a residual), the packing (layout "c1": the parameter block on the host, and
// pack_c1_smem_filters on the device where K is 1, 3 or 5), and a launch of one instantiation.
std::string c1_reject(const ConvLayer& layer);
PackedWeights pack_c1(const ConvLayer& layer, const float* filters, const float* bias);
ConvLaunch c1_launch(C1LaunchFn fn, const ConvLayer& layer, const LayerWeights& weights);

}  // namespace cnnrt::kernels
