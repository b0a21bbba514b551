// Finds LeNet-class chains that the GPU planner may run as one kernel (kernels/conv_chain.cuh):
//   Conv|FusedConv (one input channel) -> Conv|FusedConv -> views (Flatten, Reshape, ...) -> Gemm|FusedGemm
//   [-> Gemm|FusedGemm, up to kMaxChainTail of them]
// where each intermediate feeds only the next node and is not a graph output; classifiers' dense heads and
// squeeze-and-excitation gates (below). IR only: fuse_pool asks whether a pool starts a dense head (and then leaves
// it out of the convolution); the GPU planner asks all three, then checks its kernels' own limits and measures them
// against the steps they replace.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/graph.hpp"

namespace cnnrt::passes {

struct ConvChainMatch {
  int conv_a = -1;          // node indices into Graph::nodes
  int conv_b = -1;
  std::vector<int> views;   // between conv_b and dense, in order
  int dense = -1;
  std::vector<int> tail;    // the dense layers after `dense`, in order (each reads the one before)
};

// The most dense layers after the first that a chain takes (the chain kernel's kChainTailMax).
constexpr int kMaxChainTail = 2;

// A classifier's dense head for the one-launch dense chain kernel (kernels/dense_chain.cuh): Gemm|FusedGemm
// over a [batch, K] activation, then one or two more, each the sole reader of the one before (whose output
// is not a graph output), with constant weights and per-output biases; or a GlobalAveragePool, views
// (Flatten, ...), and one to three such Gemms; or before that pool, a 1x1 convolution that only it reads.
struct DenseChainMatch {
  int conv = -1;            // a 1x1 convolution in front of the pool (nothing but its activation fused), or -1
  int pool = -1;            // the GlobalAveragePool in front, or -1
  std::vector<int> views;   // between it and the first Gemm
  std::vector<int> layers;  // the Gemms' node indices, first to last
};
constexpr int kMaxDenseChain = 3;  // the kernel's kDenseChainMax

// A squeeze-and-excitation gate for the one-launch kernel (kernels/squeeze_excite.cuh): GlobalAveragePool over
// x [batch, C, spatial...], a 1x1 Conv|FusedConv to [batch, hidden, 1...], a 1x1 Conv|FusedConv back to
// [batch, C, 1...] (constant weights and biases, one group, any fused activation, no residual or pool), and
// Mul(x, gate) (either order) of x's shape; each intermediate read only by the next node and not a graph output.
struct SqueezeExciteMatch {
  int pool = -1, fc1 = -1, fc2 = -1, mul = -1;  // node indices
  int x = -1;                                   // the gated value
};

// A depthwise convolution and the pointwise convolution after it, for the pair kernel (kernels/dw_pw.cuh):
// Conv|FusedConv over [N, C, H, W] with constant weights [C, 1, KH, KW] and group C (no residual or pool), whose
// output is read only by a 1x1 Conv|FusedConv with constant weights [F, C / G, 1, 1] of G groups (G divides C and
// F), an output of the same map (stride 1, no padding) and no pool (a residual allowed), and is not a graph output.
struct DwPwMatch {
  int dw = -1, pw = -1;  // node indices
};

// An inverted residual block for the block kernel (kernels/mbconv.cuh): an optional expand layer (a 1x1
// Conv|FusedConv, one group, stride 1, no padding), a depthwise Conv|FusedConv (as in DwPwMatch), an optional
// squeeze-and-excitation gate over the depthwise output (SqueezeExciteMatch; the output read by the gate's pool and
// Mul alone), and a project layer (a 1x1 Conv|FusedConv, one group, stride 1, no padding, a residual allowed when it
// is ready before the block); constant weights, no pool, no residual before the project layer, each intermediate
// read only inside the block and not a graph output.
struct InvertedResidualMatch {
  int expand = -1;  // node indices; expand -1: none
  int dw = -1;
  std::optional<SqueezeExciteMatch> gate;
  int project = -1;
  std::vector<int> nodes() const;  // every node of the block, in graph order
};

// Convolutions of one input whose outputs are concatenated along the channels, for one convolution of all their
// filters (SqueezeNet's expand layers: a 1x1 and a 3x3 "same" layer): two or more Conv|FusedConv of one group,
// constant weights and biases, no residual or pool, each read only by one Concat (axis 1 of 4-D tensors) and not
// a graph output, the Concat's inputs being exactly their outputs. Whether their filters line up (equal strides,
// dilation 1, a smaller filter centred in the largest by the paddings, one activation) is the lowering's test.
struct SiblingConvsMatch {
  std::vector<int> convs;  // node indices, in the Concat's input order
  int concat = -1;
};

// A convolution and the 1x1 convolution that alone reads its output, for the fused kernel (kernels/conv_pw.cuh):
// a Conv|FusedConv of one group (constant weights and bias, no residual or pool), or sibling convolutions whose
// Concat is their only reader (SiblingConvsMatch; SqueezeNet's expand layers), whose output is read only by a
// 1x1 Conv|FusedConv of one group over the same map (stride 1, no padding, no residual or pool) and is not a graph
// output. Whether the kernel takes the layers (their filter counts, activation) is the lowering's test.
struct ConvPointwiseMatch {
  std::vector<int> convs;  // the first layer: one convolution, or the siblings in the Concat's input order
  int concat = -1;         // the siblings' Concat, or -1
  int pw = -1;             // the 1x1 convolution
  std::vector<int> nodes() const {
    std::vector<int> out = convs;
    if (concat >= 0) out.push_back(concat);
    out.push_back(pw);
    return out;
  }
};

// ShuffleNet's channel shuffle in front of a depthwise convolution, for depthwise kernels that read their input
// through it (kernels::InputPrologue): a Transpose of axes 1 and 2 alone (perm 0 2 1 3 ...) of a non-constant
// [N, G, C / G, spatial...] (rank 4 or 5), whose output reaches, through views alone, a depthwise Conv|FusedConv of
// [N, C, H, W] (group C, weights [C, 1, KH, KW], no residual or pool) with H * W the spatial extent; each value
// on the way read only by the next node and not a graph output.
struct ShuffledDepthwiseMatch {
  int transpose = -1, dw = -1;  // node indices
  std::vector<int> views;       // between them, in order
  int groups = 1;               // G
  // Every node it covers, in graph order: the Transpose, the views, the depthwise convolution.
  std::vector<int> nodes() const {
    std::vector<int> out = {transpose};
    out.insert(out.end(), views.begin(), views.end());
    out.push_back(dw);
    return out;
  }
};

// The shuffle and depthwise convolution whose Transpose is node `first`, or nullopt.
std::optional<ShuffledDepthwiseMatch> match_shuffled_depthwise(const ir::Graph& graph, int first);

// A BatchNormalization in front of a convolution, for kernels that read their input through its affine and
// activation (kernels::InputPrologue; DenseNet's pre-activation BatchNormalization + ReLU, whose input, the block's
// growing Concat, each layer normalizes differently): BatchNormalization|FusedBatchNormalization (constant
// statistics, any fused activation, one output) of a non-constant [N, C, H, W], its output read only by a
// Conv|FusedConv (as its input, constant 4-D weights and bias) and not a graph output; the convolution's residual,
// if any, ready where the BatchNormalization runs.
struct AffineConvMatch {
  int affine = -1, conv = -1;  // node indices
};

// The BatchNormalization `first` and the convolution after it, or nullopt.
std::optional<AffineConvMatch> match_affine_conv(const ir::Graph& graph, int first);

// DenseNet's bottleneck layer for the dense layer kernel (kernels/dense_layer.cuh): a BatchNormalization read only
// by a 1x1 convolution (AffineConvMatch; one group, stride 1, no padding, no residual or pool), whose output is read
// only by a 3x3 Conv|FusedConv of one group, stride 1, dilation 1 and padding 1 on every side over the same map
// (constant weights and bias, no residual or pool), and is not a graph output.
struct DenseLayerMatch {
  int affine = -1, pw = -1, conv = -1;  // node indices
};

// The BatchNormalization `first` and the two convolutions after it, or nullopt.
std::optional<DenseLayerMatch> match_dense_layer(const ir::Graph& graph, int first);

// The convolution (or siblings) whose first node in graph order is `first` and its 1x1 reader, or nullopt.
std::optional<ConvPointwiseMatch> match_conv_pointwise(const ir::Graph& graph, int first);

// The siblings whose first node in graph order is `first`, or nullopt.
std::optional<SiblingConvsMatch> match_sibling_convs(const ir::Graph& graph, int first);

// The block starting at node `first` (the expand layer, or the depthwise layer), or nullopt.
std::optional<InvertedResidualMatch> match_inverted_residual(const ir::Graph& graph, int first);

// The pair starting at node `first` (the depthwise convolution), or nullopt. The pair's step runs where node
// `run_at` is (-1: `first`): a residual of the pointwise layer must be ready there.
std::optional<DwPwMatch> match_dw_pw(const ir::Graph& graph, int first, int run_at = -1);

// ShuffleNet's unit for the pair kernel reading through the shuffle: a channel shuffle in front of a depthwise
// convolution (ShuffledDepthwiseMatch) whose pair (DwPwMatch, grouped or not) runs where the Transpose is.
struct ShuffledDwPwMatch {
  ShuffledDepthwiseMatch shuffle;
  DwPwMatch pair;
};

// The shuffle, depthwise and pointwise convolutions whose Transpose is node `first`, or nullopt.
std::optional<ShuffledDwPwMatch> match_shuffled_dw_pw(const ir::Graph& graph, int first);

// The gate starting at node `first` (a GlobalAveragePool), or nullopt.
std::optional<SqueezeExciteMatch> match_squeeze_excite(const ir::Graph& graph, int first);

// The dense head starting at node `first` (a Gemm, a GlobalAveragePool, or a 1x1 convolution before one), or nullopt.
std::optional<DenseChainMatch> match_dense_chain(const ir::Graph& graph, int first);

// The chain starting at node `first`, or nullopt; `why` (if given) says why `first` does not start one
// (only set when `first` is a convolution).
std::optional<ConvChainMatch> match_conv_chain(const ir::Graph& graph, int first, std::string* why = nullptr);

}  // namespace cnnrt::passes
