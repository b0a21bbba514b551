#include "ir/graph.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace cnnrt::ir {

const char* attr_type_name(const AttrValue& value) {
  static const char* names[] = {"int", "float", "string", "ints", "floats", "strings", "tensor"};
  return names[value.index()];
}

template <class T>
const T* Attributes::find_typed(const std::string& name, const char* wanted) const {
  auto it = values_.find(name);
  if (it == values_.end()) return nullptr;
  if (const T* v = std::get_if<T>(&it->second)) return v;
  fail(ErrorCode::InvalidModel, "attribute '{}' has type {}, expected {}", name, attr_type_name(it->second),
       wanted);
}

int64_t Attributes::get_int(const std::string& name, int64_t fallback) const {
  const int64_t* v = find_typed<int64_t>(name, "int");
  return v ? *v : fallback;
}

float Attributes::get_float(const std::string& name, float fallback) const {
  const float* v = find_typed<float>(name, "float");
  return v ? *v : fallback;
}

std::string Attributes::get_string(const std::string& name, const std::string& fallback) const {
  const std::string* v = find_typed<std::string>(name, "string");
  return v ? *v : fallback;
}

std::vector<int64_t> Attributes::get_ints(const std::string& name, const std::vector<int64_t>& fallback) const {
  const auto* v = find_typed<std::vector<int64_t>>(name, "ints");
  return v ? *v : fallback;
}

std::vector<float> Attributes::get_floats(const std::string& name, const std::vector<float>& fallback) const {
  const auto* v = find_typed<std::vector<float>>(name, "floats");
  return v ? *v : fallback;
}

const HostTensor& Attributes::get_tensor(const std::string& name) const {
  const auto* v = find_typed<HostTensor>(name, "tensor");
  CNNRT_CHECK(v != nullptr, ErrorCode::InvalidModel, "attribute '{}' is missing", name);
  return *v;
}

const AttrValue& Attributes::get(const std::string& name) const {
  auto it = values_.find(name);
  CNNRT_CHECK(it != values_.end(), ErrorCode::InvalidModel, "attribute '{}' is missing", name);
  return it->second;
}

std::string node_label(const Node& node) {
  if (node.name.empty()) return fmt::format("{} node #{}", node.op, node.onnx_index);
  return fmt::format("{} node '{}' (#{})", node.op, node.name, node.onnx_index);
}

std::string node_short_name(const Node& node) {
  return node.name.empty() ? fmt::format("{}#{}", node.op, node.onnx_index) : node.name;
}

int Graph::find_value(const std::string& name) const {
  if (index_.size() != values.size()) {
    auto& index = const_cast<std::map<std::string, int>&>(index_);
    index.clear();
    for (size_t i = 0; i < values.size(); ++i) index.emplace(values[i].name, static_cast<int>(i));
  }
  auto it = index_.find(name);
  return it == index_.end() ? -1 : it->second;
}

int Graph::add_value(Value value) {
  const int id = static_cast<int>(values.size());
  if (index_.size() == values.size()) index_.emplace(value.name, id);
  values.push_back(std::move(value));
  return id;
}

const Shape& Graph::shape_of(int value) const {
  CNNRT_CHECK(value >= 0 && value < static_cast<int>(values.size()) && values[value].shape.has_value(),
              ErrorCode::Internal, "shape of value #{} is not known", value);
  return *values[value].shape;
}

void Graph::relink() {
  for (Value& v : values) v.producer = -1;
  for (size_t n = 0; n < nodes.size(); ++n) {
    for (int out : nodes[n].outputs) {
      if (out != kNoValue) values[out].producer = static_cast<int>(n);
    }
  }
  for (size_t n = 0; n < nodes.size(); ++n) {
    for (int in : nodes[n].inputs) {
      if (in != kNoValue && values[in].producer >= static_cast<int>(n)) {
        fail(ErrorCode::Internal, "{} reads '{}' before it is produced", node_label(nodes[n]), values[in].name);
      }
    }
  }
}

void Graph::remove_dead() {
  std::vector<char> live_value(values.size(), 0);
  for (int out : outputs) live_value[out] = 1;
  std::vector<char> live_node(nodes.size(), 0);
  for (size_t n = nodes.size(); n-- > 0;) {
    bool live = false;
    for (int out : nodes[n].outputs) live = live || (out != kNoValue && live_value[out]);
    if (!live) continue;
    live_node[n] = 1;
    for (int in : nodes[n].inputs) {
      if (in != kNoValue) live_value[in] = 1;
    }
  }
  std::vector<Node> kept;
  kept.reserve(nodes.size());
  for (size_t n = 0; n < nodes.size(); ++n) {
    if (live_node[n]) kept.push_back(std::move(nodes[n]));
  }
  nodes = std::move(kept);
  relink();
}

}  // namespace cnnrt::ir
