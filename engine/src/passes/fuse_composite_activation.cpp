// fuse_composite_activation: activations that exporters write as several nodes become the one node that
// fuse_activation can then take into a convolution's or a Gemm's epilogue (and that runs as one pass where
// nothing takes it):
//   Mul(x, Sigmoid(x))                                        -> Swish (alpha 1: SiLU)
//   Mul(x, Sigmoid(Mul(x, a)))                  (a a scalar)  -> Swish (alpha a)
//   Mul(x, HardSigmoid(x), alpha 1/6, beta 1/2)               -> HardSwish
//   Mul(Mul(x, Add(Erf(Div(x, sqrt 2)), 1)), 0.5)             -> Gelu (exact; PyTorch's export of GELU before
//                                                                opset 20; Mul(x, 1/sqrt 2) for the Div too)
// Either operand order of Mul and Add. Every intermediate value must have no other reader.
#include <fmt/format.h>

#include <cmath>

#include "passes/passes.hpp"
#include "passes/rewrite.hpp"

namespace cnnrt::passes {
namespace {

// The value of a one-element float constant, or nullopt.
std::optional<float> scalar_of(const ir::Graph& graph, int value) {
  const ir::HostTensor* t = graph.constant_of(value);
  if (t == nullptr || t->dtype() != ir::DType::Float32 || t->numel() != 1) return std::nullopt;
  return t->f32()[0];
}

bool near(float a, float b) { return std::fabs(a - b) <= 1e-6f * std::max(1.0f, std::fabs(b)); }

// The index of the node producing `value` when it is `op` in the default domain and only `reader` reads
// `value`; -1 otherwise.
int sole_producer(const ir::Graph& graph, const std::vector<std::vector<int>>& readers, int value, const char* op,
                  int reader) {
  const ir::Node* p = producer_of(graph, value);
  if (p == nullptr || p->op != op || !p->domain.empty() || sole_reader(graph, readers, value) != reader) return -1;
  return graph.values[value].producer;
}

struct Match {
  std::string op;
  float alpha = 0.0f;
  int x = -1;
  std::vector<int> covered;
};

// Mul(x, Sigmoid(x)), Mul(x, Sigmoid(Mul(x, a))), Mul(x, HardSigmoid(x)) at node `mul`.
std::optional<Match> match_gated(const ir::Graph& graph, const std::vector<std::vector<int>>& readers, int mul) {
  const ir::Node& m = graph.nodes[mul];
  for (int side = 0; side < 2; ++side) {
    const int x = m.input(side), gate = m.input(1 - side);
    for (const char* op : {"Sigmoid", "HardSigmoid"}) {
      const int g = sole_producer(graph, readers, gate, op, mul);
      if (g < 0) continue;
      const ir::Node& gn = graph.nodes[g];
      if (gn.input(0) == x) {
        if (std::string(op) == "Sigmoid") return Match{"Swish", 1.0f, x, {g, mul}};
        if (near(gn.attrs.get_float("alpha", 0.2f), 1.0f / 6.0f) && near(gn.attrs.get_float("beta", 0.5f), 0.5f)) {
          return Match{"HardSwish", 0.0f, x, {g, mul}};
        }
        continue;
      }
      if (std::string(op) != "Sigmoid") continue;
      const int scaled = sole_producer(graph, readers, gn.input(0), "Mul", g);
      if (scaled < 0) continue;
      const ir::Node& sn = graph.nodes[scaled];
      for (int s = 0; s < 2; ++s) {
        const std::optional<float> a = scalar_of(graph, sn.input(1 - s));
        if (sn.input(s) == x && a) return Match{"Swish", *a, x, {scaled, g, mul}};
      }
    }
  }
  return std::nullopt;
}

// Mul(Mul(x, Add(Erf(Div(x, sqrt 2)), 1)), 0.5) at node `outer`.
std::optional<Match> match_gelu(const ir::Graph& graph, const std::vector<std::vector<int>>& readers, int outer) {
  const ir::Node& o = graph.nodes[outer];
  for (int side = 0; side < 2; ++side) {
    const std::optional<float> half = scalar_of(graph, o.input(1 - side));
    if (!half || !near(*half, 0.5f)) continue;
    const int inner = sole_producer(graph, readers, o.input(side), "Mul", outer);
    if (inner < 0) continue;
    const ir::Node& in = graph.nodes[inner];
    for (int s = 0; s < 2; ++s) {
      const int x = in.input(s);
      const int add = sole_producer(graph, readers, in.input(1 - s), "Add", inner);
      if (add < 0) continue;
      const ir::Node& an = graph.nodes[add];
      for (int t = 0; t < 2; ++t) {
        const std::optional<float> one = scalar_of(graph, an.input(1 - t));
        const int erf = sole_producer(graph, readers, an.input(t), "Erf", add);
        if (!one || !near(*one, 1.0f) || erf < 0) continue;
        const int arg = graph.nodes[erf].input(0);
        for (const char* op : {"Div", "Mul"}) {
          const int scale = sole_producer(graph, readers, arg, op, erf);
          if (scale < 0) continue;
          const ir::Node& sn = graph.nodes[scale];
          const bool div = std::string(op) == "Div";
          for (int u = 0; u < (div ? 1 : 2); ++u) {
            const std::optional<float> k = scalar_of(graph, sn.input(1 - u));
            const float want = div ? std::sqrt(2.0f) : 1.0f / std::sqrt(2.0f);
            if (sn.input(u) == x && k && near(*k, want)) return Match{"Gelu", 0.0f, x, {scale, erf, add, inner, outer}};
          }
        }
      }
    }
  }
  return std::nullopt;
}

bool fuse_one(ir::Graph& graph, const std::vector<std::vector<int>>& readers, int index, std::vector<std::string>& log) {
  const ir::Node& node = graph.nodes[index];
  if (node.op != "Mul" || !node.domain.empty() || node.inputs.size() != 2) return false;
  std::optional<Match> match = match_gated(graph, readers, index);
  if (!match) match = match_gelu(graph, readers, index);
  if (!match || graph.shape_of(match->x) != graph.shape_of(node.outputs.at(0))) return false;
  ir::Node result;
  result.op = match->op;
  result.name = node.name;
  result.onnx_index = node.onnx_index;
  result.inputs = {match->x};
  result.outputs = node.outputs;
  if (match->op == "Swish") result.attrs.set("alpha", match->alpha);
  if (match->op == "Gelu") result.attrs.set("approximate", std::string("none"));
  std::vector<std::string> names;
  for (int n : match->covered) names.push_back(log_name(graph.nodes[n]));
  const std::string line =
      fmt::format("{} -> {}{}", fmt::join(names, " + "), match->op,
                  match->op == "Swish" ? fmt::format(" (alpha {})", match->alpha) : std::string());
  replace_nodes(graph, match->covered, std::move(result));
  log.push_back(line);
  return true;
}

}  // namespace

void fuse_composite_activation(ir::Graph& graph, const Target&, std::vector<std::string>& log) {
  rewrite_until_done(graph, [&](ir::Graph& g, const std::vector<std::vector<int>>& readers, int n) {
    return fuse_one(g, readers, n, log);
  });
}

}  // namespace cnnrt::passes
