// Models in the forms PyTorch's dynamo exporter writes at opsets 18 to 21, and the same networks the opset 13
// way with the same weights, for the opset tests on the CPU (test_opset18_21.cpp) and the GPU
// (gpu/test_opset18_21_gpu.cpp).
#pragma once

#include <random>
#include <string>
#include <vector>

#include "model_builder.hpp"

namespace cnnrt::testing {

constexpr int64_t kInChannels = 3;
constexpr int64_t kChannels = 8;  // after the first conv
constexpr int64_t kClasses = 5;
constexpr int64_t kSide = 8;      // input height and width

// IR version that the exporters write with each opset (onnx.helper's table).
inline int64_t ir_version_for(int64_t opset) {
  if (opset >= 21) return 10;
  if (opset >= 19) return 9;
  if (opset >= 18) return 8;
  return 7;
}

inline std::vector<float> random_values(size_t count, unsigned seed, float low, float high) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> uniform(low, high);
  std::vector<float> values(count);
  for (float& v : values) v = uniform(generator);
  return values;
}

inline void attr_float(onnx::NodeProto& node, const std::string& name, float value) {
  auto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(value);
}

// A Constant node holding int64s, the way exporters write axes and shape pieces.
inline void int_constant(ModelBuilder& m, const std::string& name, std::vector<int64_t> values) {
  auto& node = m.node("Constant", {}, {name}, name + "_const");
  ModelBuilder::attr_ints(node, "value_ints", std::move(values));
}

// A float scalar Constant node (value_float), the dynamo exporter's form for Pad's constant value.
inline void float_constant(ModelBuilder& m, const std::string& name, float value) {
  auto& node = m.node("Constant", {}, {name}, name + "_const");
  attr_float(node, "value_float", value);
}

// x[N,3,8,8] -> Conv -> BatchNormalization -> Relu -> MaxPool 2x2 -> [N,8,4,4]
//   -> Pad 1 on H and W (value 0.5) -> AveragePool 3x3 -> [N,8,4,4]
//   -> Split channels 3+3+2 -> Concat in the order (c, a, b) -> "features" [N,8,4,4]
//   -> ReduceMean over H, W (keepdims) -> Reshape to [N, 8] through Shape/Gather/Concat
//   -> Linear(8 -> 5) -> Softmax -> "y" [N,5]
// The same weights at every opset; the ops take the form of `opset`.
inline std::string small_cnn(int64_t opset) {
  ModelBuilder m(opset);
  m.proto().set_ir_version(ir_version_for(opset));
  m.input("x", {-1, kInChannels, kSide, kSide}).output("y").output("features");
  const bool dynamo = opset >= 18;

  m.initializer("conv_w", {kChannels, kInChannels, 3, 3}, random_values(kChannels * kInChannels * 9, 1, -0.5f, 0.5f));
  m.initializer("conv_b", {kChannels}, random_values(kChannels, 2, -0.2f, 0.2f));
  auto& conv = m.node("Conv", {"x", "conv_w", "conv_b"}, {"conv"}, "/conv1/Conv");
  ModelBuilder::attr_ints(conv, "pads", {1, 1, 1, 1});
  ModelBuilder::attr_ints(conv, "kernel_shape", {3, 3});

  m.initializer("bn_scale", {kChannels}, random_values(kChannels, 3, 0.5f, 1.5f));
  m.initializer("bn_bias", {kChannels}, random_values(kChannels, 4, -0.3f, 0.3f));
  m.initializer("bn_mean", {kChannels}, random_values(kChannels, 5, -0.1f, 0.1f));
  m.initializer("bn_var", {kChannels}, random_values(kChannels, 6, 0.5f, 2.0f));
  auto& bn = m.node("BatchNormalization", {"conv", "bn_scale", "bn_bias", "bn_mean", "bn_var"}, {"bn"}, "/bn1/BN");
  attr_float(bn, "epsilon", 1e-5f);
  if (dynamo) ModelBuilder::attr_int(bn, "training_mode", 0);  // opset 15 added it; dynamo writes it
  m.node("Relu", {"bn"}, {"relu"}, "/relu/Relu");
  auto& maxpool = m.node("MaxPool", {"relu"}, {"pool"}, "/pool/MaxPool");
  ModelBuilder::attr_ints(maxpool, "kernel_shape", {2, 2});
  ModelBuilder::attr_ints(maxpool, "strides", {2, 2});

  // Pad: opset 13 lists begins and ends for all four axes; from 18 only for the axes input's (negative) axes.
  if (dynamo) {
    int_constant(m, "pad_pads", {1, 1, 1, 1});
    float_constant(m, "pad_value", 0.5f);
    int_constant(m, "pad_axes", {-2, -1});
    m.node("Pad", {"pool", "pad_pads", "pad_value", "pad_axes"}, {"padded"}, "/Pad");
  } else {
    m.int_initializer("pad_pads", {8}, {0, 0, 1, 1, 0, 0, 1, 1});
    m.initializer("pad_value", {}, {0.5f});
    m.node("Pad", {"pool", "pad_pads", "pad_value"}, {"padded"}, "/Pad");
  }
  auto& avgpool = m.node("AveragePool", {"padded"}, {"smooth"}, "/avgpool/AveragePool");
  ModelBuilder::attr_ints(avgpool, "kernel_shape", {3, 3});
  if (opset >= 19) ModelBuilder::attr_ints(avgpool, "dilations", {1, 1});  // opset 19 added it

  // Split: sizes as an input at 13; at 18 num_outputs, whose last chunk is the smaller one (8 = 3 + 3 + 2).
  if (dynamo) {
    auto& split = m.node("Split", {"smooth"}, {"part_a", "part_b", "part_c"}, "/Split");
    ModelBuilder::attr_int(split, "axis", 1);
    ModelBuilder::attr_int(split, "num_outputs", 3);
  } else {
    m.int_initializer("split_sizes", {3}, {3, 3, 2});
    auto& split = m.node("Split", {"smooth", "split_sizes"}, {"part_a", "part_b", "part_c"}, "/Split");
    ModelBuilder::attr_int(split, "axis", 1);
  }
  auto& concat = m.node("Concat", {"part_c", "part_a", "part_b"}, {"features"}, "/Concat");
  ModelBuilder::attr_int(concat, "axis", 1);

  // Global average pooling: ReduceMean with axes as an attribute (13) or an input (18: the dynamo way).
  if (dynamo) {
    int_constant(m, "mean_axes", {-1, -2});
    auto& mean = m.node("ReduceMean", {"features", "mean_axes"}, {"gap"}, "/ReduceMean");
    ModelBuilder::attr_int(mean, "keepdims", 1);
  } else {
    auto& mean = m.node("ReduceMean", {"features"}, {"gap"}, "/ReduceMean");
    ModelBuilder::attr_ints(mean, "axes", {2, 3});
    ModelBuilder::attr_int(mean, "keepdims", 1);
  }

  // Flatten as exporters write it: [shape[0], -1] from the input's shape.
  if (dynamo) {  // Shape with start/end (opset 15) gives the batch dim as a 1-D tensor directly
    auto& shape = m.node("Shape", {"gap"}, {"batch"}, "/Shape");
    ModelBuilder::attr_int(shape, "start", 0);
    ModelBuilder::attr_int(shape, "end", 1);
  } else {  // the TorchScript way: Shape, Gather the batch dim, Unsqueeze it back to 1-D
    m.node("Shape", {"gap"}, {"gap_shape"}, "/Shape");
    m.int_initializer("zero", {}, {0});
    auto& gather = m.node("Gather", {"gap_shape", "zero"}, {"batch_scalar"}, "/Gather");
    ModelBuilder::attr_int(gather, "axis", 0);
    m.int_initializer("unsqueeze_axes", {1}, {0});
    m.node("Unsqueeze", {"batch_scalar", "unsqueeze_axes"}, {"batch"}, "/Unsqueeze");
  }
  m.int_initializer("minus_one", {1}, {-1});
  auto& target = m.node("Concat", {"batch", "minus_one"}, {"flat_shape"}, "/Concat_shape");
  ModelBuilder::attr_int(target, "axis", 0);
  m.node("Reshape", {"gap", "flat_shape"}, {"flat"}, "/Reshape");

  // Linear: Gemm(transB) at 13; MatMul with the transposed weight plus Add at 18+.
  const std::vector<float> fc_w = random_values(kClasses * kChannels, 7, -1.0f, 1.0f);  // [5, 8]
  const std::vector<float> fc_b = random_values(kClasses, 8, -0.5f, 0.5f);
  m.initializer("fc_b", {kClasses}, fc_b);
  if (dynamo) {
    std::vector<float> fc_w_t(fc_w.size());  // [8, 5]
    for (int64_t o = 0; o < kClasses; ++o) {
      for (int64_t i = 0; i < kChannels; ++i) fc_w_t[i * kClasses + o] = fc_w[o * kChannels + i];
    }
    m.initializer("fc_w_t", {kChannels, kClasses}, fc_w_t);
    m.node("MatMul", {"flat", "fc_w_t"}, {"fc_mm"}, "/fc/MatMul");
    m.node("Add", {"fc_mm", "fc_b"}, {"logits"}, "/fc/Add");
  } else {
    m.initializer("fc_w", {kClasses, kChannels}, fc_w);
    auto& gemm = m.node("Gemm", {"flat", "fc_w", "fc_b"}, {"logits"}, "/fc/Gemm");
    ModelBuilder::attr_int(gemm, "transB", 1);
  }
  auto& softmax = m.node("Softmax", {"logits"}, {"y"}, "/Softmax");
  ModelBuilder::attr_int(softmax, "axis", -1);
  return m.bytes();
}

// x[2, 10] split along axis 1 into `outputs` outputs y0, y1, ...: by num_outputs when `num_outputs`
// (opset >= 18), else into even parts (no sizes given).
inline std::string split_model(int64_t opset, int64_t outputs, bool num_outputs) {
  ModelBuilder m(opset);
  m.proto().set_ir_version(ir_version_for(opset));
  m.input("x", {2, 10});
  auto& split = m.node("Split", {"x"}, {}, "split");
  for (int64_t k = 0; k < outputs; ++k) {
    split.add_output("y" + std::to_string(k));
    m.output("y" + std::to_string(k));
  }
  ModelBuilder::attr_int(split, "axis", -1);
  if (num_outputs) ModelBuilder::attr_int(split, "num_outputs", outputs);
  return m.bytes();
}

}  // namespace cnnrt::testing
