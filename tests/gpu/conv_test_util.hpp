// What the convolution kernel tests share beyond their layers (conv_layers.hpp): the fused epilogue applied on
// the host to the CPU reference's output, and the reference output of a layer.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "ir/graph.hpp"
#include "kernel_test_util.hpp"
#include "ir/tensor.hpp"
#include "ir/window.hpp"
#include "conv_layers.hpp"
#include "kernels/layer.hpp"

namespace cnnrt::testing {

// y += residual (when given), then the activation of set_test_activation, element by element.
inline void apply_test_epilogue(ir::HostTensor& y, const ir::HostTensor* residual, kernels::ParamAct act) {
  float* v = y.f32();
  for (int64_t i = 0; i < y.numel(); ++i) {
    if (residual) v[i] += residual->f32()[i];
    kernels::Epilogue e;
    set_test_activation(e, act);
    v[i] = kernels::apply_activation(act, v[i], e.alpha, e.beta);
  }
}

// The reference: CPU Conv, + residual, activation, CPU pooling, each the backend's own kernel.
struct Reference {
  ir::HostTensor output;
  kernels::ConvGeometry g;
  kernels::Epilogue e;
};

inline Reference reference(const Layer& L, const ir::HostTensor& x, const ir::HostTensor& w, const ir::HostTensor& b,
                           const ir::HostTensor* residual) {
  const kernels::ConvLayer layer = describe_layer(L);
  const ConvCase conv = make_conv_case(L.N, L.C, L.H, L.W, L.F, L.K, L.KW(), L.stride, L.pad_top, L.pad_left,
                                       L.pad_bottom, L.pad_right, L.groups, L.stride_w, L.dil);
  Reference r;
  r.g = layer.g;
  r.e = layer.e;
  ir::HostTensor y = cpu_reference("Conv", conv.attrs, {&x, &w, &b}, {L.N, L.F, r.g.OH, r.g.OW});
  apply_test_epilogue(y, residual, L.act);
  if (L.pool == kernels::FusedPool::None) {
    r.output = std::move(y);
    return r;
  }
  const char* pool_op = L.pool == kernels::FusedPool::Max ? "MaxPool" : "AveragePool";
  r.output = cpu_reference(pool_op, pool_attributes(L), {&y}, {L.N, L.F, r.e.pool.PH, r.e.pool.PW});
  return r;
}

}  // namespace cnnrt::testing
