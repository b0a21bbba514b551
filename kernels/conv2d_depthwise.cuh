// Depthwise convolution (group = C, F = C * multiplier): every output plane reads one input plane.
// The single-plane scheme of conv2d_c1 applied per channel: a block stages its input plane tile with
// halo in shared memory, each thread slides a K x (3*S+K) register window down 4 adjacent outputs; the
// K*K weights of a multiplier-1 layer live in registers for the whole block.
#pragma once

#include "kernels/conv_common.cuh"

namespace cnnrt::kernels {

// Registry entry "dw": groups == C, F a multiple of C, square 3x3 or 5x5, stride 1 or 2, dilation 1, no
// pooling; the input read as is or through a channel shuffle (InputPrologue). Weights as ONNX stores them:
// [F][1][K][K].

}  // namespace cnnrt::kernels
