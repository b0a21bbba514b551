// The graph IR: values (tensors), nodes (ops with attributes) and the graph that owns them.
//
// Values are referred to by index into Graph::values; nodes by index into Graph::nodes, which is kept
// in topological order. An omitted optional input is index -1 (kNoValue).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "ir/tensor.hpp"

namespace cnnrt::ir {

constexpr int kNoValue = -1;

using AttrValue = std::variant<int64_t, float, std::string, std::vector<int64_t>, std::vector<float>,
                               std::vector<std::string>, HostTensor>;

// "int", "float", "string", "ints", "floats", "strings", "tensor".
const char* attr_type_name(const AttrValue& value);

// A node's attributes. Getters return the ONNX default when the attribute is absent and throw
// InvalidModel when it is present with another type.
class Attributes {
 public:
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  int64_t get_int(const std::string& name, int64_t fallback) const;
  float get_float(const std::string& name, float fallback) const;
  std::string get_string(const std::string& name, const std::string& fallback) const;
  std::vector<int64_t> get_ints(const std::string& name, const std::vector<int64_t>& fallback = {}) const;
  std::vector<float> get_floats(const std::string& name, const std::vector<float>& fallback = {}) const;
  const HostTensor& get_tensor(const std::string& name) const;
  const AttrValue& get(const std::string& name) const;

  void set(const std::string& name, AttrValue value) { values_[name] = std::move(value); }
  void erase(const std::string& name) { values_.erase(name); }
  const std::map<std::string, AttrValue>& all() const { return values_; }

 private:
  template <class T>
  const T* find_typed(const std::string& name, const char* wanted) const;
  std::map<std::string, AttrValue> values_;
};

struct Value {
  std::string name;
  DType dtype = DType::Undefined;
  std::optional<Shape> shape;           // known once inferred (graph inputs: once bound)
  std::vector<std::string> dim_params;  // graph inputs/outputs: symbolic name per dim ("" = fixed)
  std::optional<Shape> declared;        // graph inputs/outputs: dims as the file declares them, -1 where
                                        // symbolic or unknown; nullopt when the file gives no shape
  std::shared_ptr<const HostTensor> constant;  // initializers, Constant outputs, folded values
  int producer = -1;                    // index of the node that writes it; -1 for inputs and initializers

  bool is_constant() const { return constant != nullptr; }
};

struct Node {
  std::string op;         // ONNX op_type, or one of cnnrt's fused ops (see ir/fused.hpp)
  std::string domain;     // "" for the default ONNX domain
  std::string name;       // ONNX node name; "" when the file has none
  int onnx_index = -1;    // position in the file's node list
  std::vector<int> inputs;
  std::vector<int> outputs;
  Attributes attrs;
  std::vector<std::string> covers;  // labels of the ONNX nodes this node stands for (fusion keeps them)

  int input(size_t i) const { return i < inputs.size() ? inputs[i] : kNoValue; }
  bool has_input(size_t i) const { return input(i) != kNoValue; }
};

// "Conv node 'conv1' (#3)": how every message refers to a node.
std::string node_label(const Node& node);
// The short name used in plans and profiles: the node name, or "Op#index" when it has none.
std::string node_short_name(const Node& node);

struct Graph {
  std::string model_name;  // file path or "<memory>", for messages
  std::string graph_name;
  int64_t opset = 0;       // version of the default ONNX domain
  std::map<std::string, std::string> metadata;  // metadata_props
  std::vector<Value> values;
  std::vector<Node> nodes;   // topological order
  std::vector<int> inputs;   // runtime inputs (initializers excluded)
  std::vector<int> outputs;

  int find_value(const std::string& name) const;  // -1 if absent
  int add_value(Value value);
  const Shape& shape_of(int value) const;         // throws Internal when not inferred
  const HostTensor* constant_of(int value) const { return value < 0 ? nullptr : values[value].constant.get(); }

  // Recomputes Value::producer and checks that nodes are in topological order.
  void relink();
  // Drops nodes none of whose outputs reach a graph output (values keep their indices).
  void remove_dead();

 private:
  std::map<std::string, int> index_;
};

}  // namespace cnnrt::ir
