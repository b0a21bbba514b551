// Offers a LeNet-class chain (passes/chain_match.hpp) to the one-launch chain kernel.
//
// The candidates are the kernel's cluster sizes, each both as built and as compiled for these shapes at plan
// time ("_jit", kernels/conv_chain_jit.hpp; CNNRT_NO_JIT=1 leaves those out), and, as the reference, the
// chain's own steps replayed back to back over a workspace that holds their intermediates. The tuner runs the
// reference first, drops any candidate that disagrees with it, and keeps the fastest; the choice is cached
// like every other.
#include "plan/gpu/lower_chain.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "core/log.hpp"
#include "ir/fused.hpp"
#include "kernels/conv_chain.cuh"
#include "kernels/conv_chain_jit.hpp"
#include "kernels/conv_pw.cuh"
#include "kernels/conv2d_wg.cuh"
#include "kernels/dense_chain.cuh"
#include "kernels/dense_layer.cuh"
#include "kernels/dw_pw.cuh"
#include "kernels/mbconv.cuh"
#include "kernels/squeeze_excite.cuh"
#include "passes/passes.hpp"
#include "plan/gpu/conv_step.hpp"
#include "plan/gpu/lower_util.hpp"
#include "plan/gpu/tuner.hpp"

namespace cnnrt::plan {

namespace {

constexpr int kChainFirstUpToBatch = 32;  // without measurement, the chain kernel is the choice up to here
constexpr int64_t kDenseChainUpToBatch = passes::kDenseHeadMaxBatch;  // the dense chain kernel is offered up to
                                                                       // here (one cluster an image)
constexpr int64_t kDenseChainMaxWeightFloats = int64_t(1) << 20;  // 4 MB: above what 16 ranks can stage

// A variant compiled for the chain's shapes on its first launch (the tuner's check run, or prepare() once
// chosen; never inside a graph capture). Where NVRTC or the load fails, the variant as built runs instead,
// with one warning: same code, same results.
class PlanTimeChain {
 public:
  PlanTimeChain(kernels::ConvChainDesc d, kernels::ConvChainVariant v) : d_(d), v_(std::move(v)) {}

  void prepare() {
    std::call_once(once_, [this] {
      try {
        compiled_ = std::make_unique<kernels::ChainJitKernel>(d_, v_);
        log().debug("{}_jit: compiled in {:.2f} s", v_.name, compiled_->compile_seconds());
      } catch (const std::exception& e) {
        log().warn("{}_jit: {}; the kernel as built runs instead", v_.name, e.what());
      }
    });
  }

  void launch(const float* x, float* y, cudaStream_t s, bool image_once = false, unsigned* done = nullptr) {
    prepare();
    if (compiled_) {
      compiled_->launch(x, y, d_, s, image_once, done);
    } else {
      kernels::launch_conv_chain(v_, x, y, d_, s, image_once, done);
    }
  }

 private:
  kernels::ConvChainDesc d_;
  kernels::ConvChainVariant v_;
  std::once_flag once_;
  std::unique_ptr<kernels::ChainJitKernel> compiled_;
};

kernels::ChainConv chain_conv(const ConvStep& cs, const float* weights) {
  return {cs.layer.g, cs.layer.e, weights};
}

}  // namespace

// Gemm's B as [N][K] with alpha folded in, and beta * C as [N] (empty when there is no C).
DenseWeights dense_weights(const ir::Node& d, const ir::Graph& g) {
  const ir::HostTensor& b = *g.constant_of(d.input(1));
  const bool trans_b = d.attrs.get_int("transB", 0) != 0;
  const float alpha = d.attrs.get_float("alpha", 1.0f), beta = d.attrs.get_float("beta", 1.0f);
  DenseWeights out;
  out.n = b.shape()[trans_b ? 0 : 1];
  out.k = b.shape()[trans_b ? 1 : 0];
  out.w.resize(static_cast<size_t>(out.n * out.k));
  const float* src = b.f32();
  for (int64_t i = 0; i < out.n; ++i) {
    for (int64_t p = 0; p < out.k; ++p) out.w[i * out.k + p] = alpha * src[trans_b ? i * out.k + p : p * out.n + i];
  }
  if (d.has_input(2)) {
    const ir::HostTensor& c = *g.constant_of(d.input(2));
    out.bias.resize(static_cast<size_t>(out.n));
    for (int64_t i = 0; i < out.n; ++i) out.bias[i] = beta * c.f32()[c.numel() == 1 ? 0 : i];
  }
  return out;
}


TuningLayout::TuningLayout(std::vector<int> in_slots, int out_slot, const SlotAliases* aliases, LowerContext& lc)
    : in_slots_(std::move(in_slots)), out_slot_(out_slot), aliases_(aliases), lc_(lc) {}

TuningLayout::Ref TuningLayout::ref(int slot) {
  int64_t bytes = 0;
  if (aliases_) {
    if (auto at = aliases_->find(slot); at != aliases_->end()) std::tie(slot, bytes) = at->second;
  }
  Ref r;
  r.offset = bytes / static_cast<int64_t>(sizeof(float));
  const Slot& s = lc_.slot_info(slot);
  if (auto at = std::find(in_slots_.begin(), in_slots_.end(), slot); at != in_slots_.end()) {
    r.kind = Ref::Input;
    r.input = static_cast<size_t>(at - in_slots_.begin());
  } else if (slot == out_slot_) {
    r.kind = Ref::Output;
  } else if (s.kind == SlotKind::Weight) {
    r.pointer = s.weight;
  } else {
    CNNRT_CHECK(s.kind == SlotKind::Arena, ErrorCode::Internal, "fused steps read graph input or output '{}'", s.name);
    auto [it, added] = regions_.emplace(slot, workspace_);
    if (added) workspace_ += (s.bytes / 4 + 63) / 64 * 64;  // 256-byte aligned regions
    r.kind = Ref::Workspace;
    r.offset += it->second;
  }
  return r;
}

float* TuningLayout::resolve(const Ref& r, const float* const* in, size_t n_in, float* const* out) {
  switch (r.kind) {
    case Ref::Input: return const_cast<float*>(in[r.input]) + r.offset;
    case Ref::Output: return out[0] + r.offset;
    case Ref::Workspace: return const_cast<float*>(in[n_in]) + r.offset;  // the workspace follows the inputs
    default: return const_cast<float*>(r.pointer);
  }
}

LaunchFn replay_launch(const std::vector<Step>& steps, TuningLayout& layout) {
  struct Replayed {
    LaunchFn launch;
    std::vector<TuningLayout::Ref> in, out;
  };
  auto replay = std::make_shared<std::vector<Replayed>>();
  for (const Step& step : steps) {
    Replayed r{step.launch, {}, {}};
    for (int s : step.inputs) r.in.push_back(layout.ref(s));
    for (int s : step.outputs) r.out.push_back(layout.ref(s));
    replay->push_back(std::move(r));
  }
  const size_t n_in = layout.inputs();
  return [replay, n_in](const float* const* in, float* const* out, Stream s) {
    std::vector<const float*> ins;
    std::vector<float*> outs;
    for (const Replayed& r : *replay) {
      ins.clear();
      outs.clear();
      for (const TuningLayout::Ref& x : r.in) ins.push_back(TuningLayout::resolve(x, in, n_in, out));
      for (const TuningLayout::Ref& x : r.out) outs.push_back(TuningLayout::resolve(x, in, n_in, out));
      r.launch(ins.data(), outs.data(), s);
    }
  };
}

KernelCandidate replay_candidate(const std::vector<Step>& steps, const std::vector<int>& in_slots, int out_slot,
                                 LowerContext& lc, const SlotAliases* aliases) {
  TuningLayout layout(in_slots, out_slot, aliases, lc);
  KernelCandidate c;
  c.name = "separate_steps";
  c.config = fmt::format("{} steps", steps.size());
  c.reference = true;
  c.contender = true;  // the plan keeps the steps where they beat every fused kernel
  c.launch = replay_launch(steps, layout);
  c.workspace_floats = layout.workspace_floats();
  return c;
}

// How a choice was made, for the plan's note: every candidate's time, fastest first, or how it was chosen.
std::string timing_text(const Choice& choice) {
  if (choice.timings.empty()) return choice.how;
  std::string t;
  for (const Candidate& c : choice.timings) t += fmt::format("{}{} {:.2f} us", t.empty() ? "" : ", ", c.kernel, c.median_us);
  return t;
}

namespace {

// The one step of the kernel `chosen` that replaces `steps`, the lowering of graph nodes `nodes` (in order;
// `last` makes the output): it covers their ONNX nodes and counts their flops.
Step replacing_step(const char* op, const std::vector<int>& nodes, const ir::Node& last, const KernelCandidate& chosen,
                    const Choice& choice, const std::vector<Step>& steps, const std::vector<int>& in_slots,
                    int out_slot, const std::string& what, LowerContext& lc) {
  ir::Node covered;
  covered.op = op;
  for (int n : nodes) {
    const auto& c = lc.graph.nodes[static_cast<size_t>(n)].covers;
    covered.covers.insert(covered.covers.end(), c.begin(), c.end());
  }
  covered.outputs = last.outputs;
  Step step = lc.make_step(covered, chosen.name, chosen.config + ", " + choice.how, in_slots, {out_slot}, chosen.launch);
  step.launch_from_host = chosen.launch_from_host;
  step.signals_done = chosen.signals_done;
  step.candidates = choice.timings;
  for (const Step& s : steps) step.flops += s.flops;
  step.replaced = std::make_shared<const std::vector<Step>>(steps);
  return step;
}

// A fused step of candidate `c` that replaces `replaced`.
using MakeFused = std::function<Step(const KernelCandidate& c, const std::vector<Step>& replaced)>;

// The tuner's choice between fused kernels and the replay of `steps` (candidates[choice.index]): one step of the
// winning kernel, built by `make`, with the kernels measured close to it as alternatives; or `steps` where they win,
// with the fastest fused kernel measured close to them (close_candidates) offered to the first of them (Step::fused)
// for the whole-plan check. The plan's note says which, with the timings.
std::vector<Step> fused_or_steps(const Choice& choice, const std::vector<KernelCandidate>& candidates,
                                 std::vector<Step> steps, const std::string& what, LowerContext& lc,
                                 const MakeFused& make, const char* steps_note = "separate steps") {
  const KernelCandidate& chosen = candidates[choice.index];
  if (chosen.reference) {
    lc.note(fmt::format("{}: {} ({})", what, steps_note, timing_text(choice)));
    const auto close = close_candidates(choice, candidates);
    if (!steps.empty() && !close.empty()) {
      steps.front().fused = std::make_shared<const Step>(make(*close[0].first, steps));
    }
    return steps;
  }
  Step step = make(chosen, steps);
  step.alternatives = close_alternatives(choice, candidates);
  lc.note(fmt::format("{}: one launch, {} ({})", what, chosen.name, timing_text(choice)));
  return {std::move(step)};
}

// A dense layer's weights padded to whole float4s, as the kernels' bulk copies read them.
void pad_to_float4(std::vector<float>& v) {
  v.resize((v.size() + kernels::kChainTailAlign - 1) / kernels::kChainTailAlign * kernels::kChainTailAlign, 0.0f);
}

// The chain kernel for `m` (with its tail of dense layers), measured against `steps`, the chain's nodes
// lowered one by one: the chain step where it wins, nullopt where it does not or cannot run (a note says why).
std::optional<Step> chain_step(const passes::ConvChainMatch& m, const std::vector<Step>& steps, LowerContext& lc) {
  const ir::Graph& g = lc.graph;
  const ir::Node& na = g.nodes[static_cast<size_t>(m.conv_a)];
  const ir::Node& nb = g.nodes[static_cast<size_t>(m.conv_b)];
  const ir::Node& nd = g.nodes[static_cast<size_t>(m.dense)];
  const ir::Node& last = m.tail.empty() ? nd : g.nodes[static_cast<size_t>(m.tail.back())];
  const ConvStep ca = describe_conv(na, lc);
  const ConvStep cb = describe_conv(nb, lc);
  const std::string what = fmt::format("conv chain {} .. {}", ir::node_short_name(na), ir::node_short_name(last));
  // Stride, dilation, groups and residual were checked by passes::match_conv_chain; the kernel sizes are left.
  if (ca.layer.g.KH != ca.layer.g.KW || cb.layer.g.KH != cb.layer.g.KW) {
    lc.note(fmt::format("{}: separate steps (a kernel is not square)", what));
    return std::nullopt;
  }
  kernels::ConvChainDesc d;
  d.batch = ca.layer.g.N;
  d.a = chain_conv(ca, lc.weight(na.input(1)));
  d.b = chain_conv(cb, lc.weight(nb.input(1)));
  // The dense layers: fc, then the tail's.
  static_assert(passes::kMaxChainTail <= kernels::kChainTailMax);
  std::vector<const ir::Node*> dense_nodes = {&nd};
  for (int t : m.tail) dense_nodes.push_back(&g.nodes[static_cast<size_t>(t)]);
  std::vector<DenseWeights> dense;
  for (const ir::Node* n : dense_nodes) dense.push_back(dense_weights(*n, g));
  d.tail_count = static_cast<int>(m.tail.size());
  auto describe_dense = [](kernels::ChainDense& out, const ir::Node& n, const DenseWeights& w) {
    out.N = static_cast<int>(w.n);
    const KernelActivation act = n.op == ir::fused::kFusedGemm ? kernel_activation(n) : KernelActivation{};
    out.act = act.act;
    out.alpha = act.alpha;
    out.beta = act.beta;
  };
  for (size_t i = 0; i < dense_nodes.size(); ++i) describe_dense(i == 0 ? d.fc : d.tail[i - 1], *dense_nodes[i], dense[i]);
  const int smem_optin = static_cast<int>(lc.context.device.smem_per_block_optin);
  if (lc.context.device.arch() < 90) {
    lc.note(fmt::format("{}: separate steps (the chain kernel needs thread-block clusters: compute capability 9.0)",
                        what));
    return std::nullopt;
  }
  std::string why;
  if (dense[0].k != int64_t(d.b.g.F) * d.b.PH() * d.b.PW() || !kernels::conv_chain_supports(d, smem_optin, &why)) {
    lc.note(fmt::format("{}: separate steps ({})", what, why.empty() ? "Gemm inner size mismatch" : why));
    return std::nullopt;
  }
  for (size_t i = 0; i < dense.size(); ++i) {
    kernels::ChainDense& out = i == 0 ? d.fc : d.tail[i - 1];
    if (i > 0) {  // the tail's arrive by bulk copies of whole float4s
      pad_to_float4(dense[i].w);
      pad_to_float4(dense[i].bias);
    }
    out.weights = i == 0 ? lc.context.weights.upload(kernels::chain_fc_weights(dense[i].w, d), "chain_dense_fnp")
                         : lc.context.weights.upload(dense[i].w, "chain_tail_nk");
    out.bias = dense[i].bias.empty() ? nullptr : lc.context.weights.upload(dense[i].bias, i == 0 ? "chain_dense_bias" : "chain_tail_bias");
  }

  const int in_slot = lc.slot(na.input(0));
  const int out_slot = lc.slot(last.outputs.at(0));
  std::vector<KernelCandidate> candidates;
  const std::vector<kernels::ConvChainVariant> variants = kernels::conv_chain_variants(d, smem_optin);
  for (const kernels::ConvChainVariant& v : variants) {
    candidates.push_back({v.name, fmt::format("one cluster of {} blocks per image", v.layout.ranks),
                          [v, d](const float* const* in, float* const* out, Stream s) {
                            kernels::launch_conv_chain(v, in[0], out[0], d, s);
                          }});
    candidates.back().launch_from_host = [v, d](const float* const* in, float* const* out, unsigned* done, Stream s) {
      kernels::launch_conv_chain(v, in[0], out[0], d, s, true, d.batch == 1 ? done : nullptr);
    };
    candidates.back().signals_done = d.batch == 1;
  }
  // The same variants compiled for these shapes (after the built ones: index 0 stays the heuristic choice,
  // and --force-kernel NAME finds the built kernel first).
  std::map<std::string, std::shared_ptr<PlanTimeChain>> compiled;
  if (plan_time_compilation()) {
    for (const kernels::ConvChainVariant& v : variants) {
      auto jit = std::make_shared<PlanTimeChain>(d, v);
      compiled[v.name + "_jit"] = jit;
      candidates.push_back({v.name + "_jit",
                            fmt::format("one cluster of {} blocks per image, compiled for these shapes", v.layout.ranks),
                            [jit](const float* const* in, float* const* out, Stream s) {
                              jit->launch(in[0], out[0], s);
                            }});
      candidates.back().launch_from_host = [jit, d](const float* const* in, float* const* out, unsigned* done, Stream s) {
        jit->launch(in[0], out[0], s, true, d.batch == 1 ? done : nullptr);
      };
      candidates.back().signals_done = d.batch == 1;
    }
  }
  KernelCandidate reference = replay_candidate(steps, {in_slot}, out_slot, lc);
  if (d.batch <= kChainFirstUpToBatch) {
    candidates.push_back(std::move(reference));
  } else {
    candidates.insert(candidates.begin(), std::move(reference));
  }
  TuneShapes shapes;
  shapes.input_floats = {ir::numel(input_shape(lc, na, 0))};
  shapes.output_floats = ir::numel(output_shape(lc, last));
  std::string signature = fmt::format("chain [{}] [{}]", ca.signature, cb.signature);
  for (size_t i = 0; i < dense.size(); ++i) {
    const ir::Node& n = *dense_nodes[i];
    const kernels::ChainDense& k = i == 0 ? d.fc : d.tail[i - 1];
    signature += fmt::format(" dense n={} k={} transB={} alpha={} beta={} c={} act={} {} {}", dense[i].n, dense[i].k,
                             n.attrs.get_int("transB", 0), n.attrs.get_float("alpha", 1.0f),
                             n.attrs.get_float("beta", 1.0f), n.has_input(2), static_cast<int>(k.act), k.alpha, k.beta);
  }
  const Choice choice = choose_kernel(lc, signature, candidates, shapes);
  const KernelCandidate& chosen = candidates[choice.index];
  if (auto it = compiled.find(chosen.name); it != compiled.end()) it->second->prepare();  // before any capture
  const std::string timing = timing_text(choice);
  if (chosen.reference) {
    lc.note(fmt::format("{}: separate steps ({})", what, timing));
    return std::nullopt;
  }
  std::vector<int> nodes = {m.conv_a, m.conv_b};
  nodes.insert(nodes.end(), m.views.begin(), m.views.end());
  nodes.push_back(m.dense);
  nodes.insert(nodes.end(), m.tail.begin(), m.tail.end());
  Step step = replacing_step("ConvChain", nodes, last, chosen, choice, steps, {in_slot}, out_slot, what, lc);
  lc.note(fmt::format("{}: one launch, {} ({})", what, chosen.name, timing_text(choice)));
  step.min_bytes = 4.0 * (double(shapes.input_floats[0]) + double(shapes.output_floats) +
                          double(d.a.g.F) * d.a.g.KH * d.a.g.KW + double(d.b.g.F) * d.b.g.C * d.b.g.KH * d.b.g.KW);
  for (const DenseWeights& w : dense) step.min_bytes += 4.0 * double(w.w.size());
  return step;
}

}  // namespace

namespace {

// The node a dense head starts at: its convolution, its pool or its first Gemm.
const ir::Node& head_first(const passes::DenseChainMatch& m, const ir::Graph& g) {
  return g.nodes[static_cast<size_t>(m.conv >= 0 ? m.conv : m.pool >= 0 ? m.pool : m.layers.front())];
}

// The head's extents as the kernel takes them: images, the first layer's inputs, the pool, the convolution's
// channels, the layers and their outputs (no weights, no activations).
kernels::DenseChainDesc head_extents(const passes::DenseChainMatch& m, const LowerContext& lc) {
  const ir::Node& first = head_first(m, lc.graph);
  // [batch, k], or [batch, k, spatial...] with the pool, [batch, channels, spatial...] with the convolution
  const ir::Shape& in_shape = input_shape(lc, first, 0);
  kernels::DenseChainDesc d;
  d.batch = static_cast<int>(in_shape[0]);
  d.k = static_cast<int>(in_shape[1]);
  d.pool = m.pool >= 0 ? static_cast<int>(product(in_shape, 2)) : 1;
  d.count = static_cast<int>(m.layers.size());
  if (m.conv >= 0) {
    d.conv.channels = d.k;
    d.k = static_cast<int>(output_shape(lc, first)[1]);
  }
  for (size_t i = 0; i < m.layers.size(); ++i) {
    d.layers[i].N = static_cast<int>(output_shape(lc, lc.graph.nodes[static_cast<size_t>(m.layers[i])]).back());
  }
  return d;
}

}  // namespace

size_t dense_chain_layers_that_fit(const passes::DenseChainMatch& m, const LowerContext& lc) {
  kernels::DenseChainDesc d = head_extents(m, lc);
  const int smem_optin = static_cast<int>(lc.context.device.smem_per_block_optin);
  for (size_t count = m.layers.size(); count >= 1; --count) {
    d.count = static_cast<int>(count);
    if (kernels::dense_chain_supports(d, smem_optin)) return count;
  }
  return m.layers.size();
}

std::vector<Step> lower_dense_chain(const passes::DenseChainMatch& m, std::vector<Step> steps, LowerContext& lc) {
  const ir::Graph& g = lc.graph;
  const ir::Node& first = head_first(m, g);
  const ir::Node& last = g.nodes[static_cast<size_t>(m.layers.back())];
  const std::string what = fmt::format("dense chain {} .. {}", ir::node_short_name(first), ir::node_short_name(last));
  const ir::Shape in_shape = input_shape(lc, first, 0);
  kernels::DenseChainDesc d = head_extents(m, lc);
  if (lc.context.device.arch() < 90) return steps;  // (bulk copies and clusters: compute capability 9.0)
  if (d.batch > kDenseChainUpToBatch) {
    lc.note(fmt::format("{}: separate steps (batch {}: one cluster an image pays off up to batch {})", what, d.batch,
                        kDenseChainUpToBatch));
    return steps;
  }
  static_assert(passes::kMaxDenseChain <= kernels::kDenseChainMax);
  // The kernel stages every weight in shared memory (16 ranks of at most 200 KB): a head far larger keeps its
  // steps before anything is copied or transposed on the host (VGG-16's head is 0.5 GB).
  int64_t weight_floats = 0;
  for (int n : m.layers) weight_floats += g.constant_of(g.nodes[static_cast<size_t>(n)].input(1))->numel();
  if (m.conv >= 0) weight_floats += g.constant_of(first.input(1))->numel();
  if (weight_floats > kDenseChainMaxWeightFloats) {
    lc.note(fmt::format("{}: separate steps ({:.1f} MB of weights: more than the kernel stages)", what,
                        4e-6 * double(weight_floats)));
    return steps;
  }
  std::vector<DenseWeights> dense;
  std::string signature = fmt::format("dense chain batch={} k={} pool={}", d.batch, d.k, d.pool);
  if (m.conv >= 0) {
    const KernelActivation act = first.op == ir::fused::kFusedConv ? kernel_activation(first) : KernelActivation{};
    d.conv.act = act.act;
    d.conv.alpha = act.alpha;
    d.conv.beta = act.beta;
    signature += fmt::format(" | conv c={} bias={} act={} {} {}", d.conv.channels, first.has_input(2),
                             static_cast<int>(act.act), act.alpha, act.beta);
  }
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const ir::Node& n = g.nodes[static_cast<size_t>(m.layers[i])];
    dense.push_back(dense_weights(n, g));
    kernels::ChainDense& out = d.layers[i];
    out.N = static_cast<int>(dense[i].n);
    const KernelActivation act = n.op == ir::fused::kFusedGemm ? kernel_activation(n) : KernelActivation{};
    out.act = act.act;
    out.alpha = act.alpha;
    out.beta = act.beta;
    signature += fmt::format(" | n={} k={} transB={} alpha={} beta={} c={} act={} {} {}", dense[i].n, dense[i].k,
                             n.attrs.get_int("transB", 0), n.attrs.get_float("alpha", 1.0f), n.attrs.get_float("beta", 1.0f),
                             n.has_input(2), static_cast<int>(out.act), out.alpha, out.beta);
  }
  const int smem_optin = static_cast<int>(lc.context.device.smem_per_block_optin);
  std::string why;
  if (!kernels::dense_chain_supports(d, smem_optin, &why)) {
    lc.note(fmt::format("{}: separate steps ({})", what, why));
    return steps;
  }
  for (size_t i = 0; i < dense.size(); ++i) {
    pad_to_float4(dense[i].bias);
    if (!dense[i].bias.empty()) d.layers[i].bias = lc.context.weights.upload(dense[i].bias, "chain_tail_bias");
    if (i > 0) {
      pad_to_float4(dense[i].w);
      d.layers[i].weights = lc.context.weights.upload(dense[i].w, "chain_tail_nk");
    }
  }
  if (m.conv >= 0 && first.has_input(2)) d.conv.bias = lc.weight(first.input(2));
  std::vector<KernelCandidate> candidates;
  for (const kernels::DenseChainVariant& v : kernels::dense_chain_variants(d, smem_optin)) {
    kernels::DenseChainDesc dv = d;  // the first layer's weights (and the convolution's) in this cluster size's layout
    dv.layers[0].weights = lc.context.weights.upload(kernels::dense_chain_weights(dense[0].w, d, v.layout),
                                                     fmt::format("dense_chain_r{}{}", v.layout.ranks,
                                                                 v.layout.by_thread ? "_t" : ""));
    if (m.conv >= 0) {
      const std::vector<float>& kc = g.constant_of(first.input(1))->float_values();  // [k][channels]
      dv.conv.weights = lc.context.weights.upload(kernels::dense_chain_conv_weights(kc, d, v.layout),
                                                  fmt::format("dense_chain_conv_r{}", v.layout.ranks));
    }
    const char* conv_text = m.conv >= 0 ? ", the 1x1 convolution's filters split over the blocks" : "";
    candidates.push_back({v.name, fmt::format("one cluster of {} blocks per image, an output a {}{}", v.layout.ranks,
                                              v.layout.by_thread ? "thread" : "warp", conv_text),
                          [v, dv](const float* const* in, float* const* out, Stream s) {
                            kernels::launch_dense_chain(v, in[0], out[0], dv, s);
                          }});
    candidates.back().launch_from_host = [v, dv](const float* const* in, float* const* out, unsigned* done, Stream s) {
      kernels::launch_dense_chain(v, in[0], out[0], dv, s, dv.batch == 1 ? done : nullptr);
    };
    candidates.back().signals_done = dv.batch == 1;
  }
  const int in_slot = lc.slot(first.input(0));
  const int out_slot = lc.slot(last.outputs.at(0));
  candidates.push_back(replay_candidate(steps, {in_slot}, out_slot, lc));
  TuneShapes shapes;
  shapes.input_floats = {ir::numel(in_shape)};
  shapes.output_floats = ir::numel(output_shape(lc, last));
  const Choice choice = choose_kernel(lc, signature, candidates, shapes);
  std::vector<int> nodes = m.views;
  if (m.pool >= 0) nodes.insert(nodes.begin(), m.pool);
  if (m.conv >= 0) nodes.insert(nodes.begin(), m.conv);
  nodes.insert(nodes.end(), m.layers.begin(), m.layers.end());
  return fused_or_steps(
      choice, candidates, std::move(steps), what, lc,
      [&](const KernelCandidate& c, const std::vector<Step>& replaced) {
        Step step = replacing_step("DenseChain", nodes, last, c, choice, replaced, {in_slot}, out_slot, what, lc);
        step.min_bytes = 4.0 * (double(shapes.input_floats[0]) + double(shapes.output_floats));
        for (const DenseWeights& w : dense) step.min_bytes += 4.0 * double(w.n * w.k);
        if (m.conv >= 0) step.min_bytes += 4.0 * double(d.k) * d.conv.channels;
        return step;
      });
}

std::vector<Step> lower_squeeze_excite(const passes::SqueezeExciteMatch& m, std::vector<Step> steps, LowerContext& lc) {
  const ir::Graph& g = lc.graph;
  const ir::Node& fc1 = g.nodes[static_cast<size_t>(m.fc1)];
  const ir::Node& fc2 = g.nodes[static_cast<size_t>(m.fc2)];
  const ir::Node& mul = g.nodes[static_cast<size_t>(m.mul)];
  const std::string what = fmt::format("squeeze-excitation {} .. {}", ir::node_short_name(g.nodes[static_cast<size_t>(m.pool)]),
                                       ir::node_short_name(mul));
  const ir::Shape& x = g.shape_of(m.x);
  const ir::HostTensor& w1 = *g.constant_of(fc1.input(1));
  kernels::SqueezeExciteDesc d;
  d.batch = static_cast<int>(x[0]);
  d.channels = static_cast<int>(x[1]);
  d.hidden = static_cast<int>(w1.shape()[0]);
  d.spatial = static_cast<int>(product(x, 2));
  const KernelActivation act = fc1.op == ir::fused::kFusedConv ? kernel_activation(fc1) : KernelActivation{};
  const KernelActivation gate = fc2.op == ir::fused::kFusedConv ? kernel_activation(fc2) : KernelActivation{};
  d.act = act.act;
  d.act_alpha = act.alpha;
  d.act_beta = act.beta;
  d.gate = gate.act;
  d.gate_alpha = gate.alpha;
  d.gate_beta = gate.beta;
  const std::vector<kernels::SqueezeExciteVariant> variants =
      kernels::squeeze_excite_variants(d, lc.context.device.arch());
  if (variants.empty()) {
    lc.note(fmt::format("{}: separate steps ({} channels of {} values: beyond the kernel's shared memory or 32-bit "
                        "offsets)", what, d.channels, d.spatial));
    return steps;
  }
  d.w1 = lc.weight(fc1.input(1));
  d.w2 = lc.weight(fc2.input(1));
  d.b1 = fc1.has_input(2) ? lc.weight(fc1.input(2)) : nullptr;
  d.b2 = fc2.has_input(2) ? lc.weight(fc2.input(2)) : nullptr;
  std::vector<KernelCandidate> candidates;
  for (const kernels::SqueezeExciteVariant& v : variants) {
    candidates.push_back({v.name,
                          v.ranks > 1 ? fmt::format("one cluster of {} blocks per image", v.ranks)
                                      : std::string("one block per image"),
                          [v, d](const float* const* in, float* const* out, Stream s) {
                            kernels::launch_squeeze_excite(v, in[0], out[0], d, s);
                          }});
  }
  const int in_slot = lc.slot(m.x);
  const int out_slot = lc.slot(mul.outputs.at(0));
  candidates.push_back(replay_candidate(steps, {in_slot}, out_slot, lc));
  TuneShapes shapes;
  shapes.input_floats = {ir::numel(x)};
  shapes.output_floats = ir::numel(x);
  const std::string signature =
      fmt::format("squeeze excite batch={} c={} hidden={} spatial={} b1={} b2={} act={} {} {} gate={} {} {}", d.batch,
                  d.channels, d.hidden, d.spatial, fc1.has_input(2), fc2.has_input(2), static_cast<int>(d.act),
                  d.act_alpha, d.act_beta, static_cast<int>(d.gate), d.gate_alpha, d.gate_beta);
  const Choice choice = choose_kernel(lc, signature, candidates, shapes);
  return fused_or_steps(
      choice, candidates, std::move(steps), what, lc,
      [&](const KernelCandidate& c, const std::vector<Step>& replaced) {
        Step step = replacing_step("SqueezeExcite", {m.pool, m.fc1, m.fc2, m.mul}, mul, c, choice, replaced, {in_slot},
                                   out_slot, what, lc);
        step.min_bytes = 4.0 * (2.0 * double(ir::numel(x)) + 2.0 * double(d.channels) * d.hidden);
        return step;
      });
}

std::vector<Step> lower_conv_chain(const passes::ConvChainMatch& match, std::vector<Step> steps, std::vector<Step> tail_steps,
                                   LowerContext& lc) {
  // With the dense layers after the first where the kernel takes them and wins; else without them (their
  // steps follow the chain's).
  if (!match.tail.empty()) {
    std::vector<Step> all = steps;
    all.insert(all.end(), tail_steps.begin(), tail_steps.end());
    if (std::optional<Step> whole = chain_step(match, all, lc)) return {std::move(*whole)};
  }
  passes::ConvChainMatch head = match;
  head.tail.clear();
  std::vector<Step> out;
  if (std::optional<Step> chain = chain_step(head, steps, lc)) {
    out.push_back(std::move(*chain));
  } else {
    out = std::move(steps);
  }
  for (Step& s : tail_steps) out.push_back(std::move(s));
  return out;
}

std::vector<Step> lower_dw_pw(const passes::DwPwMatch& m, std::vector<Step> steps, LowerContext& lc,
                              const passes::ShuffledDepthwiseMatch* shuffle) {
  const ir::Graph& g = lc.graph;
  const ir::Node& dw = g.nodes[static_cast<size_t>(m.dw)];
  const ir::Node& pw = g.nodes[static_cast<size_t>(m.pw)];
  const ir::Node* tr = shuffle ? &g.nodes[static_cast<size_t>(shuffle->transpose)] : nullptr;
  const std::string what =
      tr ? fmt::format("shuffled depthwise + pointwise {} .. {}", ir::node_short_name(*tr),
                       ir::node_short_name(pw))
         : fmt::format("depthwise + pointwise {} .. {}", ir::node_short_name(dw), ir::node_short_name(pw));
  const ConvStep a = describe_conv(dw, lc);
  const ConvStep b = describe_conv(pw, lc);
  kernels::DwPwDesc d;
  d.dw = a.layer.g;
  d.F = b.layer.g.F;
  d.w_dw = lc.weight(dw.input(1));
  d.dw_epilogue = a.layer.e;
  d.w_pw = lc.weight(pw.input(1));
  d.pw_groups = b.layer.g.groups;
  d.shuffle = shuffle ? shuffle->groups : 1;
  d.pw_epilogue = b.layer.e;
  d.residual = b.layer.residual;
  std::string why;
  if (!kernels::dw_pw_supports(d, &why)) {
    lc.note(fmt::format("{}: separate steps ({})", what, why));
    return steps;
  }
  const int optin = static_cast<int>(lc.context.device.smem_per_block_optin);
  const std::vector<kernels::DwPwVariant> variants = kernels::dw_pw_variants(d, optin, lc.context.device.arch());
  if (variants.empty()) {
    lc.note(fmt::format("{}: separate steps ({} channels: no tile fits shared memory)", what, d.dw.C));
    return steps;
  }
  std::vector<KernelCandidate> candidates;
  for (const kernels::DwPwVariant& v : variants) {
    candidates.push_back({v.name,
                          fmt::format("{}x{} pixels x {} filters a block{}", v.th, v.tw, v.fb,
                                      v.ranks > 1 ? fmt::format(", clusters of {}", v.ranks) : std::string()),
                          [v, d, optin](const float* const* in, float* const* out, Stream s) {
                            kernels::launch_dw_pw(v, in[0], d.residual ? in[1] : nullptr, out[0], d, optin, s);
                          }});
  }
  const int input = tr ? tr->input(0) : dw.input(0);  // the shuffle's input is the tensor in memory
  std::vector<int> in_slots = {lc.slot(input)};
  if (d.residual) in_slots.push_back(lc.slot(pw.input(ir::fused::kResidualInput)));
  const int out_slot = lc.slot(pw.outputs.at(0));
  candidates.push_back(replay_candidate(steps, in_slots, out_slot, lc));
  TuneShapes shapes;
  shapes.input_floats = {ir::numel(g.shape_of(input))};
  if (d.residual) shapes.input_floats.push_back(b.layer.conv_floats());
  shapes.output_floats = b.layer.out_floats();
  const std::string signature = "dw_pw [" + a.signature + "] [" + b.signature + "]" +
                                (tr ? fmt::format(" shuffle {}", d.shuffle) : std::string());
  const Choice choice = choose_kernel(lc, signature, candidates, shapes);
  std::vector<int> nodes = shuffle ? shuffle->nodes() : std::vector<int>{m.dw};  // (a shuffle's ends at m.dw)
  nodes.push_back(m.pw);
  return fused_or_steps(
      choice, candidates, std::move(steps), what, lc,
      [&](const KernelCandidate& c, const std::vector<Step>& replaced) {
        Step step = replacing_step("DepthwisePointwise", nodes, pw, c, choice, replaced, in_slots, out_slot, what, lc);
        step.min_bytes = 4.0 * (double(shapes.input_floats[0]) +
                                double(a.layer.g.C) * (a.layer.g.KH * a.layer.g.KW + d.F) +
                                double(b.layer.out_floats()) * (d.residual ? 2.0 : 1.0));
        return step;
      });
}


namespace {

// Measures `candidates` (kernels of the fused layer `L`, and last the replay of `steps`) on `shapes`; where a kernel
// wins, one step of kind `op` replacing `nodes` (the last of them `last`), reading `in_slots` and writing `out_slot`;
// else `steps`, with a note saying why.
std::vector<Step> choose_fused_conv(const kernels::ConvLayer& L, const float* w_device, double weight_floats,
                                    const std::vector<KernelCandidate>& candidates, const TuneShapes& shapes,
                                    const std::vector<int>& in_slots, int out_slot, const std::string& signature,
                                    const char* op, const std::vector<int>& nodes, const ir::Node& last,
                                    const std::string& what, std::vector<Step> steps, LowerContext& lc) {
  const Choice choice = choose_kernel(lc, signature, candidates, shapes);
  return fused_or_steps(
      choice, candidates, std::move(steps), what, lc,
      [&](const KernelCandidate& c, const std::vector<Step>& replaced) {
        std::vector<int> inputs = in_slots;
        if (c.workspace_floats > 0) inputs.push_back(lc.workspace(c.workspace_floats * 4, "conv workspace"));
        Step step = replacing_step(op, nodes, last, c, choice, replaced, inputs, out_slot, what, lc);
        step.conv = std::make_shared<ConvStepInfo>(ConvStepInfo{L, w_device, c.workspace_floats});
        step.min_bytes = 4.0 * (double(shapes.input_floats[0]) + weight_floats + double(L.out_floats()) +
                                (L.residual ? double(L.conv_floats()) : 0.0));
        return step;
      });
}

}  // namespace

constexpr double kMergedConvMaxExtraFlops = 1e8;

namespace {

// Sibling convolutions (`m`) as one convolution: the largest filter, every other centred in it by the paddings, so
// that the merged layer's outputs are each layer's outputs in the Concat's order.
struct MergedConv {
  kernels::ConvLayer layer;     // e.bias: the device bias (null where no layer has one)
  std::vector<float> weights;   // [F][C][KH][KW], zeros where a smaller filter has no tap
  std::vector<float> bias;      // [F], zeros where a layer has none; empty where none has one
  std::string signature;
};

// The merged layer, or nullopt with `why` (their filters do not line up; the zero taps would add more than
// kMergedConvMaxExtraFlops, so that large batches do not spend their tuning on a layer that cannot win).
std::optional<MergedConv> merge_sibling_convs(const passes::SiblingConvsMatch& m, LowerContext& lc, std::string& why) {
  const ir::Graph& g = lc.graph;
  MergedConv out;
  std::vector<ConvStep> convs;  // the siblings, in the Concat's order
  for (int n : m.convs) convs.push_back(describe_conv(g.nodes[static_cast<size_t>(n)], lc));
  const kernels::ConvGeometry* big = &convs[0].layer.g;
  for (const ConvStep& c : convs) {
    if (c.layer.g.KH >= big->KH && c.layer.g.KW >= big->KW) big = &c.layer.g;
  }
  std::vector<std::pair<int, int>> origin;  // each layer's filter within the merged one (row, column)
  int F = 0;
  for (const ConvStep& c : convs) {
    const kernels::ConvGeometry& a = c.layer.g;
    const kernels::Epilogue& e = c.layer.e;
    const kernels::Epilogue& e0 = convs[0].layer.e;
    const int oy = big->pad_top - a.pad_top, ox = big->pad_left - a.pad_left;
    if (a.stride_h != big->stride_h || a.stride_w != big->stride_w || a.dil_h != 1 || a.dil_w != 1 ||
        big->dil_h != 1 || big->dil_w != 1) {
      why = "strides or dilations differ";
    } else if (oy < 0 || ox < 0 || oy + a.KH > big->KH || ox + a.KW > big->KW ||
               big->KH - a.KH - oy != big->pad_bottom - a.pad_bottom ||
               big->KW - a.KW - ox != big->pad_right - a.pad_right || a.OH != big->OH || a.OW != big->OW) {
      why = "a filter is not centred in the largest by the paddings";
    } else if (e.param_act != e0.param_act || e.alpha != e0.alpha || e.beta != e0.beta) {
      why = "different activations";
    }
    if (!why.empty()) return std::nullopt;
    origin.push_back({oy, ox});
    F += a.F;
  }
  kernels::ConvLayer& L = out.layer;
  L.g = *big;
  L.g.F = F;
  L.e = convs[0].layer.e;
  L.e.out_image_floats = 0;  // the merged layer writes the whole Concat output (its layers, its strided blocks)
  // The zero taps cost multiply-adds: offered only where they take less than a step's fixed cost (~2 us at the FP32
  // peak, about 100 MFLOP).
  double useful = 0.0;
  for (const ConvStep& c : convs) useful += c.layer.flops();
  const double extra = L.flops() - useful;
  if (extra > kMergedConvMaxExtraFlops) {
    why = fmt::format("merged, the zero taps would add {:.0f} MFLOP", extra / 1e6);
    return std::nullopt;
  }
  // The merged weights [F][C][KH][KW] and bias [F] (zeros where a layer has none).
  const int C = L.g.C, KH = L.g.KH, KW = L.g.KW;
  std::vector<float>& w = out.weights;
  w.assign(static_cast<size_t>(F) * C * KH * KW, 0.0f);
  std::vector<float> bias(static_cast<size_t>(F), 0.0f);
  bool any_bias = false;
  out.signature = "merged";
  for (size_t i = 0, f0 = 0; i < convs.size(); ++i) {
    const ir::Node& node = g.nodes[static_cast<size_t>(m.convs[i])];
    const kernels::ConvGeometry& a = convs[i].layer.g;
    const float* src = g.constant_of(node.input(1))->f32();
    for (int f = 0; f < a.F; ++f) {
      for (int c = 0; c < C; ++c) {
        for (int y = 0; y < a.KH; ++y) {
          for (int x = 0; x < a.KW; ++x) {
            w[(((f0 + f) * C + c) * KH + origin[i].first + y) * KW + origin[i].second + x] =
                src[((static_cast<size_t>(f) * C + c) * a.KH + y) * a.KW + x];
          }
        }
      }
    }
    if (node.has_input(2)) {
      const float* b = g.constant_of(node.input(2))->f32();
      std::copy(b, b + a.F, bias.begin() + static_cast<std::ptrdiff_t>(f0));
      any_bias = true;
    }
    f0 += static_cast<size_t>(a.F);
    out.signature += " [" + convs[i].signature + "]";
  }
  if (any_bias) {
    L.e.bias = lc.context.weights.upload(bias, "merged_conv_bias");
    out.bias = std::move(bias);
  }
  return out;
}

// Where the siblings' Concat runs in place, each sibling's output is its block of the Concat's output (from its first
// image on): so in a replay of their steps too.
SlotAliases concat_block_aliases(const passes::SiblingConvsMatch& m, LowerContext& lc) {
  const ir::Graph& g = lc.graph;
  const int cat_slot = lc.slot(g.nodes[static_cast<size_t>(m.concat)].outputs.at(0));
  SlotAliases aliases;
  int64_t at = 0;
  for (int n : m.convs) {
    const int v = g.nodes[static_cast<size_t>(n)].outputs.at(0);
    const ir::Shape& shape = g.shape_of(v);
    aliases[lc.slot(v)] = {cat_slot, at};
    at += ir::numel(shape) / shape[0] * static_cast<int64_t>(sizeof(float));
  }
  return aliases;
}

}  // namespace

std::vector<Step> lower_sibling_convs(const passes::SiblingConvsMatch& m, std::vector<Step> steps, bool concat_in_place,
                                      LowerContext& lc) {
  const ir::Graph& g = lc.graph;
  const ir::Node& cat = g.nodes[static_cast<size_t>(m.concat)];
  const std::string what = fmt::format("convolutions concatenated by {}", ir::node_short_name(cat));
  std::string why;
  std::optional<MergedConv> merged = merge_sibling_convs(m, lc, why);
  if (!merged) {
    lc.note(fmt::format("{}: separate steps ({})", what, why));
    return steps;
  }
  const kernels::ConvLayer& L = merged->layer;
  const std::vector<float>& w = merged->weights;
  const std::string& signature = merged->signature;
  const std::vector<float>& bias = merged->bias;
  const bool any_bias = !bias.empty();
  const float* w_device = lc.context.weights.upload(w, "merged_conv_fckk");
  std::vector<KernelCandidate> candidates =
      conv_kernel_candidates(L, w.data(), any_bias ? bias.data() : nullptr, w_device, lc);
  if (candidates.empty()) {
    lc.note(fmt::format("{}: separate steps (no kernel runs the merged layer)", what));
    return steps;
  }
  const std::vector<int> in_slots = {lc.slot(g.nodes[static_cast<size_t>(m.convs[0])].input(0))};
  const int out_slot = lc.slot(cat.outputs.at(0));
  const SlotAliases aliases = concat_in_place ? concat_block_aliases(m, lc) : SlotAliases{};
  candidates.push_back(replay_candidate(steps, in_slots, out_slot, lc, concat_in_place ? &aliases : nullptr));
  TuneShapes shapes;
  shapes.input_floats = {ir::numel(g.shape_of(g.nodes[static_cast<size_t>(m.convs[0])].input(0)))};
  shapes.output_floats = L.out_floats();
  std::vector<int> nodes = m.convs;
  nodes.push_back(m.concat);
  return choose_fused_conv(L, w_device, double(w.size()), candidates, shapes, in_slots, out_slot, signature,
                           "MergedConv", nodes, cat, what, std::move(steps), lc);
}

std::vector<Step> lower_conv_pointwise(const passes::ConvPointwiseMatch& m, std::vector<Step> steps,
                                       bool concat_in_place, LowerContext& lc) {
  const ir::Graph& g = lc.graph;
  const ir::Node& first = g.nodes[static_cast<size_t>(m.convs[0])];
  const ir::Node& pw = g.nodes[static_cast<size_t>(m.pw)];
  const std::string what =
      fmt::format("convolution + 1x1 {} .. {}", ir::node_short_name(first), ir::node_short_name(pw));
  // The first layer: the convolution, or its siblings merged.
  kernels::ConvLayer L;
  std::vector<float> merged_weights;
  const float* w_host = nullptr;
  std::string first_signature;
  std::string why;
  if (m.concat >= 0) {
    std::optional<MergedConv> merged =
        merge_sibling_convs(passes::SiblingConvsMatch{m.convs, m.concat}, lc, why);
    if (!merged) {
      lc.note(fmt::format("{}: separate steps ({})", what, why));
      return steps;
    }
    L = merged->layer;
    merged_weights = std::move(merged->weights);
    w_host = merged_weights.data();
    first_signature = merged->signature;
  } else {
    const ConvStep a = describe_conv(first, lc);
    L = a.layer;
    w_host = g.constant_of(first.input(1))->f32();
    first_signature = a.signature;
  }
  const ConvStep b = describe_conv(pw, lc);  // (neither layer has a residual: match_conv_pointwise)
  kernels::ConvPwDesc d;
  d.conv = L.g;
  d.conv_epilogue = L.e;
  d.pw_filters = b.layer.g.F;
  d.pw_epilogue = b.layer.e;
  if (L.in.any()) why = "the first layer reads through a prologue";
  if (!why.empty() || !kernels::conv_pw_supports(d, lc.context.device.arch(), &why)) {
    lc.note(fmt::format("{}: separate steps ({})", what, why));
    return steps;
  }
  const std::vector<kernels::ConvPwVariant> variants = kernels::conv_pw_variants(d, lc.context.device.arch());
  d.w_conv = lc.context.weights.upload(kernels::pack_wg_filters(w_host, L.g.F, L.g.C, L.g.KH, L.g.KW), "conv_pw_wg");
  std::vector<KernelCandidate> candidates;
  d.w_pw = lc.context.weights.upload(  // (every variant has the same n2: the 1x1 filters rounded up)
      kernels::pack_conv_pw_weights(g.constant_of(pw.input(1))->f32(), d.pw_filters, L.g.F, variants[0].n2),
      "conv_pw_1x1");
  for (const kernels::ConvPwVariant& v : variants) {
    candidates.push_back({v.name,
                          fmt::format("64 pixels x 64 filters a block, clusters of {}, reduction split {}, 1x1 "
                                      "product of {} columns", v.ranks, v.split, v.n2),
                          [v, d](const float* const* in, float* const* out, Stream s) {
                            kernels::launch_conv_pw(v, in[0], out[0], d, s);
                          }});
  }
  const std::vector<int> in_slots = {lc.slot(first.input(0))};
  const int out_slot = lc.slot(pw.outputs.at(0));
  const bool aliased = m.concat >= 0 && concat_in_place;
  const SlotAliases aliases =
      aliased ? concat_block_aliases(passes::SiblingConvsMatch{m.convs, m.concat}, lc) : SlotAliases{};
  candidates.push_back(replay_candidate(steps, in_slots, out_slot, lc, aliased ? &aliases : nullptr));
  TuneShapes shapes;
  shapes.input_floats = {ir::numel(g.shape_of(first.input(0)))};
  shapes.output_floats = b.layer.out_floats();
  // Timed a replay at a time: back to back, the fused launch's long reduction overlapped the next one's, and it
  // won pairs that then cost the network time (SqueezeNet's 13x13 pairs at batch 1: 0.5-1.6 us faster back to
  // back, 1.2 us slower a pair in the network); one replay at a time ranks the five as the network does.
  shapes.single_replays = true;
  const std::string signature = "conv_pw [" + first_signature + "] [" + b.signature + "]";
  const Choice choice = choose_kernel(lc, signature, candidates, shapes);
  return fused_or_steps(
      choice, candidates, std::move(steps), what, lc,
      [&](const KernelCandidate& c, const std::vector<Step>& replaced) {
        Step step = replacing_step("ConvPointwise", m.nodes(), pw, c, choice, replaced, in_slots, out_slot, what, lc);
        step.min_bytes = 4.0 * (double(shapes.input_floats[0]) +
                                double(L.g.F) * (L.g.C * L.g.KH * L.g.KW + d.pw_filters) +
                                double(b.layer.out_floats()));
        return step;
      });
}

namespace {

// The convolution `cv` as layer `L`, which reads its input (graph value `x`) through a prologue that replaces the
// producer between them: every registry kernel that runs L measured against `steps` (the producer's and the
// convolution's, replayed); one step covering `nodes` where a kernel wins, else `steps`.
std::vector<Step> read_through_conv(const ir::Node& cv, const kernels::ConvLayer& L, int x, const std::string& signature,
                                    const std::vector<int>& nodes, const char* op, const std::string& what,
                                    std::vector<Step> steps, LowerContext& lc) {
  const ir::Graph& g = lc.graph;
  const ir::HostTensor& w = *g.constant_of(cv.input(1));
  const float* w_device = lc.weight(cv.input(1));
  const ir::HostTensor* bias = cv.has_input(2) ? g.constant_of(cv.input(2)) : nullptr;
  std::vector<KernelCandidate> candidates =
      conv_kernel_candidates(L, w.f32(), bias ? bias->f32() : nullptr, w_device, lc);
  if (candidates.empty()) {
    lc.note(fmt::format("{}: separate steps (no kernel reads through it)", what));
    return steps;
  }
  std::vector<int> in_slots = {lc.slot(x)};
  TuneShapes shapes;
  shapes.input_floats = {L.in_extent_floats()};
  if (L.residual) {
    in_slots.push_back(lc.slot(cv.input(ir::fused::kResidualInput)));
    shapes.input_floats.push_back(ir::numel(g.shape_of(cv.input(ir::fused::kResidualInput))));
  }
  shapes.output_floats = L.out_extent_floats();
  const int out_slot = lc.slot(cv.outputs.at(0));
  candidates.push_back(replay_candidate(steps, in_slots, out_slot, lc));
  return choose_fused_conv(L, w_device, double(w.numel()), candidates, shapes, in_slots, out_slot, signature, op, nodes,
                           cv, what, std::move(steps), lc);
}

}  // namespace

std::vector<Step> lower_shuffled_depthwise(const passes::ShuffledDepthwiseMatch& m, std::vector<Step> steps,
                                           LowerContext& lc) {
  const ir::Node& tr = lc.graph.nodes[static_cast<size_t>(m.transpose)];
  const ir::Node& dw = lc.graph.nodes[static_cast<size_t>(m.dw)];
  const ConvStep cs = describe_conv(dw, lc);
  kernels::ConvLayer L = cs.layer;
  L.in.shuffle = m.groups;
  return read_through_conv(
      dw, L, tr.input(0), fmt::format("{} shuffle {}", cs.signature, m.groups), m.nodes(), "ShuffledConv",
      fmt::format("channel shuffle {} and depthwise {}", ir::node_short_name(tr), ir::node_short_name(dw)),
      std::move(steps), lc);
}

std::vector<Step> lower_affine_conv(const passes::AffineConvMatch& m, std::vector<Step> steps, LowerContext& lc) {
  const ir::Node& bn = lc.graph.nodes[static_cast<size_t>(m.affine)];
  const ir::Node& cv = lc.graph.nodes[static_cast<size_t>(m.conv)];
  const ConvStep cs = describe_conv(cv, lc);
  kernels::ConvLayer L = cs.layer;
  const ChannelAffine affine = batchnorm_affine(bn, lc);
  const KernelActivation act = kernel_activation(bn);
  L.in.scale = affine.scale;
  L.in.shift = affine.shift;
  L.in.act = act.act;
  L.in.alpha = act.alpha;
  L.in.beta = act.beta;
  L.in.image_floats = lc.image_floats(bn.input(0));  // the normalization's input, where it is a strided block
  return read_through_conv(
      cv, L, bn.input(0),
      fmt::format("{} affine act={} {} {}{}", cs.signature, static_cast<int>(act.act), act.alpha, act.beta,
                  L.in.image_floats ? fmt::format(" in_image={}", L.in.image_floats) : std::string()),
      {m.affine, m.conv}, "AffineConv",
      fmt::format("normalization {} read by convolution {}", ir::node_short_name(bn), ir::node_short_name(cv)),
      std::move(steps), lc);
}

std::vector<Step> lower_dense_layer(const passes::DenseLayerMatch& m, std::vector<Step> steps, LowerContext& lc) {
  const ir::Graph& g = lc.graph;
  const ir::Node& bn = g.nodes[static_cast<size_t>(m.affine)];
  const ir::Node& pw = g.nodes[static_cast<size_t>(m.pw)];
  const ir::Node& cv = g.nodes[static_cast<size_t>(m.conv)];
  const std::string what = fmt::format("dense layer {} .. {}", ir::node_short_name(bn), ir::node_short_name(cv));
  const ConvStep d1 = describe_conv(pw, lc);
  const ConvStep d2 = describe_conv(cv, lc);
  const ir::Shape& x = g.shape_of(bn.input(0));
  kernels::DenseLayerDesc d;
  d.batch = static_cast<int>(x[0]);
  d.C = static_cast<int>(x[1]);
  d.H = static_cast<int>(x[2]);
  d.W = static_cast<int>(x[3]);
  d.x_image = lc.image_floats(bn.input(0));  // a strided block of a Concat's output (the running stack), or 0
  const ChannelAffine affine = batchnorm_affine(bn, lc);
  const KernelActivation act0 = kernel_activation(bn);
  d.scale = affine.scale;
  d.shift = affine.shift;
  d.act0 = act0.act;
  d.alpha0 = act0.alpha;
  d.beta0 = act0.beta;
  d.M = d1.layer.g.F;
  d.b1 = d1.layer.e.bias;
  d.act1 = d1.layer.e.param_act;
  d.alpha1 = d1.layer.e.alpha;
  d.beta1 = d1.layer.e.beta;
  d.F = d2.layer.g.F;
  d.b2 = d2.layer.e.bias;
  d.act2 = d2.layer.e.param_act;
  d.alpha2 = d2.layer.e.alpha;
  d.beta2 = d2.layer.e.beta;
  d.y_image = lc.image_floats(cv.outputs.at(0));  // its block of the next Concat's output, or 0
  const ir::HostTensor& w1 = *g.constant_of(pw.input(1));
  const ir::HostTensor& w2 = *g.constant_of(cv.input(1));
  const std::vector<float> packed = kernels::dense_layer_pack(w1.float_values(), w2.float_values(), d);
  const float* w_device = lc.context.weights.upload(packed, "dense_layer");
  d.w1 = w_device;
  d.w2 = w_device + kernels::dense_layer_w2_offset(d);
  std::string why;
  if (!kernels::dense_layer_supports(d, &why)) {
    lc.note(fmt::format("{}: its steps ({})", what, why));
    return steps;
  }
  const int optin = static_cast<int>(lc.context.device.smem_per_block_optin);
  const std::vector<kernels::DenseLayerVariant> variants = kernels::dense_layer_variants(d, optin);
  if (variants.empty()) {
    lc.note(fmt::format("{}: its steps (a tile's input exceeds shared memory)", what));
    return steps;
  }
  const int64_t hw = int64_t(d.H) * d.W;
  const std::vector<int> in_slots = {lc.slot(bn.input(0))};
  const int out_slot = lc.slot(cv.outputs.at(0));
  TuneShapes shapes;
  shapes.input_floats = {d.x_image ? (d.batch - 1) * d.x_image + d.C * hw : d.batch * d.C * hw};
  shapes.output_floats = d.y_image ? (d.batch - 1) * d.y_image + d.F * hw : d.batch * d.F * hw;
  std::vector<KernelCandidate> candidates;
  for (const kernels::DenseLayerVariant& v : variants) {
    const int64_t blocks = int64_t(d.batch) * ((d.H + v.th - 1) / v.th) * ((d.W + v.tw - 1) / v.tw);
    candidates.push_back({v.name, fmt::format("{}x{} output tiles, {} blocks", v.th, v.tw, blocks),
                          [v, d](const float* const* in, float* const* out, Stream s) {
                            kernels::launch_dense_layer(v, in[0], out[0], d, s);
                          }});
  }
  candidates.push_back(replay_candidate(steps, in_slots, out_slot, lc));
  const std::string signature =
      fmt::format("dense_layer affine act={} {} {} in_image={} [{}] [{}] out_image={}", static_cast<int>(d.act0),
                  d.alpha0, d.beta0, d.x_image, d1.signature, d2.signature, d.y_image);
  const Choice choice = choose_kernel(lc, signature, candidates, shapes);
  return fused_or_steps(
      choice, candidates, std::move(steps), what, lc,
      [&](const KernelCandidate& c, const std::vector<Step>& replaced) {
        Step step = replacing_step("DenseLayer", {m.affine, m.pw, m.conv}, cv, c, choice, replaced, in_slots, out_slot,
                                   what, lc);
        step.min_bytes = 4.0 * (double(d.batch) * d.C * hw + double(packed.size()) + double(d.batch) * d.F * hw);
        return step;
      },
      "its steps");
}

std::vector<Step> lower_inverted_residual(const passes::InvertedResidualMatch& m, std::vector<Step> steps,
                                          LowerContext& lc, std::vector<BlockStep>& chosen_blocks) {
  const ir::Graph& g = lc.graph;
  const ir::Node& first = g.nodes[static_cast<size_t>(m.expand >= 0 ? m.expand : m.dw)];
  const ir::Node& dw = g.nodes[static_cast<size_t>(m.dw)];
  const ir::Node& pj = g.nodes[static_cast<size_t>(m.project)];
  const std::string what =
      fmt::format("inverted residual block {} .. {}", ir::node_short_name(first), ir::node_short_name(pj));
  const ConvStep d_dw = describe_conv(dw, lc);
  const ConvStep d_pj = describe_conv(pj, lc);
  const ir::Shape& x = g.shape_of(first.input(0));
  kernels::MbconvDesc d;
  d.batch = static_cast<int>(x[0]);
  d.C = static_cast<int>(x[1]);
  d.H = static_cast<int>(x[2]);
  d.W = static_cast<int>(x[3]);
  d.hidden = d_dw.layer.g.C;
  std::string signature = "mbconv";
  if (m.expand >= 0) {
    const ConvStep e = describe_conv(first, lc);
    d.expand = true;
    d.w_exp = lc.weight(first.input(1));
    d.exp_epilogue = e.layer.e;
    signature += " [" + e.signature + "]";
  }
  d.dw = d_dw.layer.g;
  d.w_dw = lc.weight(dw.input(1));
  d.dw_epilogue = d_dw.layer.e;
  signature += " [" + d_dw.signature + "]";
  if (m.gate) {
    const ir::Node& fc1 = g.nodes[static_cast<size_t>(m.gate->fc1)];
    const ir::Node& fc2 = g.nodes[static_cast<size_t>(m.gate->fc2)];
    const KernelActivation act = fc1.op == ir::fused::kFusedConv ? kernel_activation(fc1) : KernelActivation{};
    const KernelActivation gate = fc2.op == ir::fused::kFusedConv ? kernel_activation(fc2) : KernelActivation{};
    d.squeeze = static_cast<int>(g.constant_of(fc1.input(1))->shape()[0]);
    d.w_se1 = lc.weight(fc1.input(1));
    d.b_se1 = fc1.has_input(2) ? lc.weight(fc1.input(2)) : nullptr;
    d.se_act = act.act;
    d.se_alpha = act.alpha;
    d.se_beta = act.beta;
    d.w_se2 = lc.weight(fc2.input(1));
    d.b_se2 = fc2.has_input(2) ? lc.weight(fc2.input(2)) : nullptr;
    d.se_gate = gate.act;
    d.gate_alpha = gate.alpha;
    d.gate_beta = gate.beta;
    signature += fmt::format(" gate squeeze={} b1={} b2={} act={} {} {} gate={} {} {}", d.squeeze, fc1.has_input(2),
                             fc2.has_input(2), static_cast<int>(d.se_act), d.se_alpha, d.se_beta,
                             static_cast<int>(d.se_gate), d.gate_alpha, d.gate_beta);
  }
  d.F = d_pj.layer.g.F;
  d.w_pj = lc.weight(pj.input(1));
  d.pj_epilogue = d_pj.layer.e;
  d.residual = d_pj.layer.residual;
  signature += " [" + d_pj.signature + "]";
  std::string why;
  if (!kernels::mbconv_supports(d, &why)) {
    lc.note(fmt::format("{}: its steps ({})", what, why));
    return steps;
  }
  const int optin = static_cast<int>(lc.context.device.smem_per_block_optin);
  const std::vector<kernels::MbconvVariant> variants = kernels::mbconv_variants(d, optin, lc.context.device.arch());
  if (variants.empty()) {
    if (d.batch <= kernels::kMbconvMaxBatch) {
      lc.note(fmt::format("{}: its steps (a block's share of the maps exceeds shared memory)", what));
    }
    return steps;
  }
  // The split's own layouts of the project and gate weights, uploaded only where a split variant is offered.
  if (std::any_of(variants.begin(), variants.end(), [](const kernels::MbconvVariant& v) { return v.split_channels > 0; })) {
    const std::vector<float> no_gate;
    const std::vector<float>& se2 =
        m.gate ? g.constant_of(g.nodes[static_cast<size_t>(m.gate->fc2)].input(1))->float_values() : no_gate;
    d.w_split = lc.context.weights.upload(
        kernels::mbconv_split_pack(g.constant_of(pj.input(1))->float_values(), se2, d), "mbconv_split");
  }
  // The inputs: the block's, and the residual where it is another value (usually it is the block's input).
  std::vector<int> in_slots = {lc.slot(first.input(0))};
  TuneShapes shapes;
  shapes.input_floats = {ir::numel(x)};
  size_t residual_in = 0;
  if (d.residual) {
    const int r = lc.slot(pj.input(ir::fused::kResidualInput));
    if (r != in_slots[0]) {
      residual_in = in_slots.size();
      in_slots.push_back(r);
      shapes.input_floats.push_back(d_pj.layer.conv_floats());
    }
  }
  std::vector<KernelCandidate> candidates;
  const size_t workspace_in = in_slots.size();  // a candidate's workspace follows its inputs
  for (const kernels::MbconvVariant& v : variants) {
    std::string config = v.ranks > 1 ? fmt::format("one cluster of {} blocks an image", v.ranks)
                                     : std::string("one block an image");
    if (v.split_channels > 0) {
      config = fmt::format("two launches: {} hidden channels a block, then {} outputs x {} pixels a block",
                           v.split_channels, v.split_outputs, v.split_pixels);
    } else if (v.tile_h > 0) {
      config = fmt::format("a block per {}x{} output tile, every channel", v.tile_h, v.tile_w);
    }
    KernelCandidate c{v.name, std::move(config),
                      [v, d, optin, residual_in, workspace_in](const float* const* in, float* const* out, Stream s) {
                        float* workspace = v.split_channels > 0 ? const_cast<float*>(in[workspace_in]) : nullptr;
                        kernels::launch_mbconv(v, in[0], d.residual ? in[residual_in] : nullptr, out[0], d, optin, s,
                                               workspace);
                      }};
    c.workspace_floats = kernels::mbconv_workspace_floats(v, d);
    candidates.push_back(std::move(c));
  }
  const int out_slot = lc.slot(pj.outputs.at(0));
  candidates.push_back(replay_candidate(steps, in_slots, out_slot, lc));
  shapes.output_floats = d_pj.layer.out_floats();
  const Choice choice = choose_kernel(lc, signature, candidates, shapes);
  const KernelCandidate& chosen = candidates[choice.index];
  if (!chosen.reference && chosen.workspace_floats == 0) {  // a chain runs one-launch blocks only
    chosen_blocks.push_back({d, signature, in_slots[0], d.residual ? in_slots[residual_in] : -1, out_slot});
  }
  double weights = double(d.hidden) * (d.dw.KH * d.dw.KW + d.F + 2.0 * d.squeeze);
  if (d.expand) weights += double(d.hidden) * d.C;
  return fused_or_steps(
      choice, candidates, std::move(steps), what, lc,
      [&](const KernelCandidate& c, const std::vector<Step>& replaced) {
        std::vector<int> inputs = in_slots;
        if (c.workspace_floats > 0) inputs.push_back(lc.workspace(c.workspace_floats * 4, "mbconv workspace"));
        Step step = replacing_step("InvertedResidual", m.nodes(), pj, c, choice, replaced, inputs, out_slot, what, lc);
        step.min_bytes = 4.0 * (double(shapes.input_floats[0]) + weights +
                                double(shapes.output_floats) * (d.residual ? 2.0 : 1.0));
        return step;
      },
      "its steps");
}

void offer_block_chains(const std::vector<BlockStep>& blocks, LowerContext& lc, GpuPlan& plan) {
  std::map<int, const BlockStep*> by_output;
  for (const BlockStep& b : blocks) by_output[b.out_slot] = &b;
  auto block_of = [&](const Step& s) -> const BlockStep* {
    if (s.op != "InvertedResidual" || s.outputs.size() != 1) return nullptr;
    const auto at = by_output.find(s.outputs[0]);
    return at == by_output.end() ? nullptr : at->second;
  };
  const int optin = static_cast<int>(lc.context.device.smem_per_block_optin);
  std::vector<Step> kept;  // the plan's new steps
  for (size_t i = 0; i < plan.steps.size();) {
    // The run of block steps from i (at most a chain's worth), of one batch.
    size_t j = i;
    std::vector<const BlockStep*> run;
    while (j < plan.steps.size() && run.size() < size_t(kernels::kMbconvChainMax)) {
      const BlockStep* b = block_of(plan.steps[j]);
      if (!b || (!run.empty() && b->desc.batch != run[0]->desc.batch)) break;
      run.push_back(b);
      ++j;
    }
    std::vector<kernels::MbconvDesc> descs;
    for (const BlockStep* b : run) descs.push_back(b->desc);
    const std::vector<kernels::MbconvVariant> variants =
        run.size() >= 2 ? kernels::mbconv_chain_variants(descs, optin, lc.context.device.arch())
                        : std::vector<kernels::MbconvVariant>{};
    if (variants.empty()) {
      for (size_t k = i; k < std::max(j, i + 1); ++k) kept.push_back(std::move(plan.steps[k]));
      i = std::max(j, i + 1);
      continue;
    }
    // The chain's inputs: what its blocks read that no block of it writes; its output: the last block's (the other
    // blocks' outputs are the step's outputs too, so that the arena holds them).
    std::vector<int> in_slots, outputs;
    for (const BlockStep* b : run) {
      for (int s : {b->x_slot, b->residual_slot}) {
        if (s < 0 || std::find(outputs.begin(), outputs.end(), s) != outputs.end() ||
            std::find(in_slots.begin(), in_slots.end(), s) != in_slots.end()) {
          continue;
        }
        in_slots.push_back(s);
      }
      outputs.push_back(b->out_slot);
    }
    const int out_slot = outputs.back();
    const std::vector<Step> steps(std::make_move_iterator(plan.steps.begin() + static_cast<std::ptrdiff_t>(i)),
                                  std::make_move_iterator(plan.steps.begin() + static_cast<std::ptrdiff_t>(j)));
    auto layout = std::make_shared<TuningLayout>(in_slots, out_slot, nullptr, lc);
    std::vector<KernelCandidate> candidates(1);
    candidates[0].name = "separate_steps";
    candidates[0].config = fmt::format("{} steps", steps.size());
    candidates[0].reference = true;
    candidates[0].contender = true;
    candidates[0].launch = replay_launch(steps, *layout);
    std::vector<const void*> tables;
    for (const kernels::MbconvVariant& v : variants) {
      const std::vector<unsigned char> table = kernels::mbconv_chain_table(v, descs);
      const void* dtable = lc.context.weights.upload_bytes(table.data(), table.size(), "mbconv_chain");
      tables.push_back(dtable);
      std::vector<TuningLayout::Ref> refs;  // per block: x, residual (or its own x), y
      for (const BlockStep* b : run) {
        refs.push_back(layout->ref(b->x_slot));
        refs.push_back(layout->ref(b->residual_slot >= 0 ? b->residual_slot : b->x_slot));
        refs.push_back(layout->ref(b->out_slot));
      }
      const size_t n_in = layout->inputs();
      KernelCandidate c;
      c.name = v.name;
      c.config = fmt::format("{} blocks, a cluster of {} blocks an image", run.size(), v.ranks);
      c.launch = [v, descs, dtable, refs, n_in, optin](const float* const* in, float* const* out, Stream s) {
        kernels::MbconvChainTensors t;
        for (size_t b = 0; b < descs.size(); ++b) {
          t.x[b] = TuningLayout::resolve(refs[3 * b], in, n_in, out);
          t.residual[b] = descs[b].residual ? TuningLayout::resolve(refs[3 * b + 1], in, n_in, out) : nullptr;
          t.y[b] = TuningLayout::resolve(refs[3 * b + 2], in, n_in, out);
        }
        kernels::launch_mbconv_chain(v, descs, dtable, t, optin, static_cast<cudaStream_t>(s));
      };
      candidates.push_back(std::move(c));
    }
    for (KernelCandidate& c : candidates) c.workspace_floats = layout->workspace_floats();
    TuneShapes shapes;
    for (int s : in_slots) shapes.input_floats.push_back(lc.slot_info(s).bytes / static_cast<int64_t>(sizeof(float)));
    shapes.output_floats = lc.slot_info(out_slot).bytes / static_cast<int64_t>(sizeof(float));
    std::string signature = fmt::format("mbconv chain {}", run.size());
    for (const BlockStep* b : run) signature += " {" + b->signature + "}";
    const Choice choice = choose_kernel(lc, signature, candidates, shapes);
    const std::string what = fmt::format("inverted residual chain {} .. {}", steps.front().nodes.front(),
                                         steps.back().nodes.back());
    // A chain of blocks must measure 10% faster than their steps' replay (mobilenet_v2 at batch 16 on the H100: a
    // 14-block chain 3% faster than the replay, the network 10% slower with it).
    if (choice.index == 0 || !clearly_faster_than_steps(choice, candidates[choice.index].name, 0.9)) {
      lc.note(fmt::format("{}: {} steps ({}{})", what, steps.size(), choice.index == 0 ? "" : "the chain not 10% faster: ",
                          timing_text(choice)));
      for (const Step& st : steps) kept.push_back(st);
      i = j;
      continue;
    }
    const kernels::MbconvVariant v = variants[choice.index - 1];
    const void* dtable = tables[choice.index - 1];
    // Per block: where its x, residual and y are among the step's inputs (>= 0) or outputs (-1 - index).
    std::vector<int> where;
    auto place = [&](int slot) {
      const auto o = std::find(outputs.begin(), outputs.end(), slot);
      if (o != outputs.end()) return -1 - static_cast<int>(o - outputs.begin());
      return static_cast<int>(std::find(in_slots.begin(), in_slots.end(), slot) - in_slots.begin());
    };
    for (const BlockStep* b : run) {
      where.push_back(place(b->x_slot));
      where.push_back(b->residual_slot >= 0 ? place(b->residual_slot) : 0);
      where.push_back(place(b->out_slot));
    }
    ir::Node covered;
    covered.op = "InvertedResidualChain";
    for (const Step& st : steps) covered.covers.insert(covered.covers.end(), st.nodes.begin(), st.nodes.end());
    const KernelCandidate& winner = candidates[choice.index];
    Step step = lc.make_step(covered, winner.name, winner.config + ", " + choice.how, in_slots, outputs,
                             [v, descs, dtable, where, optin](const float* const* in, float* const* out, Stream s) {
                               auto at = [&](int w) { return w >= 0 ? const_cast<float*>(in[w]) : out[-1 - w]; };
                               kernels::MbconvChainTensors t;
                               for (size_t b = 0; b < descs.size(); ++b) {
                                 t.x[b] = at(where[3 * b]);
                                 t.residual[b] = descs[b].residual ? at(where[3 * b + 1]) : nullptr;
                                 t.y[b] = at(where[3 * b + 2]);
                               }
                               kernels::launch_mbconv_chain(v, descs, dtable, t, optin, static_cast<cudaStream_t>(s));
                             });
    step.output_shape = steps.back().output_shape;
    step.candidates = choice.timings;
    for (const Step& st : steps) {
      step.flops += st.flops;
      step.min_bytes += st.min_bytes;
    }
    step.replaced = std::make_shared<const std::vector<Step>>(steps);
    lc.note(fmt::format("{}: one launch, {} for {} steps ({})", what, winner.name, steps.size(), timing_text(choice)));
    kept.push_back(std::move(step));
    i = j;
  }
  plan.steps = std::move(kept);
}

}  // namespace cnnrt::plan
