// Offers a LeNet-class chain (plan/conv_chain_match.hpp) to the one-launch chain kernel.
//
// The candidates are the kernel's cluster sizes, each both as built and as compiled for these shapes at plan
// time ("_jit", kernels/conv_chain_jit.hpp; CNNRT_NO_JIT=1 leaves those out), and, as the reference, the
// chain's own steps replayed back to back over a workspace that holds their intermediates. The tuner runs the
// reference first, drops any candidate that disagrees with it, and keeps the fastest; the choice is cached
// like every other.
#include "plan/gpu/lower_chain.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>

#include "core/log.hpp"
#include "ir/fused.hpp"
#include "kernels/conv_chain.cuh"
#include "kernels/conv_chain_jit.hpp"
#include "plan/gpu/conv_step.hpp"
#include "plan/gpu/lower_util.hpp"
#include "plan/gpu/tuner.hpp"

namespace cnnrt::plan {

namespace {

constexpr int kChainFirstUpToBatch = 32;  // without measurement, the chain kernel is the choice up to here

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

  void launch(const float* x, float* y, cudaStream_t s) {
    prepare();
    if (compiled_) {
      compiled_->launch(x, y, d_, s);
    } else {
      kernels::launch_conv_chain(v_, x, y, d_, s);
    }
  }

 private:
  kernels::ConvChainDesc d_;
  kernels::ConvChainVariant v_;
  std::once_flag once_;
  std::unique_ptr<kernels::ChainJitKernel> compiled_;
};

bool plan_time_compilation() {
  const char* off = std::getenv("CNNRT_NO_JIT");
  return !(off && *off && std::string(off) != "0");
}

kernels::ChainConv chain_conv(const ConvStep& cs, const float* weights) {
  return {cs.layer.g, cs.layer.e, weights};
}

// Gemm's B as [N][K] with alpha folded in, and beta * C as [N] (empty when there is no C).
struct DenseWeights {
  int64_t n = 0, k = 0;
  std::vector<float> w, bias;
};

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

// The steps a chain was lowered to, replayed with their intermediates in one workspace: the reference
// candidate. `in[0]` is the chain's input, `in[1]` the workspace, `out[0]` its output.
KernelCandidate replay_candidate(const std::vector<Step>& steps, int in_slot, int out_slot, LowerContext& lc) {
  struct Ref {
    enum Kind { ChainInput, ChainOutput, Fixed, Workspace } kind = Fixed;
    const float* pointer = nullptr;  // Fixed
    int64_t offset = 0;              // Workspace, floats
  };
  std::map<int, int64_t> offsets;
  int64_t workspace = 0;
  auto ref = [&](int slot) {
    Ref r;
    const Slot& s = lc.slot_info(slot);
    if (slot == in_slot) {
      r.kind = Ref::ChainInput;
    } else if (slot == out_slot) {
      r.kind = Ref::ChainOutput;
    } else if (s.kind == SlotKind::Weight) {
      r.pointer = s.weight;
    } else {
      CNNRT_CHECK(s.kind == SlotKind::Arena, ErrorCode::Internal, "chain step reads graph input or output '{}'", s.name);
      auto [it, added] = offsets.emplace(slot, workspace);
      if (added) workspace += (s.bytes / 4 + 63) / 64 * 64;  // 256-byte aligned regions
      r.kind = Ref::Workspace;
      r.offset = it->second;
    }
    return r;
  };
  struct Replayed {
    LaunchFn launch;
    std::vector<Ref> in, out;
  };
  auto replay = std::make_shared<std::vector<Replayed>>();
  for (const Step& step : steps) {
    Replayed r{step.launch, {}, {}};
    for (int s : step.inputs) r.in.push_back(ref(s));
    for (int s : step.outputs) r.out.push_back(ref(s));
    replay->push_back(std::move(r));
  }
  KernelCandidate c;
  c.name = "separate_steps";
  c.config = fmt::format("{} steps", steps.size());
  c.reference = true;
  c.workspace_floats = workspace;
  c.launch = [replay](const float* const* in, float* const* out, Stream s) {
    float* work = const_cast<float*>(in[1]);
    auto resolve = [&](const Ref& r) -> float* {
      switch (r.kind) {
        case Ref::ChainInput: return const_cast<float*>(in[0]);
        case Ref::ChainOutput: return out[0];
        case Ref::Workspace: return work + r.offset;
        default: return const_cast<float*>(r.pointer);
      }
    };
    for (const Replayed& r : *replay) {
      std::vector<const float*> ins;
      std::vector<float*> outs;
      for (const Ref& x : r.in) ins.push_back(resolve(x));
      for (const Ref& x : r.out) outs.push_back(resolve(x));
      r.launch(ins.data(), outs.data(), s);
    }
  };
  return c;
}

}  // namespace

std::vector<Step> lower_conv_chain(const ConvChainMatch& m, std::vector<Step> steps, LowerContext& lc) {
  const ir::Graph& g = lc.graph;
  const ir::Node& na = g.nodes[static_cast<size_t>(m.conv_a)];
  const ir::Node& nb = g.nodes[static_cast<size_t>(m.conv_b)];
  const ir::Node& nd = g.nodes[static_cast<size_t>(m.dense)];
  const ConvStep ca = describe_conv(na, lc);
  const ConvStep cb = describe_conv(nb, lc);
  const std::string what = fmt::format("conv chain {} .. {}", ir::node_short_name(na), ir::node_short_name(nd));
  // Stride, dilation, groups and residual were checked by match_conv_chain; the kernel sizes are left.
  if (ca.layer.g.KH != ca.layer.g.KW || cb.layer.g.KH != cb.layer.g.KW) {
    lc.note(fmt::format("{}: separate steps (a kernel is not square)", what));
    return steps;
  }
  kernels::ConvChainDesc d;
  d.batch = ca.layer.g.N;
  d.a = chain_conv(ca, lc.weight(na.input(1)));
  d.b = chain_conv(cb, lc.weight(nb.input(1)));
  const DenseWeights dense = dense_weights(nd, g);
  d.fc.N = static_cast<int>(dense.n);
  const KernelActivation fc_act = nd.op == ir::fused::kFusedGemm ? kernel_activation(nd) : KernelActivation{};
  d.fc.act = fc_act.act;
  d.fc.alpha = fc_act.alpha;
  d.fc.beta = fc_act.beta;
  const int smem_optin = static_cast<int>(lc.context.device.smem_per_block_optin);
  if (lc.context.device.arch() < 90) {
    lc.note(fmt::format("{}: separate steps (the chain kernel needs thread-block clusters: compute capability 9.0)",
                        what));
    return steps;
  }
  std::string why;
  if (dense.k != int64_t(d.b.g.F) * d.b.PH() * d.b.PW() || !kernels::conv_chain_supports(d, smem_optin, &why)) {
    lc.note(fmt::format("{}: separate steps ({})", what, why.empty() ? "Gemm inner size mismatch" : why));
    return steps;
  }
  d.fc.weights = lc.context.weights.upload(dense.w, "chain_dense_nk");
  d.fc.bias = dense.bias.empty() ? nullptr : lc.context.weights.upload(dense.bias, "chain_dense_bias");

  const int in_slot = lc.slot(na.input(0));
  const int out_slot = lc.slot(nd.outputs.at(0));
  std::vector<KernelCandidate> candidates;
  const std::vector<kernels::ConvChainVariant> variants = kernels::conv_chain_variants(d, smem_optin);
  for (const kernels::ConvChainVariant& v : variants) {
    candidates.push_back({v.name, fmt::format("one cluster of {} blocks per image", v.layout.ranks),
                          [v, d](const float* const* in, float* const* out, Stream s) {
                            kernels::launch_conv_chain(v, in[0], out[0], d, s);
                          }});
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
    }
  }
  KernelCandidate reference = replay_candidate(steps, in_slot, out_slot, lc);
  if (d.batch <= kChainFirstUpToBatch) {
    candidates.push_back(std::move(reference));
  } else {
    candidates.insert(candidates.begin(), std::move(reference));
  }
  TuneShapes shapes;
  shapes.input_floats = {ir::numel(input_shape(lc, na, 0))};
  shapes.output_floats = ir::numel(output_shape(lc, nd));
  const std::string signature =
      fmt::format("chain [{}] [{}] dense n={} k={} transB={} alpha={} beta={} c={} act={} {} {}", ca.signature,
                  cb.signature, dense.n, dense.k, nd.attrs.get_int("transB", 0), nd.attrs.get_float("alpha", 1.0f),
                  nd.attrs.get_float("beta", 1.0f), nd.has_input(2), static_cast<int>(d.fc.act), d.fc.alpha, d.fc.beta);
  Choice choice;
  if (lc.context.tuner) {
    choice = lc.context.tuner->choose(signature, candidates, shapes);
  } else {
    choice.how = "heuristic";
  }
  const KernelCandidate& chosen = candidates[choice.index];
  if (auto it = compiled.find(chosen.name); it != compiled.end()) it->second->prepare();  // before any capture
  const std::string timing = choice.timings.empty() ? choice.how : [&] {
    std::string t;
    for (const Candidate& c : choice.timings) t += fmt::format("{}{} {:.2f} us", t.empty() ? "" : ", ", c.kernel, c.median_us);
    return t;
  }();
  if (chosen.reference) {
    lc.note(fmt::format("{}: separate steps ({})", what, timing));
    return steps;
  }
  ir::Node covered;
  covered.op = "ConvChain";
  for (const ir::Node* n : {&na, &nb}) covered.covers.insert(covered.covers.end(), n->covers.begin(), n->covers.end());
  for (int v : m.views) {
    const auto& c = g.nodes[static_cast<size_t>(v)].covers;
    covered.covers.insert(covered.covers.end(), c.begin(), c.end());
  }
  covered.covers.insert(covered.covers.end(), nd.covers.begin(), nd.covers.end());
  covered.outputs = nd.outputs;
  Step step = lc.make_step(covered, chosen.name, chosen.config + ", " + choice.how, {in_slot}, {out_slot}, chosen.launch);
  step.candidates = choice.timings;
  for (const Step& s : steps) step.flops += s.flops;
  step.min_bytes = 4.0 * (double(shapes.input_floats[0]) + double(shapes.output_floats) +
                          double(d.a.g.F) * d.a.g.KH * d.a.g.KW + double(d.b.g.F) * d.b.g.C * d.b.g.KH * d.b.g.KW +
                          double(dense.w.size()));
  lc.note(fmt::format("{}: one launch, {} ({})", what, chosen.name, timing));
  return {std::move(step)};
}

}  // namespace cnnrt::plan
