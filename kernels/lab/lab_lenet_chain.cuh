// The lab programs' LeNet chain (models/fashion_lenet.onnx's shapes) on random device weights: conv 1->8
// 5x5 pad 2 on 28x28 + ReLU + 2x2/2 max pool, conv 8->16 5x5 pad 2 + ReLU + 3x3/3 max pool, 256->10 dense.
// Used by launch_floor.cu.
#pragma once

#include <random>
#include <vector>

#include "kernels/conv_chain.cuh"
#include "kernels/lab/lab_check.cuh"

namespace cnnrt::kernels::lab {

inline PoolGeometry max_pool(int k, int out) {
  PoolGeometry p;
  p.kind = FusedPool::Max;
  p.kh = p.kw = p.sh = p.sw = k;
  p.PH = p.PW = out;
  return p;
}

inline ConvChainDesc lenet_chain(int batch) {
  ConvChainDesc d;
  d.batch = batch;
  d.a.g.C = 1; d.a.g.H = d.a.g.W = 28; d.a.g.F = 8; d.a.g.KH = d.a.g.KW = 5; d.a.g.OH = d.a.g.OW = 28; d.a.g.pad_top = d.a.g.pad_left = 2;
  d.a.e.param_act = ParamAct::Relu; d.a.e.pool = max_pool(2, 14);
  d.b.g.C = 8; d.b.g.H = d.b.g.W = 14; d.b.g.F = 16; d.b.g.KH = d.b.g.KW = 5; d.b.g.OH = d.b.g.OW = 14; d.b.g.pad_top = d.b.g.pad_left = 2;
  d.b.e.param_act = ParamAct::Relu; d.b.e.pool = max_pool(3, 4);
  d.fc.N = 10;
  d.a.weights = device_random(8 * 25, 1); d.a.e.bias = device_random(8, 2);
  d.b.weights = device_random(16 * 8 * 25, 3); d.b.e.bias = device_random(16, 4);
  d.fc.weights = device_random(10 * 256, 5); d.fc.bias = device_random(10, 6);
  return d;
}

}  // namespace cnnrt::kernels::lab
