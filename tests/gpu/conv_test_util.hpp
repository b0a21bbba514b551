// What the convolution kernel tests share: the fused epilogue they ask of a kernel (activation parameters
// fixed per activation kind) and the same epilogue applied on the host to the CPU reference's output.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "ir/graph.hpp"
#include "kernel_test_util.hpp"
#include "ir/tensor.hpp"
#include "ir/window.hpp"
#include "kernels/conv_common.cuh"

namespace cnnrt::testing {

// A convolution layer of a test: the CPU reference's Conv attributes and the kernels' geometry, from one
// description (begin pads top/left, end pads bottom/right; dilation 1).
struct ConvCase {
  ir::Attributes attrs;
  kernels::ConvGeometry g;
};
inline ConvCase make_conv_case(int N, int C, int H, int W, int F, int KH, int KW, int stride, int pad_top, int pad_left,
                               int pad_bottom, int pad_right, int groups) {
  ConvCase c;
  c.attrs.set("kernel_shape", std::vector<int64_t>{KH, KW});
  c.attrs.set("strides", std::vector<int64_t>{stride, stride});
  c.attrs.set("dilations", std::vector<int64_t>{1, 1});
  c.attrs.set("pads", std::vector<int64_t>{pad_top, pad_left, pad_bottom, pad_right});
  c.attrs.set("group", int64_t(groups));
  const auto axes = ir::resolve_window(c.attrs, {H, W}, {KH, KW}, false);
  kernels::ConvGeometry& g = c.g;
  g.N = N; g.C = C; g.H = H; g.W = W; g.F = F; g.KH = KH; g.KW = KW;
  g.OH = static_cast<int>(axes[0].output); g.OW = static_cast<int>(axes[1].output);
  g.stride_h = g.stride_w = stride;
  g.pad_top = pad_top; g.pad_left = pad_left;
  g.groups = groups;
  return c;
}

// The epilogue parameters the tests use: LeakyRelu slope 0.1, Clip to [-0.5, 0.5].
inline void set_test_activation(kernels::Epilogue& e, kernels::ParamAct act) {
  e.param_act = act;
  e.alpha = act == kernels::ParamAct::LeakyRelu ? 0.1f : -0.5f;
  e.beta = 0.5f;
}

// y += residual (when given), then the activation of set_test_activation, element by element.
inline void apply_test_epilogue(ir::HostTensor& y, const ir::HostTensor* residual, kernels::ParamAct act) {
  float* v = y.f32();
  for (int64_t i = 0; i < y.numel(); ++i) {
    if (residual) v[i] += residual->f32()[i];
    switch (act) {
      case kernels::ParamAct::Relu: v[i] = std::max(v[i], 0.0f); break;
      case kernels::ParamAct::LeakyRelu: v[i] = v[i] < 0 ? 0.1f * v[i] : v[i]; break;
      case kernels::ParamAct::Clip: v[i] = std::min(std::max(v[i], -0.5f), 0.5f); break;
      case kernels::ParamAct::Sigmoid: v[i] = 1.0f / (1.0f + std::exp(-v[i])); break;
      case kernels::ParamAct::Tanh: v[i] = std::tanh(v[i]); break;
      default: break;
    }
  }
}

// One layer of the kernel tests: a convolution and its fused epilogue.
struct Layer {
  int N, C, H, W, F, K, stride, pad_top, pad_left, pad_bottom, pad_right, groups;
  kernels::ParamAct act = kernels::ParamAct::None;
  bool residual = false;
  kernels::FusedPool pool = kernels::FusedPool::None;
  int pool_k = 2, pool_s = 2, pool_pad = 0;
  bool pool_ceil = false;
};

// The reference: CPU Conv, + residual, activation, CPU pooling, each the backend's own kernel.
struct Reference {
  ir::HostTensor output;
  kernels::ConvGeometry g;
  kernels::Epilogue e;
};

inline Reference reference(const Layer& L, const ir::HostTensor& x, const ir::HostTensor& w, const ir::HostTensor& b,
                           const ir::HostTensor* residual) {
  const ConvCase conv = make_conv_case(L.N, L.C, L.H, L.W, L.F, L.K, L.K, L.stride, L.pad_top, L.pad_left, L.pad_bottom,
                                       L.pad_right, L.groups);
  Reference r;
  r.g = conv.g;
  ir::HostTensor y = cpu_reference("Conv", conv.attrs, {&x, &w, &b}, {L.N, L.F, r.g.OH, r.g.OW});
  apply_test_epilogue(y, residual, L.act);
  set_test_activation(r.e, L.act);
  if (L.pool == kernels::FusedPool::None) {
    r.output = std::move(y);
    return r;
  }
  const char* pool_op = L.pool == kernels::FusedPool::Max ? "MaxPool" : "AveragePool";
  ir::Attributes pool_attrs;
  const kernels::ConvGeometry& g = r.g;
  pool_attrs.set("kernel_shape", std::vector<int64_t>{L.pool_k, L.pool_k});
  pool_attrs.set("strides", std::vector<int64_t>{L.pool_s, L.pool_s});
  pool_attrs.set("dilations", std::vector<int64_t>{1, 1});
  pool_attrs.set("pads", std::vector<int64_t>{L.pool_pad, L.pool_pad, L.pool_pad, L.pool_pad});
  pool_attrs.set("ceil_mode", int64_t(L.pool_ceil));
  pool_attrs.set("count_include_pad", int64_t(0));
  const auto paxes = ir::resolve_window(pool_attrs, {g.OH, g.OW}, {}, true);
  auto& p = r.e.pool;
  p.kind = L.pool;
  p.kh = p.kw = L.pool_k;
  p.sh = p.sw = L.pool_s;
  p.pad_top = p.pad_left = static_cast<int>(paxes[0].pad_begin);
  p.pad_bottom = static_cast<int>(paxes[0].pad_end);
  p.pad_right = static_cast<int>(paxes[1].pad_end);
  p.PH = static_cast<int>(paxes[0].output);
  p.PW = static_cast<int>(paxes[1].output);
  r.output = cpu_reference(pool_op, pool_attrs, {&y}, {L.N, L.F, p.PH, p.PW});
  return r;
}

}  // namespace cnnrt::testing
