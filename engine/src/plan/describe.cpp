#include "plan/describe.hpp"

#include <fmt/format.h>

#include "plan/gpu_plan.hpp"

namespace cnnrt::plan {

namespace {

std::string value_shapes(const ir::Graph& graph, const std::vector<int>& ids) {
  std::vector<std::string> parts;
  for (int id : ids) {
    if (id == ir::kNoValue) continue;
    const ir::Value& v = graph.values[id];
    if (v.is_constant()) continue;  // weights are listed with the step's kernel, not as data flow
    parts.push_back(v.shape ? ir::shape_str(*v.shape) : "?");
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace

std::string describe(const Prepared& prepared, Device device, bool explain) {
  const ir::Graph& g = prepared.graph;
  std::string text = fmt::format("model: {}\ndevice: {}{}\n", g.model_name, to_string(device),
                                 prepared.gpu_plan ? " (" + prepared.gpu_plan->device + ")" : std::string());
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    text += fmt::format("input  {}: {}\n", g.values[g.inputs[i]].name, ir::shape_str(prepared.input_shapes[i]));
  }
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    text += fmt::format("output {}: {}\n", g.values[g.outputs[i]].name, ir::shape_str(prepared.output_shapes[i]));
  }
  text += "\npasses:\n";
  if (prepared.pass_log.empty()) text += "  (nothing rewritten)\n";
  for (const std::string& line : prepared.pass_log) text += "  " + line + "\n";

  if (prepared.gpu_plan) {
    text += "\n" + describe_gpu_plan(*prepared.gpu_plan, g, explain);
    return text;
  }
  text += fmt::format("\nsteps ({}, CPU reference backend):\n", g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    // Joined first: a width given to fmt::join pads each name, not the whole list.
    const std::string covers = fmt::format("{}", fmt::join(n.covers, "+"));
    text += fmt::format("  {:3}  {:<22} {:<28} [{}] -> [{}]\n", i, n.op, covers, value_shapes(g, n.inputs),
                        value_shapes(g, n.outputs));
  }
  return text;
}

}  // namespace cnnrt::plan
