#include "onnx/loader.hpp"

#include <google/protobuf/stubs/logging.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <unordered_map>

#include "core/error.hpp"
#include "core/log.hpp"
#include "ir/ops.hpp"
#include "onnx/legacy_opsets.hpp"
#include "onnx/tensor_proto.hpp"

namespace cnnrt::onnx_io {

namespace fs = std::filesystem;
using ir::DType;
using ir::Graph;
using ir::HostTensor;
using ir::Node;
using ir::Value;

namespace {

// What is wrong with a model, gathered over the whole file so the user sees everything at once.
struct Problems {
  std::vector<std::string> invalid;      // the file contradicts itself or the ONNX spec
  std::vector<std::string> unsupported;  // valid ONNX that cnnrt cannot run
};

// Protobuf logs parse errors to stderr by default; the library must not print, so route them to our log.
void route_protobuf_logs() {
  static std::once_flag once;
  std::call_once(once, [] {
    google::protobuf::SetLogHandler([](google::protobuf::LogLevel, const char* file, int line,
                                       const std::string& message) {
      log().debug("protobuf ({}:{}): {}", file, line, message);
    });
  });
}

// Why bytes that failed to parse are not a model, as specifically as we can tell.
std::string describe_unparsable(const char* data, size_t size) {
  static const char kLfs[] = "version https://git-lfs.github.com/spec/";
  if (size >= sizeof(kLfs) - 1 && std::memcmp(data, kLfs, sizeof(kLfs) - 1) == 0) {
    return "is a Git LFS pointer, not the model itself (run 'git lfs pull' to fetch the real file)";
  }
  const size_t probe = std::min<size_t>(size, 512);
  size_t printable = 0;
  for (size_t i = 0; i < probe; ++i) {
    const unsigned char c = static_cast<unsigned char>(data[i]);
    printable += (c == '\n' || c == '\r' || c == '\t' || (c >= 32 && c < 127));
  }
  if (probe > 0 && printable == probe) return "is a text file, not a binary ONNX model (protobuf)";
  return "is not a valid ONNX model: protobuf parsing failed (truncated or corrupt file, or not a ModelProto)";
}

ir::AttrValue convert_attribute(const onnx::AttributeProto& a, const std::string& node_what,
                                const std::string& model_dir, int64_t max_weight_bytes) {
  using A = onnx::AttributeProto;
  A::AttributeType type = a.type();
  if (type == A::UNDEFINED) {  // IR version 1-2 files omit the type: infer it from the field that is set
    if (a.has_f()) type = A::FLOAT;
    else if (a.has_i()) type = A::INT;
    else if (a.has_s()) type = A::STRING;
    else if (a.has_t()) type = A::TENSOR;
    else if (a.floats_size() > 0) type = A::FLOATS;
    else if (a.ints_size() > 0) type = A::INTS;
    else if (a.strings_size() > 0) type = A::STRINGS;
  }
  switch (type) {
    case A::FLOAT: return a.f();
    case A::INT: return static_cast<int64_t>(a.i());
    case A::STRING: return a.s();
    case A::FLOATS: return std::vector<float>(a.floats().begin(), a.floats().end());
    case A::INTS: return std::vector<int64_t>(a.ints().begin(), a.ints().end());
    case A::STRINGS: return std::vector<std::string>(a.strings().begin(), a.strings().end());
    case A::TENSOR: {
      TensorSource source{fmt::format("{} attribute '{}'", node_what, a.name()), model_dir, max_weight_bytes};
      return decode_tensor(a.t(), source);
    }
    default:
      fail(ErrorCode::Unsupported, "attribute '{}' has type {} (subgraphs, sparse tensors and type protos are "
           "not supported)", a.name(), A::AttributeType_Name(type));
  }
}

// The value of a Constant node, from whichever of its attributes is set.
HostTensor constant_node_value(const Node& node) {
  const ir::Attributes& at = node.attrs;
  if (at.has("value")) return at.get_tensor("value");
  if (at.has("value_float")) return HostTensor::floats({}, {at.get_float("value_float", 0)});
  if (at.has("value_floats")) {
    auto v = at.get_floats("value_floats");
    const int64_t n = static_cast<int64_t>(v.size());
    return HostTensor::floats({n}, std::move(v));
  }
  if (at.has("value_int")) return HostTensor::ints({}, {at.get_int("value_int", 0)});
  if (at.has("value_ints")) {
    auto v = at.get_ints("value_ints");
    const int64_t n = static_cast<int64_t>(v.size());
    return HostTensor::ints({n}, std::move(v));
  }
  fail(ErrorCode::Unsupported, "Constant has none of the attributes value, value_float(s), value_int(s) "
       "(sparse and string constants are not supported)");
}

class GraphBuilder {
 public:
  GraphBuilder(const onnx::ModelProto& model, std::string name, std::string model_dir, const Limits& limits)
      : model_(model), model_dir_(std::move(model_dir)), limits_(limits) {
    graph_.model_name = std::move(name);
  }

  Graph build() {
    read_header();
    const onnx::GraphProto& g = model_.graph();
    CNNRT_CHECK(g.node_size() <= limits_.max_nodes, ErrorCode::LimitExceeded,
                "'{}' has {} nodes, over the limit of {} (Limits::max_nodes)", graph_.model_name, g.node_size(),
                limits_.max_nodes);
    read_initializers(g);
    read_inputs(g);
    read_nodes(g);
    read_outputs(g);
    report(problems_);
    sort_topologically();
    return std::move(graph_);
  }

 private:
  std::string where() const { return fmt::format("'{}'", graph_.model_name); }

  void read_header() {
    bool found = false;
    for (const auto& op : model_.opset_import()) {
      if (op.domain().empty() || op.domain() == "ai.onnx") {
        graph_.opset = op.version();
        found = true;
      }
    }
    CNNRT_CHECK(model_.has_graph(), ErrorCode::InvalidModel, "{} is not a valid ONNX model: it has no graph",
                where());
    if (!found) {
      std::vector<std::string> domains;
      for (const auto& op : model_.opset_import()) domains.push_back(op.domain());
      CNNRT_CHECK(domains.empty(), ErrorCode::Unsupported, "{} uses only the operator domain(s) {}; cnnrt runs the "
                  "default ONNX domain", where(), fmt::join(domains, ", "));
      fail(ErrorCode::InvalidModel, "{} does not say which opset of the default ONNX domain it uses (no "
           "opset_import entry)", where());
    }
    CNNRT_CHECK(graph_.opset >= kMinOpset && graph_.opset <= kMaxOpset, ErrorCode::Unsupported,
                "{} uses opset {} of the default domain; cnnrt supports opsets {} to {}", where(), graph_.opset,
                kMinOpset, kMaxOpset);
    file_opset_ = graph_.opset;
    graph_.graph_name = model_.graph().name();
    for (const auto& kv : model_.metadata_props()) graph_.metadata[kv.key()] = kv.value();
  }

  // Adds a value, or records a duplicate-name problem.
  int define_value(const std::string& name, const std::string& by) {
    auto [it, inserted] = defined_by_.emplace(name, by);
    if (!inserted) {
      problems_.invalid.push_back(fmt::format("value '{}' is defined twice: by {} and by {}", name, it->second, by));
      return graph_.find_value(name);
    }
    Value v;
    v.name = name;
    return graph_.add_value(std::move(v));
  }

  void read_initializers(const onnx::GraphProto& g) {
    CNNRT_CHECK(g.sparse_initializer_size() == 0, ErrorCode::Unsupported,
                "{} has sparse initializers, which cnnrt does not support", where());
    int64_t total_bytes = 0;
    for (const auto& t : g.initializer()) {
      const std::string what = fmt::format("initializer '{}'", t.name());
      TensorSource source{what, model_dir_, limits_.max_weight_bytes - total_bytes};
      HostTensor tensor;
      try {
        tensor = decode_tensor(t, source);
      } catch (const Error& e) {
        if (e.code() == ErrorCode::Unsupported) {
          problems_.unsupported.push_back(e.what());
          define_value(t.name(), what);  // defined, so readers report only this problem
          continue;
        }
        if (e.code() == ErrorCode::LimitExceeded) {
          fail(ErrorCode::LimitExceeded, "{}: initializers need more than {} bytes: {}", where(),
               limits_.max_weight_bytes, e.what());
        }
        rethrow_with_prefix(e, where());
      }
      total_bytes += tensor.numel() * (tensor.dtype() == DType::Float32 ? 4 : 8);
      initializer_bytes_ = total_bytes;
      const int id = define_value(t.name(), what);
      Value& v = graph_.values[id];
      v.dtype = tensor.dtype();
      v.shape = tensor.shape();
      v.constant = std::make_shared<const HostTensor>(std::move(tensor));
    }
  }

  void read_inputs(const onnx::GraphProto& g) {
    for (const auto& in : g.input()) {
      const int existing = graph_.find_value(in.name());
      if (existing >= 0 && graph_.values[existing].is_constant()) continue;  // an initializer listed as input
      const int id = define_value(in.name(), fmt::format("graph input '{}'", in.name()));
      Value& v = graph_.values[id];
      graph_.inputs.push_back(id);
      if (!in.type().has_tensor_type()) {
        problems_.unsupported.push_back(fmt::format("graph input '{}' is not a tensor (sequences, maps and "
                                                    "optionals are not supported)", in.name()));
        continue;
      }
      const auto& tt = in.type().tensor_type();
      v.dtype = static_cast<DType>(tt.elem_type());
      if (v.dtype != DType::Float32) {
        problems_.unsupported.push_back(fmt::format("graph input '{}' has type {}; cnnrt's run-time inputs are "
                                                    "float32", in.name(), ir::dtype_name(v.dtype)));
      }
      if (!tt.has_shape()) continue;  // rank unknown: the caller must give the full shape
      v.declared = declared_dims(tt.shape(), in.name(), v.dim_params);
      declared_input_dims_[id] = *v.declared;
      ir::Shape known;  // the fixed dims: their product must be countable whatever the symbolic ones become
      for (int64_t d : *v.declared) known.push_back(d < 0 ? 1 : d);  // symbolic (or negative, reported) as 1
      try {
        ir::numel(known);
      } catch (const Error&) {
        problems_.invalid.push_back(fmt::format("graph input '{}' declares dims {} whose element count overflows "
                                                "int64", in.name(), ir::shape_str(*v.declared)));
      }
    }
  }

  ir::Shape declared_dims(const onnx::TensorShapeProto& shape, const std::string& name,
                          std::vector<std::string>& dim_params) {
    ir::Shape dims;
    dim_params.clear();
    for (const auto& d : shape.dim()) {
      if (d.has_dim_value()) {
        if (d.dim_value() < 0) {
          problems_.invalid.push_back(fmt::format("'{}' declares a negative dimension {}", name, d.dim_value()));
        }
        dims.push_back(d.dim_value());
        dim_params.emplace_back();
      } else {
        dims.push_back(-1);
        dim_params.push_back(d.has_dim_param() && !d.dim_param().empty() ? d.dim_param() : "?");
      }
    }
    return dims;
  }

  void read_nodes(const onnx::GraphProto& g) {
    // Pass 1: every name a node defines, so nodes may appear in any order in the file.
    struct Pending {
      Node node;
      const onnx::NodeProto* proto;
    };
    std::vector<Pending> pending;
    pending.reserve(static_cast<size_t>(g.node_size()));
    for (int i = 0; i < g.node_size(); ++i) {
      const onnx::NodeProto& p = g.node(i);
      Node node;
      node.op = p.op_type();
      node.domain = p.domain() == "ai.onnx" ? "" : p.domain();
      node.name = p.name();
      node.onnx_index = i;
      node.covers = {ir::node_short_name(node)};
      const std::string label = ir::node_label(node);
      for (const auto& out : p.output()) {
        node.outputs.push_back(out.empty() ? ir::kNoValue : define_value(out, label));
      }
      pending.push_back({std::move(node), &p});
    }
    // Pass 2: inputs, attributes, support checks.
    for (Pending& pn : pending) {
      Node& node = pn.node;
      const std::string label = ir::node_label(node);
      for (const auto& in : pn.proto->input()) {
        if (in.empty()) {
          node.inputs.push_back(ir::kNoValue);
          continue;
        }
        const int id = graph_.find_value(in);
        if (id < 0) {
          problems_.invalid.push_back(fmt::format("{} reads '{}', which no node, graph input or initializer "
                                                  "provides", label, in));
        }
        node.inputs.push_back(id);
      }
      bool attributes_ok = true;
      for (const auto& a : pn.proto->attribute()) {
        try {
          node.attrs.set(a.name(), convert_attribute(a, label, model_dir_, limits_.max_weight_bytes));
        } catch (const Error& e) {
          if (e.code() == ErrorCode::LimitExceeded) rethrow_with_prefix(e, label);  // a tensor attribute too big
          attributes_ok = false;
          (e.code() == ErrorCode::Unsupported ? problems_.unsupported : problems_.invalid)
              .push_back(fmt::format("{}: {}", label, e.what()));
        }
      }
      if (!attributes_ok) continue;
      if (!node.domain.empty()) {
        problems_.unsupported.push_back(fmt::format("{}: op '{}' from domain '{}' is not supported (cnnrt runs the "
                                                    "default ONNX domain)", label, node.op, node.domain));
        continue;
      }
      if (node.op == "Constant") {
        add_constant_node(node, label);
        continue;
      }
      const ir::OpInfo* info = ir::find_op(node.op);
      if (!info) {
        problems_.unsupported.push_back(fmt::format("{}: op {} (opset {}) is not supported", label, node.op,
                                                    file_opset_));
        continue;
      }
      if (!check_arity(node, *info, label)) continue;
      std::vector<std::string> issues;
      try {
        upgrade_legacy_node(node, graph_, file_opset_, declared_input_dims_, issues);
        info->check(node, graph_, std::max<int64_t>(file_opset_, 7), issues);
      } catch (const Error& e) {
        (e.code() == ErrorCode::Unsupported ? problems_.unsupported : problems_.invalid)
            .push_back(fmt::format("{}: {}", label, e.what()));
        continue;
      }
      for (auto& issue : issues) problems_.unsupported.push_back(fmt::format("{}: {}", label, issue));
      graph_.nodes.push_back(std::move(node));
    }
    if (file_opset_ < 7) graph_.opset = 7;  // legacy attributes were rewritten above
  }

  bool check_arity(const Node& node, const ir::OpInfo& info, const std::string& label) {
    const int n_in = static_cast<int>(node.inputs.size());
    const int n_out = static_cast<int>(node.outputs.size());
    const bool in_ok = n_in >= info.min_inputs && (info.max_inputs < 0 || n_in <= info.max_inputs);
    const bool out_ok = n_out >= info.min_outputs && n_out <= info.max_outputs;
    if (!in_ok) {
      problems_.invalid.push_back(info.max_inputs < 0
          ? fmt::format("{}: takes at least {} inputs, has {}", label, info.min_inputs, n_in)
          : fmt::format("{}: takes {} to {} inputs, has {}", label, info.min_inputs, info.max_inputs, n_in));
    }
    if (!out_ok) {
      problems_.unsupported.push_back(fmt::format("{}: produces {} outputs; cnnrt supports {} to {}", label, n_out,
                                                  info.min_outputs, info.max_outputs));
    }
    return in_ok && out_ok;
  }

  void add_constant_node(const Node& node, const std::string& label) {
    if (node.outputs.size() != 1 || node.outputs[0] == ir::kNoValue) {
      problems_.invalid.push_back(fmt::format("{}: a Constant has exactly one output", label));
      return;
    }
    try {
      HostTensor value = constant_node_value(node);
      // Initializers and constants share one budget (numel is at most the 2^28-element tensor a protobuf
      // under 2 GiB can hold, so the sum cannot overflow).
      constant_bytes_ += value.numel() * (value.dtype() == DType::Float32 ? 4 : 8);
      CNNRT_CHECK(initializer_bytes_ + constant_bytes_ <= limits_.max_weight_bytes, ErrorCode::LimitExceeded,
                  "initializers and constants need more than {} bytes (Limits::max_weight_bytes; raise it with "
                  "--max-weight-bytes)", limits_.max_weight_bytes);
      Value& v = graph_.values[node.outputs[0]];
      v.dtype = value.dtype();
      v.shape = value.shape();
      v.constant = std::make_shared<const HostTensor>(std::move(value));
    } catch (const Error& e) {
      if (e.code() == ErrorCode::LimitExceeded) rethrow_with_prefix(e, label);
      (e.code() == ErrorCode::Unsupported ? problems_.unsupported : problems_.invalid)
          .push_back(fmt::format("{}: {}", label, e.what()));
    }
  }

  void read_outputs(const onnx::GraphProto& g) {
    CNNRT_CHECK(g.output_size() > 0, ErrorCode::InvalidModel, "{} has no graph outputs", where());
    for (const auto& out : g.output()) {
      const int id = graph_.find_value(out.name());
      if (id < 0) {
        problems_.invalid.push_back(fmt::format("graph output '{}' is not produced by any node, input or "
                                                "initializer", out.name()));
        continue;
      }
      if (std::find(graph_.outputs.begin(), graph_.outputs.end(), id) != graph_.outputs.end()) {
        problems_.invalid.push_back(fmt::format("graph output '{}' is listed twice", out.name()));
        continue;
      }
      graph_.outputs.push_back(id);
      Value& v = graph_.values[id];
      const auto elem = static_cast<DType>(out.type().tensor_type().elem_type());
      if (out.type().has_tensor_type() && elem != DType::Undefined && elem != DType::Float32) {
        problems_.unsupported.push_back(fmt::format("graph output '{}' has type {}; cnnrt's outputs are float32",
                                                    out.name(), ir::dtype_name(elem)));
      }
      if (out.type().has_tensor_type() && out.type().tensor_type().has_shape() && !v.is_constant()) {
        v.declared = declared_dims(out.type().tensor_type().shape(), out.name(), v.dim_params);
      }
    }
  }

  void report(const Problems& p) const {
    auto list = [](const std::vector<std::string>& items) {
      std::string text;
      const size_t shown = std::min<size_t>(items.size(), 50);
      for (size_t i = 0; i < shown; ++i) text += "\n  " + items[i];
      if (items.size() > shown) text += fmt::format("\n  ... and {} more", items.size() - shown);
      return text;
    };
    if (!p.invalid.empty()) {
      fail(ErrorCode::InvalidModel, "{} is not a valid model ({} problem{}):{}", where(), p.invalid.size(),
           p.invalid.size() == 1 ? "" : "s", list(p.invalid));
    }
    if (!p.unsupported.empty()) {
      fail(ErrorCode::Unsupported, "{} uses {} thing{} cnnrt cannot run:{}", where(), p.unsupported.size(),
           p.unsupported.size() == 1 ? "" : "s", list(p.unsupported));
    }
  }

  // Kahn's algorithm over value dependencies; the file's order breaks ties so plans stay readable.
  void sort_topologically() {
    const size_t n = graph_.nodes.size();
    std::vector<int> producer(graph_.values.size(), -1);
    for (size_t i = 0; i < n; ++i) {
      for (int out : graph_.nodes[i].outputs) {
        if (out != ir::kNoValue) producer[out] = static_cast<int>(i);
      }
    }
    std::vector<int> missing(n, 0);
    std::vector<std::vector<int>> readers(n);
    for (size_t i = 0; i < n; ++i) {
      std::set<int> deps;
      for (int in : graph_.nodes[i].inputs) {
        if (in != ir::kNoValue && producer[in] >= 0) deps.insert(producer[in]);
      }
      for (int d : deps) readers[d].push_back(static_cast<int>(i));
      missing[i] = static_cast<int>(deps.size());
    }
    std::set<int> ready;
    for (size_t i = 0; i < n; ++i) {
      if (missing[i] == 0) ready.insert(static_cast<int>(i));
    }
    std::vector<int> order;
    order.reserve(n);
    while (!ready.empty()) {
      const int i = *ready.begin();
      ready.erase(ready.begin());
      order.push_back(i);
      for (int r : readers[i]) {
        if (--missing[r] == 0) ready.insert(r);
      }
    }
    if (order.size() != n) {
      std::vector<std::string> stuck;
      for (size_t i = 0; i < n && stuck.size() < 8; ++i) {
        if (missing[i] > 0) stuck.push_back(ir::node_label(graph_.nodes[i]));
      }
      fail(ErrorCode::InvalidModel, "{} is not a valid model: its graph has a cycle ({} nodes can never run, "
           "among them {})", where(), n - order.size(), fmt::join(stuck, ", "));
    }
    std::vector<Node> sorted;
    sorted.reserve(n);
    for (int i : order) sorted.push_back(std::move(graph_.nodes[i]));
    graph_.nodes = std::move(sorted);
    graph_.relink();
  }

  const onnx::ModelProto& model_;
  std::string model_dir_;
  Limits limits_;
  Graph graph_;
  Problems problems_;
  int64_t file_opset_ = 0;
  int64_t initializer_bytes_ = 0;
  int64_t constant_bytes_ = 0;
  std::unordered_map<std::string, std::string> defined_by_;
  std::unordered_map<int, ir::Shape> declared_input_dims_;
};

}  // namespace

Graph load_model_bytes(const void* data, std::size_t size, const std::string& name, const std::string& model_dir,
                       const Limits& limits) {
  route_protobuf_logs();
  CNNRT_CHECK(size > 0, ErrorCode::InvalidModel, "'{}' is empty (0 bytes); it is not an ONNX model", name);
  CNNRT_CHECK(static_cast<int64_t>(size) <= limits.max_model_bytes && size <= static_cast<size_t>(INT_MAX),
              ErrorCode::LimitExceeded, "'{}' is {} bytes, over the model size limit of {} bytes "
              "(Limits::max_model_bytes; protobuf cannot read more than 2 GiB)", name, size, limits.max_model_bytes);
  onnx::ModelProto model;
  const char* bytes = static_cast<const char*>(data);
  if (!model.ParseFromArray(bytes, static_cast<int>(size))) {
    fail(ErrorCode::InvalidModel, "'{}' {}", name, describe_unparsable(bytes, size));
  }
  // Random bytes can parse as a message with unknown fields only; a model has at least a graph and opset.
  if (!model.has_graph() && model.opset_import_size() == 0) {
    fail(ErrorCode::InvalidModel, "'{}' {}", name, describe_unparsable(bytes, size));
  }
  return GraphBuilder(model, name, model_dir, limits).build();
}

Graph load_model_file(const std::string& path, const Limits& limits) {
  std::error_code ec;
  CNNRT_CHECK(fs::exists(path, ec), ErrorCode::Io, "cannot open model '{}': no such file", path);
  CNNRT_CHECK(!fs::is_directory(path, ec), ErrorCode::Io, "cannot open model '{}': it is a directory", path);
  const auto size = fs::file_size(path, ec);
  CNNRT_CHECK(!ec, ErrorCode::Io, "cannot read model '{}': {}", path, ec.message());
  CNNRT_CHECK(static_cast<int64_t>(size) <= limits.max_model_bytes, ErrorCode::LimitExceeded,
              "'{}' is {} bytes, over the model size limit of {} bytes (Limits::max_model_bytes)", path, size,
              limits.max_model_bytes);
  std::ifstream in(path, std::ios::binary);
  CNNRT_CHECK(in.good(), ErrorCode::Io, "cannot open model '{}'", path);
  std::string bytes(static_cast<size_t>(size), '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(size));
  CNNRT_CHECK(in.gcount() == static_cast<std::streamsize>(size), ErrorCode::Io, "reading model '{}' failed", path);
  const fs::path dir = fs::path(path).parent_path();
  return load_model_bytes(bytes.data(), bytes.size(), path, dir.empty() ? "." : dir.string(), limits);
}

}  // namespace cnnrt::onnx_io
