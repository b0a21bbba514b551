// The convolution layers the kernel tests run, as data: one description of a test layer (Layer), how it
// becomes the kernels' layer description, and the list each kernel family's GPU test checks. Host-only (no
// CUDA, no doctest): tests/test_conv_coverage.cpp reads the same lists on a machine without a GPU to prove
// that every variant of the registry is offered by some test layer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.hpp"
#include "ir/window.hpp"
#include "kernels/layer.hpp"

namespace cnnrt::testing {

// One layer of the kernel tests: a convolution and its fused epilogue. K is the kernel height, and its width
// too unless kw is set; `stride` the vertical stride, and the horizontal one too unless stride_w is set; `dil`
// the dilation of both axes; `positive` draws inputs and weights from [0, 1) (same-sign sums: the worst case
// for a rounding bias).
struct Layer {
  int N, C, H, W, F, K, stride, pad_top, pad_left, pad_bottom, pad_right, groups;
  kernels::ParamAct act = kernels::ParamAct::None;
  bool residual = false;
  kernels::FusedPool pool = kernels::FusedPool::None;
  int pool_k = 2, pool_s = 2, pool_pad = 0;  // the pool's window and stride (of both axes unless pool_kw/pool_sw set)
  bool pool_ceil = false;
  int kw = 0;
  bool positive = false;
  int stride_w = 0;
  int dil = 1;
  int pool_kw = 0, pool_sw = 0;              // the pool's window and stride along W, when not pool_k and pool_s
  int KW() const { return kw > 0 ? kw : K; }
  int PKW() const { return pool_kw > 0 ? pool_kw : pool_k; }
  int PSW() const { return pool_sw > 0 ? pool_sw : pool_s; }
  int SW() const { return stride_w > 0 ? stride_w : stride; }
};

// A convolution layer of a test: the CPU reference's Conv attributes and the kernels' geometry, from one
// description (begin pads top/left, end pads bottom/right; stride_w 0: `stride` on both axes).
struct ConvCase {
  ir::Attributes attrs;
  kernels::ConvGeometry g;
};
inline ConvCase make_conv_case(int N, int C, int H, int W, int F, int KH, int KW, int stride, int pad_top, int pad_left,
                               int pad_bottom, int pad_right, int groups, int stride_w = 0, int dil = 1) {
  ConvCase c;
  c.attrs.set("kernel_shape", std::vector<int64_t>{KH, KW});
  c.attrs.set("strides", std::vector<int64_t>{stride, stride_w > 0 ? stride_w : stride});
  c.attrs.set("dilations", std::vector<int64_t>{dil, dil});
  c.attrs.set("pads", std::vector<int64_t>{pad_top, pad_left, pad_bottom, pad_right});
  c.attrs.set("group", int64_t(groups));
  const auto axes = ir::resolve_window(c.attrs, {H, W}, {KH, KW}, false);
  c.g = kernels::conv_geometry(N, C, F, groups, axes[0], axes[1]);
  return c;
}

// The epilogue parameters the tests use: LeakyRelu slope 0.1, Clip to [-0.5, 0.5].
inline void set_test_activation(kernels::Epilogue& e, kernels::ParamAct act) {
  e.param_act = act;
  e.alpha = act == kernels::ParamAct::LeakyRelu ? 0.1f : act == kernels::ParamAct::HardSigmoid ? 0.2f
            : act == kernels::ParamAct::Swish ? 1.5f : -0.5f;
  e.beta = 0.5f;
}

// The pooling of a test layer as the CPU reference's MaxPool/AveragePool attributes.
inline ir::Attributes pool_attributes(const Layer& L) {
  ir::Attributes a;
  a.set("kernel_shape", std::vector<int64_t>{L.pool_k, L.PKW()});
  a.set("strides", std::vector<int64_t>{L.pool_s, L.PSW()});
  a.set("dilations", std::vector<int64_t>{1, 1});
  a.set("pads", std::vector<int64_t>{L.pool_pad, L.pool_pad, L.pool_pad, L.pool_pad});
  a.set("ceil_mode", int64_t(L.pool_ceil));
  a.set("count_include_pad", int64_t(0));
  return a;
}

// The layer as the kernels see it: geometry, activation parameters and pooling (no device pointers).
inline kernels::ConvLayer describe_layer(const Layer& L) {
  kernels::ConvLayer layer;
  layer.g = make_conv_case(L.N, L.C, L.H, L.W, L.F, L.K, L.KW(), L.stride, L.pad_top, L.pad_left, L.pad_bottom,
                           L.pad_right, L.groups, L.stride_w, L.dil).g;
  set_test_activation(layer.e, L.act);
  layer.residual = L.residual;
  if (L.pool != kernels::FusedPool::None) {
    const auto paxes = ir::resolve_window(pool_attributes(L), {layer.g.OH, layer.g.OW}, {}, true);
    kernels::PoolGeometry& p = layer.e.pool;
    p.kind = L.pool;
    p.kh = L.pool_k;
    p.kw = L.PKW();
    p.sh = L.pool_s;
    p.sw = L.PSW();
    p.pad_top = p.pad_left = static_cast<int>(paxes[0].pad_begin);
    p.pad_bottom = static_cast<int>(paxes[0].pad_end);
    p.pad_right = static_cast<int>(paxes[1].pad_end);
    p.PH = static_cast<int>(paxes[0].output);
    p.PW = static_cast<int>(paxes[1].output);
  }
  return layer;
}

// N, C, H, W, F, KH x KW, stride, pads (top, left, bottom, right), activation, residual, same-sign inputs.
inline Layer tc_layer(int N, int C, int H, int W, int F, int KH, int KW, int stride, int pt, int pl, int pb, int pr,
                      kernels::ParamAct act = kernels::ParamAct::None, bool residual = false, bool positive = false) {
  Layer L{N, C, H, W, F, KH, stride, pt, pl, pb, pr, 1, act, residual};
  L.kw = KW;
  L.positive = positive;
  return L;
}

// ---- The layers of each family's GPU test -------------------------------------------------------------

// c1 (one input channel): odd sizes, paddings, strides, activations, residuals, kernels of any size up to
// 11x11 (square or not), fused max and average pooling with overlapping and ceil-mode windows.
inline std::vector<Layer> c1_layers() {
  using kernels::FusedPool;
  using kernels::ParamAct;
  std::vector<Layer> out;
  for (int K : {1, 3, 5, 2, 7}) {
    for (int size : {1, 7, 31, 33}) {
      for (int F : {1, 3, 8, 17, 32}) {  // 17: a partial last filter group (the _fz variants)
        const int pad = K / 2;
        out.push_back({1, 1, size, size + 2, F, K, 1, pad, pad, pad, pad, 1});
        // Asymmetric padding (top/right only), where the padded extent still holds one window.
        if (size + pad >= K) out.push_back({2, 1, size, size, F, K, 2, pad, 0, 0, pad, 1, ParamAct::Relu});
      }
    }
  }
  out.push_back({1, 1, 1000, 33, 8, 5, 1, 2, 2, 2, 2, 1, ParamAct::Relu});
  out.push_back({1, 1, 31, 1000, 32, 3, 1, 1, 1, 1, 1, 1});
  out.push_back({2, 1, 33, 70, 32, 5, 1, 2, 2, 2, 2, 1, ParamAct::Relu});
  out.push_back({1, 1, 67, 31, 17, 3, 1, 1, 0, 1, 0, 1, ParamAct::Relu});
  for (auto act : {ParamAct::LeakyRelu, ParamAct::Clip, ParamAct::Sigmoid, ParamAct::Tanh}) {
    out.push_back({2, 1, 33, 31, 8, 3, 1, 1, 1, 1, 1, 1, act});
  }
  out.push_back({2, 1, 31, 33, 8, 5, 1, 2, 2, 2, 2, 1, ParamAct::Relu, true});
  // A residual with more filters than one group holds (the _fz tiles offset it by their first filter).
  out.push_back({2, 1, 33, 35, 32, 5, 1, 2, 2, 2, 2, 1, ParamAct::Relu, true});
  out.push_back({1, 1, 31, 9, 17, 3, 1, 1, 1, 1, 1, 1, ParamAct::None, true});
  // Kernels of any size up to 11x11 (the "kany" variants), non-square too, pooled and strided.
  out.push_back({2, 1, 33, 35, 8, 7, 1, 3, 3, 3, 3, 1, ParamAct::Relu, false, FusedPool::Max, 2, 2});
  out.push_back({1, 1, 40, 37, 32, 11, 2, 5, 5, 5, 5, 1, ParamAct::Tanh});
  Layer wide{1, 1, 31, 33, 5, 7, 1, 3, 1, 3, 1, 1, ParamAct::LeakyRelu};
  wide.kw = 3;
  out.push_back(wide);
  // Output widths a multiple of 4: the tiles' stores without per-filter checks (rows inside the image and a
  // full group of filters), next to tiles cut by the right and bottom edges and a short last filter group.
  for (int K : {1, 3, 5}) {
    for (int F : {3, 8, 17, 32}) {
      const auto act = F % 2 ? ParamAct::Relu : ParamAct::None;
      out.push_back({2, 1, 37, 68, F, K, 1, K / 2, K / 2, K / 2, K / 2, 1, act});
    }
  }
  // Fused max and average pooling; LeNet conv1: 28x28, 1->8, 5x5 pad 2, 2x2/2 max pool.
  out.push_back({3, 1, 28, 28, 8, 5, 1, 2, 2, 2, 2, 1, ParamAct::Relu, false, FusedPool::Max, 2, 2});
  for (int size : {7, 31, 33}) {
    for (auto pool : {FusedPool::Max, FusedPool::Avg}) {
      out.push_back({2, 1, size, size, 8, 3, 1, 1, 1, 1, 1, 1, ParamAct::Relu, false, pool, 3, 2, 1, true});
      out.push_back({1, 1, size, size + 4, 32, 5, 1, 2, 2, 2, 2, 1, ParamAct::Tanh, false, pool, 3, 3});
      // LeNet's first layer at other sizes, and 6 filters: a partial last group of the _fz tiles.
      out.push_back({1, 1, size, size, 8, 5, 1, 2, 2, 2, 2, 1, ParamAct::Relu, false, pool, 2, 2});
      out.push_back({2, 1, size, size + 1, 6, 5, 1, 2, 2, 2, 2, 1, ParamAct::Relu, false, pool, 2, 2});
      out.push_back({1, 1, size, size, 12, 3, 1, 1, 1, 1, 1, 1, ParamAct::Relu, false, pool, 2, 2});
      out.push_back({1, 1, size, size, 24, 1, 1, 0, 0, 0, 0, 1, ParamAct::Relu, false, pool, 2, 2});
      out.push_back({1, 1, size, size, 8, 1, 1, 0, 0, 0, 0, 1, ParamAct::Relu, false, pool, 2, 2});
      out.push_back({1, 1, size, size, 8, 1, 1, 0, 0, 0, 0, 1, ParamAct::Sigmoid, false, pool, 2, 2});
    }
  }
  // Strided without an activation, up to 8 filters and up to 32.
  for (int K : {1, 3, 5}) {
    for (int F : {8, 32}) out.push_back({1, 1, 33, 35, F, K, 2, K / 2, K / 2, K / 2, K / 2, 1});
  }
  return out;
}

// c1stream (one channel, one filter): widths a multiple of 4, odd heights (chunks of rows that end early),
// strips that end inside the image, the right and bottom padding free (outputs narrower than the input: the
// scalar stores), residual, and batch 2.
inline std::vector<Layer> c1stream_layers() {
  using kernels::ParamAct;
  std::vector<Layer> out;
  for (int K : {1, 3, 5}) {
    const int P = (K - 1) / 2;
    for (int H : {1, 7, 31, 33}) {
      for (int W : {4, 132, 260}) {
        out.push_back({2, 1, H, W, 1, K, 1, P, P, P, P, 1});
        out.push_back({1, 1, H, W, 1, K, 1, 0, P, K - 1, 0, 1, ParamAct::Relu});
      }
    }
    out.push_back({1, 1, 1000, 132, 1, K, 1, P, P, P, P, 1, ParamAct::Relu, true});
    out.push_back({1, 1, 33, 1000, 1, K, 1, P, P, P + 1, P + 3, 1});
  }
  out.push_back({1, 1, 1000, 1000, 1, 5, 1, 2, 2, 2, 2, 1, ParamAct::Relu});
  return out;
}

// gen at one filter size: odd sizes, channels and filters off the tiles, strides, wide layers, splits up to 16,
// 256 channels; for 3x3 and 5x5 fused pooling (LeNet conv2: 8->16, 5x5, 14x14, 3x3/3 max). The pooled split
// variants with 9 channels: slices of 5+4 (split 2), 3+3+3+0 (split 4) and 2+2+2+2+1+0+0+0 (split 8), so some
// ranks reduce nothing; and with 7 (4+3, 2+2+2+1).
inline std::vector<Layer> gen_layers(int K) {
  using kernels::FusedPool;
  using kernels::ParamAct;
  std::vector<Layer> out;
  const int pad = K / 2;
  for (int size : {1, 7, 14, 33}) {
    out.push_back({1, 7, size, size, 9, K, 1, pad, pad, pad, pad, 1});
    out.push_back({2, 32, size, size + 3, 64, K, 1, pad, pad, pad, pad, 1, ParamAct::Relu});
    out.push_back({1, 33, size, size, 31, K, 2, pad, pad, pad, pad, 1, ParamAct::Relu});
    out.push_back({2, 16, size, size, 40, K, 2, pad, pad, pad, pad, 1, ParamAct::Sigmoid});
  }
  out.push_back({2, 64, 31, 31, 128, K, 1, pad, pad, pad, pad, 1, ParamAct::Clip, true});
  // 70 channels over a split of 16: 8 channels a rank, so ranks 9 to 15 reduce nothing.
  out.push_back({1, 70, 9, 9, 64, K, 1, pad, pad, pad, pad, 1, ParamAct::Relu});
  out.push_back({1, 256, 14, 14, 256, K, 1, pad, pad, pad, pad, 1});
  out.push_back({1, 128, 7, 7, 64, K, 1, pad, pad, pad, pad, 1, ParamAct::Relu});
  if (K > 1) {
    for (int N : {4, 1, 64}) {
      out.push_back({N, 8, 14, 14, 16, K, 1, pad, pad, pad, pad, 1, ParamAct::Relu, false, FusedPool::Max, 3, 3});
    }
    out.push_back({2, 16, 15, 15, 24, K, 1, pad, pad, pad, pad, 1, ParamAct::Relu, false, FusedPool::Avg, 3, 2, 1, true});
    out.push_back({2, 16, 15, 15, 24, K, 1, pad, pad, pad, pad, 1, ParamAct::Tanh, false, FusedPool::Max, 2, 2});
    out.push_back({1, 9, 13, 13, 16, K, 1, pad, pad, pad, pad, 1, ParamAct::Relu, false, FusedPool::Max, 2, 2});
    out.push_back({1, 7, 13, 13, 16, K, 1, pad, pad, pad, pad, 1, ParamAct::Relu, false, FusedPool::Max, 2, 2});
    // VGG's 16 -> 16 layer on 64x64 with its 2x2 max pool (whole 16- and 32-wide tiles), and without it on 32x32.
    out.push_back({2, 16, 64, 64, 16, K, 1, pad, pad, pad, pad, 1, ParamAct::Relu, false, FusedPool::Max, 2, 2});
    out.push_back({3, 16, 32, 32, 32, K, 1, pad, pad, pad, pad, 1, ParamAct::Relu});
    out.push_back({1, 9, 13, 13, 16, K, 1, pad, pad, pad, pad, 1, ParamAct::LeakyRelu, false, FusedPool::Max, 2, 2});
  }
  return out;
}

// small (small maps): LeNet's layers at batches 1, 7 and 33, odd sizes and channel counts that leave slices
// uneven, asymmetric padding, overlapping and ceil-mode pools, every activation and the residual add.
inline std::vector<Layer> small_layers() {
  using kernels::FusedPool;
  using kernels::ParamAct;
  std::vector<Layer> out;
  for (int N : {1, 7, 33}) {
    out.push_back({N, 1, 28, 28, 8, 5, 1, 2, 2, 2, 2, 1, ParamAct::Relu, false, FusedPool::Max, 2, 2});
    out.push_back({N, 8, 14, 14, 16, 5, 1, 2, 2, 2, 2, 1, ParamAct::Relu, false, FusedPool::Max, 3, 3});
  }
  for (int size : {1, 7, 31, 33}) {
    out.push_back({2, 7, size, size, 9, 3, 1, 1, 1, 1, 1, 1, ParamAct::LeakyRelu});
    out.push_back({1, 13, size, size + 2, 6, 5, 1, 2, 0, 2, 2, 1, ParamAct::None, true});
    if (size >= 7) {
      out.push_back({2, 5, size, size, 10, 3, 1, 1, 1, 1, 1, 1, ParamAct::Relu, false, FusedPool::Max, 3, 2, 1, true});
      out.push_back({1, 9, size, size + 1, 4, 5, 1, 2, 2, 2, 2, 1, ParamAct::Sigmoid, false, FusedPool::Avg, 2, 2});
    }
  }
  out.push_back({1, 3, 64, 64, 5, 3, 1, 1, 1, 1, 1, 1, ParamAct::Clip});
  out.push_back({1, 2, 900, 17, 3, 3, 1, 1, 1, 1, 1, 1, ParamAct::Tanh});  // 30600 floats: still a small map
  // Wide enough for every filter grouping and channel slicing, each activation kind, pooled and not.
  for (int K : {3, 5}) {
    const int pad = K / 2;
    for (auto act : {ParamAct::Relu, ParamAct::Tanh}) {
      out.push_back({1, 32, 12, 12, 64, K, 1, pad, pad, pad, pad, 1, act});
      out.push_back({1, 32, 12, 12, 64, K, 1, pad, pad, pad, pad, 1, act, false, FusedPool::Max, 2, 2});
      out.push_back({2, 16, 8, 8, 16, K, 1, pad, pad, pad, pad, 1, act});
      out.push_back({2, 16, 8, 8, 16, K, 1, pad, pad, pad, pad, 1, act, false, FusedPool::Avg, 2, 2});
    }
  }
  return out;
}

// dw (depthwise): multipliers 1 and 2, strides 1 and 2, odd sizes, wide maps, each activation kind.
inline std::vector<Layer> dw_layers() {
  using kernels::ParamAct;
  std::vector<Layer> out;
  for (int K : {3, 5}) {
    const int P = K / 2;
    for (int size : {1, 7, 31, 33}) {
      out.push_back({2, 16, size, size, 16, K, 1, P, P, P, P, 16});
      out.push_back({1, 8, size, size + 1, 16, K, 2, P, P, P, P, 8, ParamAct::Relu});
      out.push_back({1, 8, size, size, 8, K, 1, P, P, P, P, 8, ParamAct::Relu, true});
      out.push_back({1, 8, size, 2 * size + 40, 8, K, 2, P, P, P, P, 8, ParamAct::Clip});
    }
    for (auto act : {ParamAct::None, ParamAct::Relu, ParamAct::Tanh}) {
      out.push_back({1, 32, 70, 90, 32, K, 1, P, P, P, P, 32, act});
      out.push_back({1, 32, 70, 90, 32, K, 2, P, P, P, P, 32, act});
    }
    // Whole planes (maps up to 4x4, 8x8 and 16x16): channels off the block's channel count, two filters a channel,
    // run-time activations, residuals.
    for (int S : {1, 2}) {
      out.push_back({3, 20, 13, 15, 40, K, S, P, P, P, P, 20, ParamAct::LeakyRelu});
      out.push_back({2, 24, 5, 7, 24, K, S, P, P, P, P, 24, ParamAct::Sigmoid, true});
      out.push_back({2, 17, 9, 11, 17, K, S, P, P, P, P, 17});
      out.push_back({1, 40, 4 * S, 3 * S, 40, K, S, P, P, P, P, 40, ParamAct::Tanh});  // 4x3 (the 4x4 planes)
      out.push_back({2, 33, 4 * S, 4 * S, 33, K, S, P, P, P, P, 33});
      // Planes of several images a block: channels fewer than a block's planes, a map of one pixel, two filters a
      // channel with a residual.
      out.push_back({33, 7, 4 * S, 4 * S, 14, K, S, P, P, P, P, 7, ParamAct::Relu, true});
      out.push_back({31, 3, 1, 1, 3, K, S, P, P, P, P, 3});
      out.push_back({5, 1000, 4, 4, 1000, K, S, P, P, P, P, 1000, ParamAct::Clip});
    }
  }
  return out;
}

// tc (mma.sync 3xTF32): odd sizes, channels and filters off the tiles, 1x1 to 7x7 and non-square kernels,
// strides 1 and 2, asymmetric paddings, residuals, every activation, long same-sign reductions (C*KH*KW up to
// 4608).
inline std::vector<Layer> tc_layers() {
  using kernels::ParamAct;
  std::vector<Layer> out;
  for (int K : {1, 3, 5}) {
    const int pad = K / 2;
    for (int size : {1, 7, 31, 33}) {
      out.push_back(tc_layer(1, 7, size, size, 9, K, K, 1, pad, pad, pad, pad));
      out.push_back(tc_layer(2, 32, size, size + 3, 64, K, K, 1, pad, pad, pad, pad, ParamAct::Relu, true));
      // Asymmetric: no left pad, a double right pad (keeps a 1x1 input's output non-empty).
      out.push_back(tc_layer(3, 33, size, size, 31, K, K, 2, pad, 0, pad, 2 * pad, ParamAct::LeakyRelu));
    }
  }
  out.push_back(tc_layer(1, 1, 31, 1000, 31, 5, 5, 1, 2, 2, 2, 2, ParamAct::Relu, true));
  out.push_back(tc_layer(1, 3, 33, 33, 1, 3, 3, 1, 1, 1, 1, 1));
  out.push_back(tc_layer(2, 3, 33, 31, 64, 7, 7, 2, 3, 3, 3, 3, ParamAct::Relu));
  out.push_back(tc_layer(1, 64, 31, 31, 128, 3, 1, 2, 1, 0, 1, 0, ParamAct::Relu));
  out.push_back(tc_layer(3, 7, 9, 9, 9, 2, 3, 1, 0, 1, 1, 1, ParamAct::None, true));
  out.push_back(tc_layer(1, 64, 7, 7, 1000, 1, 1, 1, 0, 0, 0, 0, ParamAct::Clip));
  out.push_back(tc_layer(2, 256, 14, 14, 128, 3, 3, 1, 1, 1, 1, 1, ParamAct::Relu, true));
  out.push_back(tc_layer(1, 32, 15, 17, 33, 3, 3, 2, 1, 1, 1, 1, ParamAct::Sigmoid));
  out.push_back(tc_layer(2, 16, 16, 16, 24, 5, 5, 1, 2, 2, 2, 2, ParamAct::Tanh, true));
  out.push_back(tc_layer(1, 512, 7, 7, 64, 3, 3, 1, 1, 1, 1, 1));
  out.push_back(tc_layer(1, 512, 7, 7, 64, 3, 3, 1, 1, 1, 1, 1, ParamAct::None, false, true));
  out.push_back(tc_layer(2, 256, 9, 9, 40, 3, 3, 1, 1, 1, 1, 1, ParamAct::Relu, true, true));
  // Any stride (unequal too), dilation, groups (a tile stops at its group's last filter), 1-D (H = K = 1).
  out.push_back(tc_layer(2, 1, 49, 10, 28, 10, 4, 2, 4, 1, 5, 2, ParamAct::Relu));       // keyword spotting
  out.back().stride_w = 1;
  out.push_back(tc_layer(3, 28, 20, 7, 30, 10, 4, 2, 4, 1, 5, 2, ParamAct::Relu, true));
  out.back().stride_w = 1;
  out.push_back(tc_layer(2, 3, 67, 67, 16, 11, 11, 4, 2, 2, 2, 2, ParamAct::Relu));     // an 11x11 stride-4 stem
  out.push_back(tc_layer(1, 5, 33, 31, 7, 3, 3, 3, 1, 1, 1, 1, ParamAct::None, false));
  out.push_back(tc_layer(2, 9, 1, 128, 32, 1, 7, 1, 0, 3, 0, 3, ParamAct::Relu));        // Conv1d
  out.push_back(tc_layer(1, 4, 1, 1000, 16, 1, 80, 4, 0, 0, 0, 0, ParamAct::Relu));      // raw audio, 80 taps
  out.push_back(tc_layer(2, 16, 31, 33, 24, 3, 3, 1, 2, 2, 2, 2, ParamAct::Clip));       // dilation 2
  out.back().dil = 2;
  out.push_back(tc_layer(1, 8, 17, 17, 8, 5, 3, 2, 4, 2, 4, 2, ParamAct::None, true));   // dilation 2, stride 2
  out.back().dil = 2;
  for (int groups : {2, 3, 8}) {
    out.push_back(tc_layer(2, 24 * groups / 2, 7, 9, 30 * groups, 1, 1, 1, 0, 0, 0, 0, ParamAct::Relu));
    out.back().groups = groups;
    out.push_back(tc_layer(1, 4 * groups, 33, 31, 70 * groups, 3, 3, 2, 1, 1, 1, 1, ParamAct::None, true));
    out.back().groups = groups;
  }
  out.push_back(tc_layer(2, 30, 28, 28, 30, 3, 3, 2, 1, 1, 1, 1, ParamAct::Sigmoid));  // depthwise (groups = C)
  out.back().groups = 30;
  out.push_back(tc_layer(1, 96, 14, 14, 240, 1, 1, 1, 0, 0, 0, 0, ParamAct::Relu, true, true));
  out.back().groups = 3;
  // The activations exporters write as several nodes (fuse_composite_activation), and HardSigmoid.
  out.push_back(tc_layer(2, 16, 15, 15, 24, 3, 3, 1, 1, 1, 1, 1, ParamAct::Swish, true));
  out.push_back(tc_layer(1, 24, 8, 8, 40, 1, 1, 1, 0, 0, 0, 0, ParamAct::HardSwish));
  out.push_back(tc_layer(1, 8, 17, 17, 16, 3, 3, 2, 1, 1, 1, 1, ParamAct::HardSigmoid));
  out.push_back(tc_layer(2, 32, 7, 7, 48, 3, 3, 1, 1, 1, 1, 1, ParamAct::Gelu, true));
  return out;
}

// dot (a warp's lanes split each output's taps; at least 16 taps, at most 2^19 outputs): odd sizes, paddings,
// strides, dilation, groups, 1-D, reductions of a partial last lane trip up to 4608 taps, filter and pixel
// counts that leave the last warp's tile partial, residuals, every kind of activation.
inline std::vector<Layer> dot_layers() {
  using kernels::ParamAct;
  std::vector<Layer> out;
  for (int K : {1, 3, 5}) {
    const int pad = K / 2;
    for (int size : {1, 7, 31, 33}) {
      out.push_back(tc_layer(1, 33, size, size, 9, K, K, 1, pad, pad, pad, pad));
      out.push_back(tc_layer(2, 32, size, size + 3, 17, K, K, 1, pad, pad, pad, pad, ParamAct::Relu, true));
      out.push_back(tc_layer(3, 20, size, size, 31, K, K, 2, pad, 0, pad, 2 * pad, ParamAct::LeakyRelu));
    }
  }
  out.push_back(tc_layer(1, 144, 6, 6, 24, 1, 1, 1, 0, 0, 0, 0, ParamAct::Relu, true));  // MobileNet v2's late 1x1
  out.push_back(tc_layer(1, 1000, 1, 1, 10, 1, 1, 1, 0, 0, 0, 0, ParamAct::Relu));       // a 1x1 map
  out.push_back(tc_layer(1, 512, 7, 7, 64, 3, 3, 1, 1, 1, 1, 1));                        // 4608 taps
  out.push_back(tc_layer(1, 16, 1, 1000, 8, 1, 7, 1, 0, 3, 0, 3, ParamAct::Relu));       // Conv1d, 1000 wide
  out.push_back(tc_layer(1, 1, 1, 1000, 16, 1, 80, 4, 0, 0, 0, 0, ParamAct::Relu));      // raw audio, 80 taps
  out.push_back(tc_layer(2, 16, 31, 33, 24, 3, 3, 1, 2, 2, 2, 2, ParamAct::Clip));       // dilation 2
  out.back().dil = 2;
  out.push_back(tc_layer(2, 3, 33, 31, 16, 7, 7, 2, 3, 3, 3, 3, ParamAct::Relu));        // an RGB stem
  for (int groups : {2, 3, 8}) {
    out.push_back(tc_layer(1, 16 * groups, 9, 7, 10 * groups, 3, 3, 2, 1, 1, 1, 1, ParamAct::None, true));
    out.back().groups = groups;
  }
  for (auto act : {ParamAct::Sigmoid, ParamAct::Tanh, ParamAct::HardSwish, ParamAct::Swish, ParamAct::Gelu}) {
    out.push_back(tc_layer(1, 24, 7, 9, 13, 3, 3, 1, 1, 1, 1, 1, act));
  }
  // A fused pool: max and average, 2x2/2, overlapping 3x3/2 with padding and ceil mode, 1-D (a 1x2/1x2 pool after a
  // 7-tap Conv1d, as in a time-series net), odd maps, grouped and strided convolutions, activations.
  using kernels::FusedPool;
  for (FusedPool kind : {FusedPool::Max, FusedPool::Avg}) {
    for (int size : {2, 7, 31}) {
      Layer a = tc_layer(2, 20, size, size + 1, 9, 3, 3, 1, 1, 1, 1, 1, ParamAct::Relu);
      a.pool = kind;
      out.push_back(a);
      Layer b = tc_layer(1, 33, size + 2, size + 2, 17, 1, 1, 1, 0, 0, 0, 0, ParamAct::Sigmoid);
      b.pool = kind;
      b.pool_k = 3;
      b.pool_pad = 1;
      b.pool_ceil = true;
      out.push_back(b);
    }
    Layer c = tc_layer(3, 9, 1, 128, 32, 1, 7, 1, 0, 3, 0, 3, ParamAct::Relu);
    c.pool = kind;
    c.pool_k = 1;
    c.pool_kw = 2;
    out.push_back(c);
    Layer d = tc_layer(1, 24, 15, 13, 30, 3, 3, 2, 1, 1, 1, 1, ParamAct::LeakyRelu);
    d.groups = 3;
    d.pool = kind;
    d.pool_k = 3;
    d.pool_s = 2;
    out.push_back(d);
  }
  return out;
}

// wgr and wgh (wgmma 3xTF32; C a multiple of 16 for wgr, 32 for wgh): the same kinds of layers; wgh takes the
// stride-1 ones of 32-channel groups with 4 filter taps or more (`halo`).
inline std::vector<Layer> wg_layers(bool halo) {
  using kernels::ParamAct;
  std::vector<Layer> all;
  for (int K : {1, 3, 5}) {
    const int pad = K / 2;
    for (int size : {1, 7, 31, 33}) {
      all.push_back(tc_layer(1, 32, size, size, 9, K, K, 1, pad, pad, pad, pad));
      all.push_back(tc_layer(2, 64, size, size + 3, 64, K, K, 1, pad, pad, pad, pad, ParamAct::Relu, true));
      all.push_back(tc_layer(3, 32, size, size, 130, K, K, 2, pad, 0, pad, 2 * pad, ParamAct::LeakyRelu));
      all.push_back(tc_layer(1, 64, size, size + 1, 130, K, K, 1, pad, 0, pad, 2 * pad, ParamAct::Relu));
    }
  }
  all.push_back(tc_layer(1, 32, 31, 1000, 33, 5, 5, 1, 2, 2, 2, 2, ParamAct::Relu, true));
  // At most 32 filters with ReLU (wgh's 64 x 32 tiles), over one and two channel groups.
  all.push_back(tc_layer(2, 64, 33, 35, 32, 3, 3, 1, 1, 1, 1, 1, ParamAct::Relu, true));
  all.push_back(tc_layer(1, 32, 7, 31, 17, 5, 5, 1, 2, 0, 2, 1, ParamAct::Relu));
  all.push_back(tc_layer(1, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1, 1, ParamAct::Relu));
  all.push_back(tc_layer(2, 128, 28, 28, 128, 5, 5, 1, 2, 2, 2, 2, ParamAct::Relu));
  all.push_back(tc_layer(1, 32, 33, 31, 200, 2, 3, 1, 0, 1, 1, 1, ParamAct::Clip, true));
  all.push_back(tc_layer(3, 96, 7, 7, 1, 7, 7, 1, 3, 3, 3, 3, ParamAct::Tanh));
  all.push_back(tc_layer(1, 256, 14, 14, 256, 3, 3, 1, 1, 1, 1, 1, ParamAct::Relu));
  all.push_back(tc_layer(32, 64, 28, 28, 128, 3, 3, 1, 1, 1, 1, 1, ParamAct::Relu));
  all.push_back(tc_layer(1, 512, 7, 7, 64, 3, 3, 1, 1, 1, 1, 1, ParamAct::None, false, true));
  all.push_back(tc_layer(2, 256, 14, 14, 256, 5, 5, 1, 2, 2, 2, 2, ParamAct::Relu, true, true));
  all.push_back(tc_layer(1, 256, 14, 14, 256, 3, 3, 1, 1, 1, 1, 1, ParamAct::Sigmoid));
  // 16 and 48 channels (wgr: a stage's two halves in two taps; 3x3 x 16 ends half a stage past K), SqueezeNet's
  // expand layers among them; odd maps, both strides, splits of the reduction.
  for (int size : {1, 7, 31, 33}) {
    all.push_back(tc_layer(2, 16, size, size + 2, 64, 3, 3, 1, 1, 1, 1, 1, ParamAct::Relu));
    all.push_back(tc_layer(1, 48, size, size, 130, 3, 3, 2, 1, 0, 1, 2, ParamAct::LeakyRelu, true));
    all.push_back(tc_layer(3, 16, size, size, 9, 1, 1, 1, 0, 0, 0, 0));
    all.push_back(tc_layer(1, 80, size, size + 1, 33, 5, 5, 1, 2, 2, 2, 2, ParamAct::Relu));
  }
  all.push_back(tc_layer(2, 16, 55, 55, 64, 3, 3, 1, 1, 1, 1, 1, ParamAct::Relu));
  all.push_back(tc_layer(2, 48, 13, 13, 192, 3, 3, 1, 1, 1, 1, 1, ParamAct::Relu));
  all.push_back(tc_layer(1, 112, 9, 9, 256, 3, 3, 1, 1, 1, 1, 1, ParamAct::None, false, true));
  if (!halo) return all;
  std::vector<Layer> out;
  for (const Layer& L : all) {
    if (L.C % 32 == 0 && L.stride == 1 && L.K * L.KW() >= 4) out.push_back(L);
  }
  return out;
}

// stem (at most 16 input channels, filters to 11x11 or 128 taps in 1-D, strides to 4): RGB and single-channel
// stems at odd sizes (1, 7, 31, 33, 1000) and paddings, strides 1 to 4 (unequal too), 7x7 and 11x11 filters,
// non-square filters, fused max and average pooling (overlapping, ceil mode, padded windows), residuals, every
// kind of activation, filter counts that leave a block's last filters partial, 1-D layers up to 80 taps.
inline std::vector<Layer> stem_layers() {
  using kernels::FusedPool;
  using kernels::ParamAct;
  std::vector<Layer> out;
  for (int size : {1, 7, 31, 33}) {
    out.push_back(tc_layer(1, 3, size, size, 64, 3, 3, 2, 1, 1, 1, 1, ParamAct::Relu));
    out.push_back(tc_layer(2, 3, size, size + 2, 33, 3, 3, 1, 1, 1, 1, 1, ParamAct::LeakyRelu, true));
    out.push_back(tc_layer(1, 1, size, size, 17, 5, 5, 1, 2, 2, 2, 2, ParamAct::None));
  }
  out.push_back(tc_layer(2, 3, 33, 31, 64, 7, 7, 2, 3, 3, 3, 3, ParamAct::Relu));        // a 7x7 stride-2 stem
  out.push_back(tc_layer(1, 3, 31, 70, 65, 7, 7, 2, 3, 3, 3, 3, ParamAct::LeakyRelu, true));  // two tiles wide
  out.push_back(tc_layer(1, 3, 33, 35, 65, 3, 3, 2, 1, 1, 1, 1, ParamAct::HardSwish));
  out.push_back(tc_layer(2, 3, 67, 67, 48, 11, 11, 4, 2, 2, 2, 2, ParamAct::Relu));      // 11x11 stride 4
  out.push_back(tc_layer(1, 1, 31, 1000, 40, 7, 7, 1, 3, 3, 3, 3, ParamAct::Tanh));     // one channel, 7x7
  out.push_back(tc_layer(1, 4, 33, 33, 24, 5, 3, 3, 2, 1, 0, 1, ParamAct::Sigmoid, true));  // 5x3, stride 3
  out.push_back(tc_layer(2, 16, 15, 17, 20, 3, 3, 2, 1, 1, 1, 1, ParamAct::Swish));
  out.push_back(tc_layer(2, 1, 49, 10, 28, 10, 4, 2, 4, 1, 5, 2, ParamAct::Relu));       // keyword spotting
  out.back().stride_w = 1;
  out.push_back(tc_layer(1, 3, 32, 32, 16, 3, 3, 1, 1, 1, 1, 1, ParamAct::HardSwish, true, true));
  out.push_back(tc_layer(1, 2, 9, 9, 8, 4, 4, 4, 0, 0, 0, 0, ParamAct::Gelu));
  // Fused pooling: SqueezeNet's 3x3 stride-2 stem + 3x3/2 max pool, ResNet's 7x7/2 + 3x3/2 padded max pool, an
  // average pool in ceil mode, and a one-channel 5x5 layer with 2x2 pooling.
  for (int size : {7, 31, 63}) {
    Layer L = tc_layer(2, 3, size, size + 1, 64, 3, 3, 2, 0, 0, 0, 0, ParamAct::Relu);
    L.pool = FusedPool::Max;
    L.pool_k = 3;
    L.pool_s = 2;
    out.push_back(L);
    L.act = ParamAct::Clip;
    L.F = 40;
    out.push_back(L);
  }
  {
    Layer L = tc_layer(1, 3, 61, 59, 64, 7, 7, 2, 3, 3, 3, 3, ParamAct::Relu);
    L.pool = FusedPool::Max;
    L.pool_k = 3;
    L.pool_s = 2;
    L.pool_pad = 1;
    out.push_back(L);
    L = tc_layer(2, 3, 33, 33, 33, 3, 3, 1, 1, 1, 1, 1, ParamAct::LeakyRelu);
    L.pool = FusedPool::Avg;
    L.pool_k = 3;
    L.pool_s = 2;
    L.pool_ceil = true;
    out.push_back(L);
    L = tc_layer(1, 1, 32, 32, 20, 5, 5, 1, 0, 0, 0, 0, ParamAct::Relu);
    L.pool = FusedPool::Max;
    out.push_back(L);
    L = tc_layer(2, 3, 45, 70, 33, 7, 7, 2, 3, 3, 3, 3, ParamAct::HardSwish);  // 7x7/2 + 3x3/2 pool, two tiles wide
    L.pool = FusedPool::Max;
    L.pool_k = 3;
    L.pool_s = 2;
    L.pool_pad = 1;
    out.push_back(L);
    L = tc_layer(1, 3, 1, 1, 8, 3, 3, 2, 1, 1, 1, 1, ParamAct::Relu);  // a 1x1 image, pooled 1x1 with padding
    L.pool = FusedPool::Max;
    L.pool_k = 3;
    L.pool_s = 2;
    L.pool_pad = 1;
    out.push_back(L);
  }
  // 1-D: a time-series stem (9 channels, 7 taps) and raw audio (80 taps, stride 4), 1000 samples.
  out.push_back(tc_layer(2, 9, 1, 128, 32, 1, 7, 1, 0, 3, 0, 3, ParamAct::Relu));
  out.push_back(tc_layer(1, 1, 1, 1000, 40, 1, 80, 4, 0, 0, 0, 0, ParamAct::Relu));
  out.push_back(tc_layer(3, 9, 1, 33, 64, 1, 5, 2, 0, 2, 0, 2, ParamAct::Clip, true));
  // 1-D pools: overlapping 1x3 max windows of stride 2, and 1x2 average windows in ceil mode (the last one partial).
  {
    Layer L = tc_layer(2, 9, 1, 128, 48, 1, 5, 1, 0, 2, 0, 2, ParamAct::Relu);
    L.pool = FusedPool::Max;
    L.pool_k = L.pool_s = 1;
    L.pool_kw = 3;
    L.pool_sw = 2;
    out.push_back(L);
    L = tc_layer(1, 9, 1, 33, 20, 1, 5, 1, 0, 2, 0, 2, ParamAct::Tanh);
    L.pool = FusedPool::Avg;
    L.pool_k = L.pool_s = 1;
    L.pool_kw = L.pool_sw = 2;
    L.pool_ceil = true;
    out.push_back(L);
  }
  return out;
}

// The list of a family's GPU test ("" for a family no list covers).
// pw (1x1 at stride 1): odd channel and filter counts (1, 7, 31, 33, up to the family's 256), planes of 4 to 4000
// pixels in whole quads (1x4, 33x4, 31x4, 1x1000) and of 1, 9, 49, 1023 pixels (a quad across images, a batch's last
// quad partial), batches 1 to 5, filters over several blocks, groups of 10 and 20 filters (ShuffleNet), residuals,
// every activation.
inline std::vector<Layer> pw_layers() {
  using kernels::ParamAct;
  std::vector<Layer> out;
  out.push_back(tc_layer(1, 1, 1, 4, 1, 1, 1, 1, 0, 0, 0, 0));
  out.push_back(tc_layer(3, 7, 33, 4, 9, 1, 1, 1, 0, 0, 0, 0, ParamAct::Relu));
  out.push_back(tc_layer(2, 31, 31, 4, 33, 1, 1, 1, 0, 0, 0, 0, ParamAct::Relu, true));
  out.push_back(tc_layer(1, 33, 1, 1000, 7, 1, 1, 1, 0, 0, 0, 0, ParamAct::LeakyRelu));
  out.push_back(tc_layer(5, 16, 4, 4, 8, 1, 1, 1, 0, 0, 0, 0, ParamAct::Clip));
  out.push_back(tc_layer(2, 256, 8, 8, 100, 1, 1, 1, 0, 0, 0, 0, ParamAct::Relu));
  out.push_back(tc_layer(1, 40, 16, 16, 16, 1, 1, 1, 0, 0, 0, 0, ParamAct::None, true));
  out.push_back(tc_layer(3, 112, 3, 3, 130, 1, 1, 1, 0, 0, 0, 0, ParamAct::Clip));  // MobileNet v2's last, 3x3 maps
  out.push_back(tc_layer(5, 33, 7, 7, 24, 1, 1, 1, 0, 0, 0, 0, ParamAct::Relu, true));
  out.push_back(tc_layer(7, 9, 1, 1, 17, 1, 1, 1, 0, 0, 0, 0, ParamAct::Relu));
  out.push_back(tc_layer(1, 31, 31, 33, 7, 1, 1, 1, 0, 0, 0, 0, ParamAct::None, true));
  for (auto act : {ParamAct::Sigmoid, ParamAct::Tanh, ParamAct::HardSigmoid, ParamAct::HardSwish, ParamAct::Swish,
                   ParamAct::Gelu}) {
    out.push_back(tc_layer(2, 24, 6, 6, 37, 1, 1, 1, 0, 0, 0, 0, act));
  }
  for (int groups : {2, 3, 8}) {
    out.push_back(tc_layer(2, 40 * groups, 7, 4, 10 * groups, 1, 1, 1, 0, 0, 0, 0, ParamAct::Relu));
    out.back().groups = groups;
    out.push_back(tc_layer(1, 40 * groups, 14, 14, 20 * groups, 1, 1, 1, 0, 0, 0, 0, ParamAct::None, true));
    out.back().groups = groups;
    out.push_back(tc_layer(3, 16 * groups, 5, 5, 12 * groups, 1, 1, 1, 0, 0, 0, 0, ParamAct::Relu, true));
    out.back().groups = groups;
  }
  return out;
}

// gap: a 1x1 layer of N images [C, H, W] to F filters, then a global pool of `pool` kind.
inline Layer gap_layer(int N, int C, int H, int W, int F, kernels::ParamAct act, kernels::FusedPool pool) {
  Layer L = tc_layer(N, C, H, W, F, 1, 1, 1, 0, 0, 0, 0, act);
  L.pool = pool;
  L.pool_k = H;
  L.pool_kw = W;
  L.pool_s = 1;
  return L;
}

// SqueezeNet's classifier (512 -> 100 over 13x13, ReLU, average), MobileNet v2's last layer at 96x96 input (320 ->
// 1280 over 3x3, ReLU6 as Clip), MobileNet v3's (96 -> 576 over 3x3, HardSwish); odd sizes: one channel and filter
// of one pixel, 7x7, 31x33, 1-D, 1000 channels and filters; max pools; no activation; 16 images.
inline std::vector<Layer> gap_layers() {
  using kernels::FusedPool;
  using kernels::ParamAct;
  return {
      gap_layer(1, 512, 13, 13, 100, ParamAct::Relu, FusedPool::Avg),
      gap_layer(1, 320, 3, 3, 1280, ParamAct::Clip, FusedPool::Avg),
      gap_layer(2, 96, 3, 3, 576, ParamAct::HardSwish, FusedPool::Avg),
      gap_layer(1, 1, 1, 1, 1, ParamAct::None, FusedPool::Avg),
      gap_layer(3, 7, 7, 7, 13, ParamAct::Sigmoid, FusedPool::Max),
      gap_layer(2, 33, 31, 33, 7, ParamAct::LeakyRelu, FusedPool::Avg),
      gap_layer(5, 64, 1, 31, 33, ParamAct::Relu, FusedPool::Max),
      gap_layer(1, 1000, 7, 1, 1000, ParamAct::None, FusedPool::Avg),
      gap_layer(16, 256, 13, 13, 10, ParamAct::Tanh, FusedPool::Max),
  };
}

inline std::vector<Layer> family_layers(const std::string& family) {
  if (family == "c1") return c1_layers();
  if (family == "c1stream") return c1stream_layers();
  if (family == "small") return small_layers();
  if (family == "stem") return stem_layers();
  if (family == "dw") return dw_layers();
  if (family == "tc") return tc_layers();
  if (family == "igemm") return tc_layers();  // the same geometries: any stride, dilation, groups, 1-D
  if (family == "dot") return dot_layers();
  if (family == "gap") return gap_layers();
  if (family == "pw") return pw_layers();
  if (family == "wgr") return wg_layers(false);
  if (family == "wgh") return wg_layers(true);
  if (family == "gen") {
    std::vector<Layer> out;
    for (int K : {1, 3, 5}) {
      for (const Layer& L : gen_layers(K)) out.push_back(L);
    }
    return out;
  }
  return {};
}

}  // namespace cnnrt::testing
