#include "passes/bind_shapes.hpp"

#include <fmt/format.h>

#include <map>
#include <new>
#include <optional>

#include "core/error.hpp"
#include "core/log.hpp"
#include "cpu/ops.hpp"
#include "ir/fused.hpp"
#include "ir/ops.hpp"

namespace cnnrt::passes {
namespace {

using ir::Graph;
using ir::Node;
using ir::Shape;
using ir::Value;

// Folding materializes constants on the host: 2^28 elements (1 GiB of float32) is far beyond any shape
// chain or weight transform and keeps a hostile ConstantOfShape or Range from exhausting memory.
constexpr int64_t kMaxFoldedElements = int64_t{1} << 28;

void bind_inputs(Graph& graph, const std::vector<Shape>& input_shapes) {
  CNNRT_CHECK(input_shapes.size() == graph.inputs.size(), ErrorCode::InvalidInput,
              "{} input shapes given for the {} model inputs", input_shapes.size(), graph.inputs.size());
  std::map<std::string, std::pair<int64_t, std::string>> symbols;  // dim name -> size and the input that set it
  for (size_t i = 0; i < graph.inputs.size(); ++i) {
    Value& input = graph.values[graph.inputs[i]];
    const Shape& given = input_shapes[i];
    // The loader records the file's dims in `declared` (-1 where symbolic); graphs built in code may only
    // have a shape. Either way the given shape must agree with them.
    const std::optional<Shape> declared = input.declared ? input.declared : input.shape;
    if (declared.has_value()) {
      CNNRT_CHECK(declared->size() == given.size(), ErrorCode::InvalidInput,
                  "input '{}' is declared with rank {} ({}) but given shape {}", input.name, declared->size(),
                  ir::shape_str(*declared), ir::shape_str(given));
    }
    for (size_t d = 0; d < given.size(); ++d) {
      CNNRT_CHECK(given[d] >= 0, ErrorCode::InvalidInput, "input '{}' dim {} has negative size {}", input.name, d,
                  given[d]);
      // "?" is how the loader marks a dim with neither a size nor a name: it ties nothing together.
      const std::string symbol = d < input.dim_params.size() ? input.dim_params[d] : "";
      if (!symbol.empty() && symbol != "?") {
        auto [it, added] = symbols.emplace(symbol, std::make_pair(given[d], input.name));
        CNNRT_CHECK(added || it->second.first == given[d], ErrorCode::InvalidInput,
                    "input '{}' dim {} ('{}') is given as {}, but '{}' has '{}' = {}", input.name, d, symbol,
                    given[d], it->second.second, symbol, it->second.first);
      } else if (declared.has_value() && (*declared)[d] >= 0) {
        CNNRT_CHECK((*declared)[d] == given[d], ErrorCode::InvalidInput,
                    "input '{}' dim {} is declared as {} but given as {}", input.name, d, (*declared)[d], given[d]);
      }
    }
    try {
      ir::numel(given);
    } catch (const Error& e) {
      fail(ErrorCode::InvalidInput, "input '{}': {}", input.name, e.what());
    }
    if (input.dtype == ir::DType::Undefined) input.dtype = ir::DType::Float32;
    CNNRT_CHECK(input.dtype == ir::DType::Float32, ErrorCode::Unsupported,
                "input '{}' has type {}; cnnrt takes float32 inputs", input.name, ir::dtype_name(input.dtype));
    input.shape = given;
  }
}

void check_arity(const ir::OpInfo& info, const Node& node, const Graph& graph) {
  const int inputs = static_cast<int>(node.inputs.size());
  const int outputs = static_cast<int>(node.outputs.size());
  CNNRT_CHECK(inputs >= info.min_inputs && (info.max_inputs < 0 || inputs <= info.max_inputs),
              ErrorCode::InvalidModel, "{} inputs, expected {} to {}", inputs, info.min_inputs,
              info.max_inputs < 0 ? std::string("any number") : std::to_string(info.max_inputs));
  CNNRT_CHECK(outputs >= info.min_outputs && outputs <= info.max_outputs, ErrorCode::InvalidModel,
              "{} outputs, expected {} to {}", outputs, info.min_outputs, info.max_outputs);
  CNNRT_CHECK(outputs > 0 && node.outputs[0] != ir::kNoValue, ErrorCode::InvalidModel, "the first output is missing");
  for (int i = 0; i < info.min_inputs; ++i) {
    CNNRT_CHECK(node.inputs[i] != ir::kNoValue, ErrorCode::InvalidModel, "required input {} is missing", i);
  }
  for (int id : node.inputs) {
    if (id == ir::kNoValue) continue;
    CNNRT_CHECK(id >= 0 && id < static_cast<int>(graph.values.size()), ErrorCode::Internal, "input value #{} does "
                "not exist", id);
    CNNRT_CHECK(graph.values[id].shape.has_value(), ErrorCode::InvalidModel,
                "input '{}' is not produced by any earlier node, model input or initializer", graph.values[id].name);
  }
}

bool all_present_constant(const std::vector<int>& ids, const Graph& graph) {
  for (int id : ids) {
    if (id != ir::kNoValue && !graph.values[id].is_constant()) return false;
  }
  return true;
}

// Runs the node's CPU kernel on its constant inputs; its outputs become constants.
void fold(const Node& node, Graph& graph) {
  const cpu::KernelFn kernel = cpu::find_kernel(node.op);
  CNNRT_CHECK(kernel != nullptr, ErrorCode::Internal, "no CPU kernel to fold {}", node.op);
  cpu::Inputs inputs;
  for (int id : node.inputs) inputs.push_back(graph.constant_of(id));
  std::vector<ir::HostTensor> results;
  results.reserve(node.outputs.size());  // `outputs` points into it
  cpu::Outputs outputs;
  for (int id : node.outputs) {
    if (id == ir::kNoValue) {
      outputs.push_back(nullptr);
      continue;
    }
    const Value& value = graph.values[id];
    CNNRT_CHECK(ir::numel(*value.shape) <= kMaxFoldedElements, ErrorCode::LimitExceeded,
                "folding '{}' would create a constant of shape {}, more than the {} elements cnnrt folds",
                value.name, ir::shape_str(*value.shape), kMaxFoldedElements);
    results.emplace_back(value.dtype, *value.shape);
    outputs.push_back(&results.back());
  }
  kernel(node, inputs, outputs);
  for (size_t i = 0, r = 0; i < node.outputs.size(); ++i) {
    if (node.outputs[i] == ir::kNoValue) continue;
    graph.values[node.outputs[i]].constant = std::make_shared<const ir::HostTensor>(std::move(results[r++]));
  }
}

// A node that stays computes float32 at run time; int64 (shape arithmetic) only exists as constants.
void check_runtime_outputs(const Node& node, const Graph& graph) {
  for (int id : node.outputs) {
    if (id == ir::kNoValue) continue;
    const Value& out = graph.values[id];
    if (out.dtype == ir::DType::Float32) continue;
    std::string runtime_input;
    for (int in : node.inputs) {
      if (in != ir::kNoValue && !graph.values[in].is_constant()) {
        runtime_input = graph.values[in].name;
        break;
      }
    }
    fail(ErrorCode::Unsupported, "'{}' would be a {} tensor computed at run time (from '{}', which is not constant); "
         "cnnrt computes {} only in constants", out.name, ir::dtype_name(out.dtype), runtime_input,
         ir::dtype_name(out.dtype));
  }
}

// Infers the node's outputs; returns false when the node folded into constants and can go.
bool infer_or_fold(Node& node, Graph& graph) {
  // cnnrt's fused ops are in the table too: a graph after the passes binds again.
  const bool default_domain = node.domain.empty() || node.domain == "ai.onnx" || node.domain == ir::fused::kDomain;
  const ir::OpInfo* info = default_domain ? ir::find_op(node.op) : nullptr;
  CNNRT_CHECK(info != nullptr, ErrorCode::Unsupported, "op {} (domain '{}') is not supported", node.op, node.domain);
  check_arity(*info, node, graph);
  info->infer(node, graph, graph.opset);
  bool outputs_constant = true;
  for (int id : node.outputs) {
    if (id == ir::kNoValue) continue;
    CNNRT_CHECK(graph.values[id].shape.has_value(), ErrorCode::Internal, "inference left '{}' without a shape",
                graph.values[id].name);
    ir::numel(*graph.values[id].shape);  // InvalidModel when the element count overflows
    outputs_constant = outputs_constant && graph.values[id].is_constant();
  }
  if (outputs_constant) return false;  // Shape, Size: known from shapes alone
  CNNRT_CHECK(!info->shape_only, ErrorCode::Internal, "shape-only op left its output unknown");
  if (all_present_constant(node.inputs, graph)) {
    fold(node, graph);
    return false;
  }
  check_runtime_outputs(node, graph);
  return true;
}

}  // namespace

void bind_shapes(Graph& graph, const std::vector<Shape>& input_shapes) {
  bind_inputs(graph, input_shapes);
  for (Value& value : graph.values) {
    if (value.constant != nullptr) {
      value.shape = value.constant->shape();
      value.dtype = value.constant->dtype();
    }
  }
  std::vector<Node> kept;
  size_t folded = 0;
  for (Node& node : graph.nodes) {
    bool keep = false;
    try {
      keep = infer_or_fold(node, graph);
    } catch (const Error& e) {
      rethrow_with_prefix(e, ir::node_label(node));
    } catch (const std::bad_alloc&) {
      fail(ErrorCode::LimitExceeded, "{}: out of host memory while folding", ir::node_label(node));
    }
    if (keep) {
      kept.push_back(std::move(node));
    } else {
      ++folded;
    }
  }
  graph.nodes = std::move(kept);
  graph.remove_dead();
  for (int id : graph.outputs) {
    CNNRT_CHECK(graph.values[id].shape.has_value(), ErrorCode::InvalidModel,
                "output '{}' is not computed by any node", graph.values[id].name);
  }
  log().debug("bind_shapes: {} nodes folded into constants, {} left to run", folded, graph.nodes.size());
}

}  // namespace cnnrt::passes
