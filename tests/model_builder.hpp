// Builds small ONNX ModelProtos in tests, so each loader check can be exercised on exactly the defect it
// guards against.
#pragma once

#include <onnx/onnx_pb.h>

#include <initializer_list>
#include <string>
#include <vector>

namespace cnnrt::testing {

class ModelBuilder {
 public:
  explicit ModelBuilder(int64_t opset = 13) {
    model_.set_ir_version(7);
    auto* op = model_.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    model_.mutable_graph()->set_name("test");
  }

  // A float32 graph input; -1 dims become the symbolic dim "N".
  ModelBuilder& input(const std::string& name, std::vector<int64_t> dims) {
    auto* in = model_.mutable_graph()->add_input();
    in->set_name(name);
    auto* tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) {
      auto* dim = tt->mutable_shape()->add_dim();
      if (d < 0) dim->set_dim_param("N");
      else dim->set_dim_value(d);
    }
    return *this;
  }
  // A float32 graph input with named dims: -1 dims take the name at the same index ("" leaves a dim unnamed).
  ModelBuilder& input(const std::string& name, std::vector<int64_t> dims, const std::vector<std::string>& dim_names) {
    input(name, dims);
    auto* shape = model_.mutable_graph()->mutable_input(model_.graph().input_size() - 1)->mutable_type()
                      ->mutable_tensor_type()->mutable_shape();
    for (size_t i = 0; i < dims.size() && i < dim_names.size(); ++i) {
      if (dims[i] < 0) shape->mutable_dim(static_cast<int>(i))->set_dim_param(dim_names[i]);
    }
    return *this;
  }
  ModelBuilder& output(const std::string& name) {
    auto* out = model_.mutable_graph()->add_output();
    out->set_name(name);
    out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    return *this;
  }
  ModelBuilder& initializer(const std::string& name, std::vector<int64_t> dims, std::vector<float> values) {
    auto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    for (float v : values) t->add_float_data(v);
    return *this;
  }
  ModelBuilder& int_initializer(const std::string& name, std::vector<int64_t> dims, std::vector<int64_t> values) {
    auto* t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    for (int64_t d : dims) t->add_dims(d);
    for (int64_t v : values) t->add_int64_data(v);
    return *this;
  }
  onnx::NodeProto& node(const std::string& op, std::initializer_list<std::string> inputs,
                        std::initializer_list<std::string> outputs, const std::string& name = "") {
    auto* n = model_.mutable_graph()->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const auto& i : inputs) n->add_input(i);
    for (const auto& o : outputs) n->add_output(o);
    return *n;
  }
  static void attr_ints(onnx::NodeProto& n, const std::string& name, std::vector<int64_t> values) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t v : values) a->add_ints(v);
  }
  static void attr_int(onnx::NodeProto& n, const std::string& name, int64_t value) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(value);
  }
  static void attr_float(onnx::NodeProto& n, const std::string& name, float value) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(value);
  }
  static void attr_string(onnx::NodeProto& n, const std::string& name, const std::string& value) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(value);
  }
  onnx::ModelProto& proto() { return model_; }
  std::string bytes() const { return model_.SerializeAsString(); }

 private:
  onnx::ModelProto model_;
};

// x[N,1,5,5] -> Conv(w[2,1,3,3], b[2], pad 1) -> Relu -> y: a model every backend must run.
inline ModelBuilder tiny_conv_model() {
  ModelBuilder m;
  m.input("x", {-1, 1, 5, 5}).output("y");
  std::vector<float> w(18);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.1f * static_cast<float>(i) - 0.7f;
  m.initializer("w", {2, 1, 3, 3}, w).initializer("b", {2}, {0.5f, -0.25f});
  auto& conv = m.node("Conv", {"x", "w", "b"}, {"c"}, "conv");
  ModelBuilder::attr_ints(conv, "pads", {1, 1, 1, 1});
  m.node("Relu", {"c"}, {"y"}, "relu");
  return m;
}

// A fully convolutional denoiser with symbolic batch, height and width: image[N,1,H,W] -> Conv 3x3 (4 maps,
// pad 1) -> Relu -> Conv 3x3 (1 map, pad 1) -> noise; denoised = image - noise. Fixed weights, none zero.
inline ModelBuilder fully_convolutional_denoiser() {
  ModelBuilder m;
  m.input("image", {-1, 1, -1, -1}, {"N", "", "H", "W"}).output("denoised");
  std::vector<float> w1(36), w2(36);
  for (size_t i = 0; i < w1.size(); ++i) w1[i] = 0.05f * static_cast<float>(i % 7) - 0.13f;
  for (size_t i = 0; i < w2.size(); ++i) w2[i] = 0.11f - 0.03f * static_cast<float>(i % 5);
  m.initializer("w1", {4, 1, 3, 3}, w1).initializer("b1", {4}, {0.1f, -0.2f, 0.05f, 0.3f});
  m.initializer("w2", {1, 4, 3, 3}, w2).initializer("b2", {1}, {-0.01f});
  auto& conv1 = m.node("Conv", {"image", "w1", "b1"}, {"c1"}, "conv1");
  ModelBuilder::attr_ints(conv1, "pads", {1, 1, 1, 1});
  m.node("Relu", {"c1"}, {"r1"}, "relu1");
  auto& conv2 = m.node("Conv", {"r1", "w2", "b2"}, {"noise"}, "conv2");
  ModelBuilder::attr_ints(conv2, "pads", {1, 1, 1, 1});
  m.node("Sub", {"image", "noise"}, {"denoised"}, "residual");
  return m;
}

}  // namespace cnnrt::testing
