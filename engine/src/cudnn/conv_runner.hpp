// cuDNN on the same layer, for comparison in `cnnrt bench` only (never used to run models).
//
// The algorithm is found once with cudnnFindConvolutionForwardAlgorithmEx on the real buffers, FP32 with
// CUDNN_FMA_MATH (no TF32, no tensor cores), with enough workspace for every algorithm; the workspace is
// allocated before any timing. Fused work is matched: bias + ReLU (+ residual) through
// cudnnConvolutionBiasActivationForward, other activations through cudnnActivationForward, pooling through
// cudnnPoolingForward.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "kernels/layer.hpp"

namespace cnnrt::cudnn {

// Why cuDNN cannot run `layer` as cnnrt does ("" when it can): asymmetric padding, LeakyRelu, ceil_mode
// pooling, ...
std::string unsupported_reason(const kernels::ConvLayer& layer);

class ConvRunner {
 public:
  // Finds the algorithm on the given buffers; `conv_out` (N*F*OH*OW floats, the unpooled convolution output
  // even when the spec pools) is overwritten while searching.
  ConvRunner(const kernels::ConvLayer& layer, cudaStream_t stream, const float* x, const float* w, float* conv_out);
  ~ConvRunner();
  ConvRunner(const ConvRunner&) = delete;
  ConvRunner& operator=(const ConvRunner&) = delete;

  // y = pool(act(conv(x, w) + bias + residual)); `conv_out` holds the pre-pool map when pooling.
  void run(const float* x, const float* w, const float* bias, const float* residual, float* conv_out, float* y);

  std::string algorithm() const;     // e.g. "IMPLICIT_PRECOMP_GEMM (+bias+relu fused) + max pool"
  int64_t conv_out_floats() const;   // N*F*OH*OW
  int64_t output_floats() const;     // after pooling
  size_t workspace_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// "9.19.0"
std::string version();

}  // namespace cnnrt::cudnn
