#include "passes/chain_match.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "ir/fused.hpp"
#include "ir/ops.hpp"
#include "passes/rewrite.hpp"

namespace cnnrt::passes {

namespace {

bool is_conv(const ir::Node& n) { return n.op == "Conv" || n.op == ir::fused::kFusedConv; }

// Whether `n`'s first input is an activation: a computed value (not a constant) of known shape.
bool reads_activation(const ir::Graph& g, const ir::Node& n) {
  return n.has_input(0) && !g.values[n.input(0)].is_constant() && g.values[n.input(0)].shape.has_value();
}

using Readers = std::vector<std::vector<int>>;

// The reader of `value` past the views that follow it (appended to `views`; `value` becomes the last view's
// output), or -1 where a value on the way has other readers or is a graph output.
int reader_past_views(const ir::Graph& g, const Readers& readers, int& value, std::vector<int>& views) {
  int next = sole_reader(g, readers, value);
  while (next >= 0 && ir::is_view_op(g.nodes[static_cast<size_t>(next)])) {
    views.push_back(next);
    value = g.nodes[static_cast<size_t>(next)].outputs.at(0);
    next = sole_reader(g, readers, value);
  }
  return next;
}

// The outputs of a dense layer whose weights dense_problem accepted: N of Gemm's constant B.
int64_t dense_outputs(const ir::Graph& g, const ir::Node& d) {
  return g.constant_of(d.input(1))->shape()[d.attrs.get_int("transB", 0) != 0 ? 0 : 1];
}

bool all_ones(const std::vector<int64_t>& v) {
  return std::all_of(v.begin(), v.end(), [](int64_t x) { return x == 1; });
}

// A 2-D convolution with constant weights, stride 1, dilation 1, one group and no residual operand.
std::string conv_problem(const ir::Graph& g, const ir::Node& n) {
  if (!is_conv(n)) return fmt::format("{} is not a convolution", ir::node_short_name(n));
  const ir::HostTensor* w = g.constant_of(n.input(1));
  if (!w || w->shape().size() != 4) return "weights are not a constant 4-D tensor";
  if (!n.has_input(0) || !g.values[n.input(0)].shape || g.shape_of(n.input(0)).size() != 4) return "input is not 4-D";
  if (n.attrs.get_int("group", 1) != 1) return "grouped convolution";
  if (!all_ones(n.attrs.get_ints("strides", {1, 1})) || !all_ones(n.attrs.get_ints("dilations", {1, 1}))) {
    return "stride or dilation other than 1";
  }
  if (n.op == ir::fused::kFusedConv && n.has_input(ir::fused::kResidualInput)) return "residual add";
  if (n.outputs.empty() || n.outputs[0] < 0) return "no output";
  return "";
}

// Why the Gemm `d` is not a dense layer [batch, k] -> [batch, n] over `value` with constant weights and a
// constant per-output bias; empty when it is.
std::string dense_problem(const ir::Graph& g, const ir::Node& d, int value, int64_t k) {
  if (d.op != "Gemm" && d.op != ir::fused::kFusedGemm) return fmt::format("{} is not Gemm", d.op);
  if (!d.has_input(0) || d.input(0) != value || d.attrs.get_int("transA", 0) != 0) return "Gemm does not read the features as A";
  const ir::HostTensor* w = g.constant_of(d.input(1));
  if (!w || w->shape().size() != 2) return "Gemm's B is not a constant matrix";
  const bool trans_b = d.attrs.get_int("transB", 0) != 0;
  if (k >= 0 && w->shape()[trans_b ? 1 : 0] != k) return "Gemm's inner size does not match its input";
  const int64_t n = w->shape()[trans_b ? 0 : 1];
  if (d.has_input(2)) {
    const ir::HostTensor* c = g.constant_of(d.input(2));
    if (!c || (c->numel() != 1 && c->numel() != n) || (c->shape().size() == 2 && c->shape()[0] != 1)) {
      return "Gemm's C is not a constant per-output bias";
    }
  }
  return "";
}

}  // namespace

std::optional<ConvChainMatch> match_conv_chain(const ir::Graph& g, int first, std::string* why) {
  auto no = [why](std::string reason) -> std::optional<ConvChainMatch> {
    if (why) *why = std::move(reason);
    return std::nullopt;
  };
  const ir::Node& a = g.nodes.at(static_cast<size_t>(first));
  if (!is_conv(a)) return std::nullopt;
  if (std::string p = conv_problem(g, a); !p.empty()) return no("first convolution: " + p);
  if (g.shape_of(a.input(0))[1] != 1) return no("first convolution has more than one input channel");
  const Readers readers = value_readers(g);
  ConvChainMatch m;
  m.conv_a = first;
  m.conv_b = sole_reader(g, readers, a.outputs[0]);
  if (m.conv_b < 0) return no("the first convolution's output has other readers");
  const ir::Node& b = g.nodes[static_cast<size_t>(m.conv_b)];
  if (std::string p = conv_problem(g, b); !p.empty()) return no("second node: " + p);
  if (b.input(0) != a.outputs[0]) return no("the second convolution reads the first's output as weights");
  int value = b.outputs[0];
  const int next = reader_past_views(g, readers, value, m.views);
  if (next < 0) return no("the second convolution's output has other readers or is a graph output");
  const ir::Node& d = g.nodes[static_cast<size_t>(next)];
  if (d.op != "Gemm" && d.op != ir::fused::kFusedGemm) return no(fmt::format("{} follows the convolutions, not Gemm", d.op));
  if (std::string p = dense_problem(g, d, value, -1); !p.empty()) return no(p);
  const ir::Shape& features = g.shape_of(value);
  const ir::Shape& conv_out = g.shape_of(b.outputs[0]);
  if (features.size() != 2 || features[0] != conv_out[0] || features[1] * conv_out[0] != ir::numel(conv_out)) {
    return no("the Gemm's input is not the flattened convolution output");
  }
  m.dense = next;
  // The dense layers that follow, each reading the one before as A: [batch, K] -> [batch, N].
  int64_t k = dense_outputs(g, d);
  for (int from = m.dense; static_cast<int>(m.tail.size()) < kMaxChainTail;) {
    const int t = sole_reader(g, readers, g.nodes[static_cast<size_t>(from)].outputs.at(0));
    if (t < 0 || !dense_problem(g, g.nodes[static_cast<size_t>(t)], g.nodes[static_cast<size_t>(from)].outputs[0], k).empty()) break;
    k = dense_outputs(g, g.nodes[static_cast<size_t>(t)]);
    m.tail.push_back(t);
    from = t;
  }
  return m;
}

namespace {
bool is_pointwise_conv(const ir::Graph& g, const ir::Node& n, int value, bool residual_ok, bool grouped_ok);
}  // namespace

std::optional<DenseChainMatch> match_dense_chain(const ir::Graph& g, int first) {
  DenseChainMatch m;
  const ir::Node& f = g.nodes.at(static_cast<size_t>(first));
  if (is_conv(f)) {
    // A 1x1 convolution (with its activation) whose output only the pool of a dense head reads.
    if (!f.has_input(0) || !is_pointwise_conv(g, f, f.input(0), false, false)) return std::nullopt;
    const int pool = sole_reader(g, value_readers(g), f.outputs[0]);
    if (pool < 0) return std::nullopt;
    std::optional<DenseChainMatch> head = match_dense_chain(g, pool);
    if (!head || head->pool != pool) return std::nullopt;
    head->conv = first;
    return head;
  }
  if (f.op != "GlobalAveragePool" && f.op != "Gemm" && f.op != ir::fused::kFusedGemm) return std::nullopt;
  const Readers readers = value_readers(g);
  if (f.op == "GlobalAveragePool") {
    // [batch, C, spatial...] -> [batch, C, 1...] -> views -> [batch, C] -> Gemm (1-D or 2-D maps).
    if (!reads_activation(g, f)) return std::nullopt;
    const size_t rank = g.shape_of(f.input(0)).size();
    if (rank < 3 || rank > 4 || f.outputs.empty() || f.outputs[0] < 0) return std::nullopt;
    m.pool = first;
    int value = f.outputs[0];
    const int next = reader_past_views(g, readers, value, m.views);
    if (next < 0) return std::nullopt;
    first = next;
  }
  const ir::Node& d = g.nodes.at(static_cast<size_t>(first));
  if (d.op != "Gemm" && d.op != ir::fused::kFusedGemm) return std::nullopt;
  if (!reads_activation(g, d)) return std::nullopt;
  const ir::Shape& a = g.shape_of(d.input(0));
  if (a.size() != 2 || !dense_problem(g, d, d.input(0), a[1]).empty()) return std::nullopt;
  if (m.pool >= 0 && a[1] != g.shape_of(f.input(0))[1]) return std::nullopt;
  m.layers.push_back(first);
  int64_t k = dense_outputs(g, d);
  while (static_cast<int>(m.layers.size()) < kMaxDenseChain) {
    const int from = m.layers.back();
    const int value = g.nodes[static_cast<size_t>(from)].outputs.at(0);
    const int t = sole_reader(g, readers, value);
    if (t < 0 || !dense_problem(g, g.nodes[static_cast<size_t>(t)], value, k).empty()) break;
    k = dense_outputs(g, g.nodes[static_cast<size_t>(t)]);
    m.layers.push_back(t);
  }
  if (m.layers.size() < (m.pool >= 0 ? 1u : 2u)) return std::nullopt;
  return m;
}

namespace {

// Whether node `n` is a 1x1 convolution of `value` [batch, in, 1...] to [batch, out, 1...] with constant weights
// [out, in, 1...], a constant bias of `out` if any, one group and nothing fused but an activation.
bool is_gate_layer(const ir::Graph& g, const ir::Node& n, int value, int64_t in, int64_t out) {
  if (!is_conv(n) || !n.has_input(0) || n.input(0) != value || n.attrs.get_int("group", 1) != 1) return false;
  if (n.op == ir::fused::kFusedConv && (n.has_input(ir::fused::kResidualInput) || ir::fused::has_pool(n))) return false;
  const ir::HostTensor* w = g.constant_of(n.input(1));
  const ir::Shape& x = g.shape_of(value);
  if (!w || w->shape().size() != x.size() || w->shape()[0] != out || w->shape()[1] != in) return false;
  if (!all_ones(std::vector<int64_t>(w->shape().begin() + 2, w->shape().end()))) return false;
  if (n.has_input(2)) {
    const ir::HostTensor* b = g.constant_of(n.input(2));
    if (!b || b->numel() != out) return false;
  }
  if (n.outputs.empty() || n.outputs[0] < 0 || !g.values[n.outputs[0]].shape) return false;
  ir::Shape expected(x.size(), 1);
  expected[0] = x[0];
  expected[1] = out;
  return g.shape_of(n.outputs[0]) == expected;
}

}  // namespace

std::optional<SqueezeExciteMatch> match_squeeze_excite(const ir::Graph& g, int first) {
  const ir::Node& p = g.nodes.at(static_cast<size_t>(first));
  if (p.op != "GlobalAveragePool" || !p.domain.empty() || !p.has_input(0) || p.outputs.empty() || p.outputs[0] < 0) {
    return std::nullopt;
  }
  SqueezeExciteMatch m;
  m.pool = first;
  m.x = p.input(0);
  if (g.values[m.x].is_constant() || !g.values[m.x].shape) return std::nullopt;
  const ir::Shape& x = g.shape_of(m.x);
  if (x.size() < 3 || x.size() > 4 || !g.values[p.outputs[0]].shape) return std::nullopt;
  const Readers readers = value_readers(g);
  m.fc1 = sole_reader(g, readers, p.outputs[0]);
  if (m.fc1 < 0) return std::nullopt;
  const ir::Node& a = g.nodes[static_cast<size_t>(m.fc1)];
  const ir::HostTensor* w1 = is_conv(a) ? g.constant_of(a.input(1)) : nullptr;
  if (!w1 || w1->shape().size() < 2 || !is_gate_layer(g, a, p.outputs[0], x[1], w1->shape()[0])) return std::nullopt;
  const int64_t hidden = w1->shape()[0];
  m.fc2 = sole_reader(g, readers, a.outputs[0]);
  if (m.fc2 < 0 || !is_gate_layer(g, g.nodes[static_cast<size_t>(m.fc2)], a.outputs[0], hidden, x[1])) return std::nullopt;
  const int gate = g.nodes[static_cast<size_t>(m.fc2)].outputs[0];
  m.mul = sole_reader(g, readers, gate);
  if (m.mul < 0) return std::nullopt;
  const ir::Node& mul = g.nodes[static_cast<size_t>(m.mul)];
  if (mul.op != "Mul" || !mul.domain.empty() || mul.inputs.size() != 2) return std::nullopt;
  if (!((mul.input(0) == m.x && mul.input(1) == gate) || (mul.input(0) == gate && mul.input(1) == m.x))) {
    return std::nullopt;
  }
  if (mul.outputs.empty() || mul.outputs[0] < 0 || !g.values[mul.outputs[0]].shape || g.shape_of(mul.outputs[0]) != x) {
    return std::nullopt;
  }
  return m;
}

}  // namespace cnnrt::passes

namespace cnnrt::passes {

namespace {

// Whether `n` is a 2-D convolution of a non-constant [N, C, H, W] with constant 4-D weights (and bias, if any) and
// no pool fused; its output shape known.
bool is_plain_conv2d(const ir::Graph& g, const ir::Node& n) {
  if (!is_conv(n) || !reads_activation(g, n)) return false;
  if (g.shape_of(n.input(0)).size() != 4 || (n.op == ir::fused::kFusedConv && ir::fused::has_pool(n))) return false;
  const ir::HostTensor* w = g.constant_of(n.input(1));
  if (!w || w->shape().size() != 4 || (n.has_input(2) && !g.constant_of(n.input(2)))) return false;
  return !n.outputs.empty() && n.outputs[0] >= 0 && g.values[n.outputs[0]].shape.has_value();
}

// A 1x1 convolution over [N, C, H, W] of one group, stride 1 and no padding, reading `value`, with weights
// [F, C, 1, 1], its output [N, F, H, W]; no pool (is_plain_conv2d) and, unless `residual_ok`, no residual.
// A 1x1 convolution reading `value` over the same map; of one group, or (grouped_ok) of groups dividing its
// channels and filters.
bool is_pointwise_conv(const ir::Graph& g, const ir::Node& n, int value, bool residual_ok, bool grouped_ok = false) {
  if (!is_plain_conv2d(g, n) || n.input(0) != value) return false;
  const int64_t groups = n.attrs.get_int("group", 1);
  if (groups != 1 && !grouped_ok) return false;
  if (!residual_ok && n.op == ir::fused::kFusedConv && n.has_input(ir::fused::kResidualInput)) return false;
  const ir::Shape& in = g.shape_of(value);
  const ir::Shape& w = g.constant_of(n.input(1))->shape();
  const ir::Shape& out = g.shape_of(n.outputs[0]);
  return groups >= 1 && w[0] % groups == 0 && w[1] * groups == in[1] && w[2] == 1 && w[3] == 1 && out.size() == 4 &&
         out[0] == in[0] && out[1] == w[0] && out[2] == in[2] && out[3] == in[3];
}

// A depthwise convolution (group = channels, weights [C, 1, KH, KW]) reading `value`, no residual, no pool.
bool is_depthwise_conv(const ir::Graph& g, const ir::Node& n, int value) {
  if (!is_plain_conv2d(g, n) || n.input(0) != value) return false;
  if (n.op == ir::fused::kFusedConv && n.has_input(ir::fused::kResidualInput)) return false;
  const int64_t C = g.shape_of(value)[1];
  const ir::Shape& w = g.constant_of(n.input(1))->shape();
  return n.attrs.get_int("group", 1) == C && w[0] == C && w[1] == 1 && g.shape_of(n.outputs[0])[1] == C;
}

// Whether the residual operand of `n` (if any) is ready where node `first` runs (a fused step runs there).
bool residual_ready(const ir::Graph& g, const ir::Node& n, int first) {
  if (n.op != ir::fused::kFusedConv || !n.has_input(ir::fused::kResidualInput)) return true;
  const ir::Node* r = producer_of(g, n.input(ir::fused::kResidualInput));
  return !r || r - g.nodes.data() <= first;
}

}  // namespace

std::optional<DwPwMatch> match_dw_pw(const ir::Graph& g, int first, int run_at) {
  const ir::Node& dw = g.nodes.at(static_cast<size_t>(first));
  if (!dw.has_input(0) || !is_depthwise_conv(g, dw, dw.input(0))) return std::nullopt;
  const Readers readers = value_readers(g);
  DwPwMatch m;
  m.dw = first;
  m.pw = sole_reader(g, readers, dw.outputs[0]);
  if (m.pw < 0) return std::nullopt;
  // The pair runs where the depthwise layer is: a residual must be ready by then.
  const ir::Node& pw = g.nodes[static_cast<size_t>(m.pw)];
  if (!is_pointwise_conv(g, pw, dw.outputs[0], true, true) || !residual_ready(g, pw, run_at < 0 ? first : run_at)) {
    return std::nullopt;
  }
  return m;
}

std::optional<ShuffledDwPwMatch> match_shuffled_dw_pw(const ir::Graph& g, int first) {
  std::optional<ShuffledDepthwiseMatch> shuffle = match_shuffled_depthwise(g, first);
  if (!shuffle) return std::nullopt;
  const std::optional<DwPwMatch> pair = match_dw_pw(g, shuffle->dw, first);
  if (!pair) return std::nullopt;
  return ShuffledDwPwMatch{std::move(*shuffle), *pair};
}

std::optional<ShuffledDepthwiseMatch> match_shuffled_depthwise(const ir::Graph& g, int first) {
  const ir::Node& t = g.nodes.at(static_cast<size_t>(first));
  if (t.op != "Transpose" || !t.domain.empty() || !reads_activation(g, t) || t.outputs.size() != 1 ||
      t.outputs[0] < 0) {
    return std::nullopt;
  }
  const ir::Shape& x = g.shape_of(t.input(0));
  if (x.size() != 4 && x.size() != 5) return std::nullopt;
  const std::vector<int64_t> perm = t.attrs.get_ints("perm", {});
  if (perm.size() != x.size() || perm[0] != 0 || perm[1] != 2 || perm[2] != 1) return std::nullopt;
  for (size_t d = 3; d < perm.size(); ++d) {
    if (perm[d] != static_cast<int64_t>(d)) return std::nullopt;
  }
  const Readers readers = value_readers(g);
  ShuffledDepthwiseMatch m;
  m.transpose = first;
  int value = t.outputs[0];
  m.dw = reader_past_views(g, readers, value, m.views);
  if (m.dw < 0 || !is_depthwise_conv(g, g.nodes[static_cast<size_t>(m.dw)], value)) return std::nullopt;
  const ir::Shape& in = g.shape_of(value);
  int64_t spatial = 1;
  for (size_t d = 3; d < x.size(); ++d) spatial *= x[d];
  if (in[0] != x[0] || in[1] != x[1] * x[2] || in[2] * in[3] != spatial || x[1] < 2 || x[2] < 2) return std::nullopt;
  m.groups = static_cast<int>(x[1]);
  return m;
}

std::optional<AffineConvMatch> match_affine_conv(const ir::Graph& g, int first) {
  const ir::Node& bn = g.nodes.at(static_cast<size_t>(first));
  if (bn.op != "BatchNormalization" && bn.op != ir::fused::kFusedBatchNorm) return std::nullopt;
  if (!reads_activation(g, bn) || g.shape_of(bn.input(0)).size() != 4 || bn.outputs.size() != 1 ||
      bn.outputs[0] < 0) {
    return std::nullopt;
  }
  for (size_t k = 1; k <= 4; ++k) {
    if (!bn.has_input(k) || !g.constant_of(bn.input(k))) return std::nullopt;
  }
  const Readers readers = value_readers(g);
  AffineConvMatch m;
  m.affine = first;
  m.conv = sole_reader(g, readers, bn.outputs[0]);
  if (m.conv < 0) return std::nullopt;
  const ir::Node& c = g.nodes[static_cast<size_t>(m.conv)];
  if (!is_conv(c) || c.input(0) != bn.outputs[0] || !residual_ready(g, c, first)) return std::nullopt;
  const ir::HostTensor* w = g.constant_of(c.input(1));
  if (!w || w->shape().size() != 4 || (c.has_input(2) && !g.constant_of(c.input(2)))) return std::nullopt;
  if (c.outputs.empty() || c.outputs[0] < 0 || !g.values[c.outputs[0]].shape) return std::nullopt;
  return m;
}

std::optional<DenseLayerMatch> match_dense_layer(const ir::Graph& g, int first) {
  const std::optional<AffineConvMatch> affine = match_affine_conv(g, first);
  if (!affine) return std::nullopt;
  const ir::Node& pw = g.nodes[static_cast<size_t>(affine->conv)];
  if (!is_pointwise_conv(g, pw, pw.input(0), false)) return std::nullopt;
  // (An output of the input's shape also comes of a strided or padded 1x1 on a map of one or two pixels.)
  const std::string pw_pad = pw.attrs.get_string("auto_pad", "NOTSET");
  if ((pw_pad != "NOTSET" && pw_pad != "VALID") || pw.attrs.get_ints("strides", {1, 1}) != std::vector<int64_t>{1, 1} ||
      pw.attrs.get_ints("pads", {0, 0, 0, 0}) != std::vector<int64_t>{0, 0, 0, 0}) {
    return std::nullopt;
  }
  const Readers readers = value_readers(g);
  const int conv = sole_reader(g, readers, pw.outputs[0]);
  if (conv < 0) return std::nullopt;
  const ir::Node& c = g.nodes[static_cast<size_t>(conv)];
  if (!is_plain_conv2d(g, c) || c.input(0) != pw.outputs[0] || c.attrs.get_int("group", 1) != 1 ||
      (c.op == ir::fused::kFusedConv && c.has_input(ir::fused::kResidualInput))) {
    return std::nullopt;
  }
  const ir::Shape& in = g.shape_of(pw.outputs[0]);
  const ir::Shape& w = g.constant_of(c.input(1))->shape();
  const ir::Shape& out = g.shape_of(c.outputs[0]);
  const std::string auto_pad = c.attrs.get_string("auto_pad", "NOTSET");
  if (w[1] != in[1] || w[2] != 3 || w[3] != 3 || out.size() != 4 || out[0] != in[0] || out[1] != w[0] ||
      out[2] != in[2] || out[3] != in[3] || (auto_pad != "NOTSET" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER") ||
      c.attrs.get_ints("strides", {1, 1}) != std::vector<int64_t>{1, 1} ||
      c.attrs.get_ints("dilations", {1, 1}) != std::vector<int64_t>{1, 1} ||
      (auto_pad == "NOTSET" && c.attrs.get_ints("pads", {0, 0, 0, 0}) != std::vector<int64_t>{1, 1, 1, 1})) {
    return std::nullopt;
  }
  return DenseLayerMatch{first, affine->conv, conv};
}

std::optional<SiblingConvsMatch> match_sibling_convs(const ir::Graph& g, int first) {
  const ir::Node& head = g.nodes.at(static_cast<size_t>(first));
  if (!is_plain_conv2d(g, head) || head.attrs.get_int("group", 1) != 1) return std::nullopt;
  const Readers readers = value_readers(g);
  SiblingConvsMatch m;
  m.concat = sole_reader(g, readers, head.outputs[0]);
  if (m.concat < 0) return std::nullopt;
  const ir::Node& cat = g.nodes[static_cast<size_t>(m.concat)];
  if (cat.op != "Concat" || cat.inputs.size() < 2 || cat.outputs.empty() || cat.outputs[0] < 0) return std::nullopt;
  int64_t axis = cat.attrs.get_int("axis", 0);
  if (axis < 0) axis += 4;
  if (axis != 1) return std::nullopt;
  for (int v : cat.inputs) {
    const ir::Node* producer = v >= 0 ? producer_of(g, v) : nullptr;
    if (!producer) return std::nullopt;
    const int n = static_cast<int>(producer - g.nodes.data());
    const ir::Node& c = *producer;
    if (n < first || !is_plain_conv2d(g, c) || c.input(0) != head.input(0) || c.attrs.get_int("group", 1) != 1 ||
        (c.op == ir::fused::kFusedConv && c.has_input(ir::fused::kResidualInput)) ||
        sole_reader(g, readers, c.outputs[0]) != m.concat ||
        std::find(m.convs.begin(), m.convs.end(), n) != m.convs.end()) {
      return std::nullopt;
    }
    m.convs.push_back(n);
  }
  return m;
}

std::optional<ConvPointwiseMatch> match_conv_pointwise(const ir::Graph& g, int first) {
  const ir::Node& head = g.nodes.at(static_cast<size_t>(first));
  if (!is_plain_conv2d(g, head) || head.attrs.get_int("group", 1) != 1 ||
      (head.op == ir::fused::kFusedConv && head.has_input(ir::fused::kResidualInput))) {
    return std::nullopt;
  }
  ConvPointwiseMatch m;
  int value = head.outputs[0];  // what the 1x1 layer reads
  if (std::optional<SiblingConvsMatch> siblings = match_sibling_convs(g, first)) {
    m.convs = std::move(siblings->convs);
    m.concat = siblings->concat;
    value = g.nodes[static_cast<size_t>(m.concat)].outputs[0];
  } else {
    m.convs = {first};
  }
  const Readers readers = value_readers(g);
  m.pw = sole_reader(g, readers, value);
  if (m.pw < 0 || !is_pointwise_conv(g, g.nodes[static_cast<size_t>(m.pw)], value, false)) return std::nullopt;
  return m;
}

std::vector<int> InvertedResidualMatch::nodes() const {
  std::vector<int> out;
  if (expand >= 0) out.push_back(expand);
  out.push_back(dw);
  if (gate) out.insert(out.end(), {gate->pool, gate->fc1, gate->fc2, gate->mul});
  out.push_back(project);
  return out;
}

std::optional<InvertedResidualMatch> match_inverted_residual(const ir::Graph& g, int first) {
  const ir::Node& head = g.nodes.at(static_cast<size_t>(first));
  if (!is_plain_conv2d(g, head)) return std::nullopt;
  const Readers readers = value_readers(g);
  InvertedResidualMatch m;
  int value = head.input(0);  // what the next layer reads
  if (is_pointwise_conv(g, head, value, false)) {
    m.expand = first;
    value = head.outputs[0];
    m.dw = sole_reader(g, readers, value);
    if (m.dw < 0) return std::nullopt;
  } else {
    m.dw = first;
  }
  const ir::Node& dw = g.nodes[static_cast<size_t>(m.dw)];
  if (!is_depthwise_conv(g, dw, value)) return std::nullopt;
  value = dw.outputs[0];
  m.project = sole_reader(g, readers, value);
  if (m.project < 0) {
    // Read by a gate's pool and its Mul, and nothing else.
    const std::vector<int>& r = readers[static_cast<size_t>(value)];
    if (r.size() != 2 || is_graph_output(g, value)) return std::nullopt;
    for (int reader : r) {
      if (g.nodes[static_cast<size_t>(reader)].op == "GlobalAveragePool") m.gate = match_squeeze_excite(g, reader);
    }
    if (!m.gate || m.gate->x != value) return std::nullopt;
    const int mul = m.gate->mul;
    if (!((r[0] == m.gate->pool && r[1] == mul) || (r[0] == mul && r[1] == m.gate->pool))) return std::nullopt;
    value = g.nodes[static_cast<size_t>(mul)].outputs[0];
    m.project = sole_reader(g, readers, value);
    if (m.project < 0) return std::nullopt;
  }
  // The block runs where its first node is: a residual must be ready by then.
  const ir::Node& pj = g.nodes[static_cast<size_t>(m.project)];
  if (!is_pointwise_conv(g, pj, value, true) || !residual_ready(g, pj, first)) return std::nullopt;
  return m;
}

}  // namespace cnnrt::passes
