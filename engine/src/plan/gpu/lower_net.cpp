// The network kernel offered the last layers of a network (lower_net.hpp).
//
// Each node that computes becomes one or two ops of the kernel's table (a pooled convolution: the convolution into a
// scratch tensor, then the pooling). The cuts tried are the first node from which every node is of a kind the
// kernel runs and the layers do at most kMaxFlopsAnImage, and the first node of each smaller map after it (the
// stages of a CNN: the later, the fewer multiply-adds the generic kernel has to do; the first and the last ones up to
// kMaxCuts); a candidate is the steps before its cut replayed, then the kernel,
// so that every candidate computes the same thing from the same inputs as the reference, the steps from the first
// cut on. The sequence kernel (kernels/seqnet.cuh) is offered the same cuts where it runs their ops.
// The tuner checks each against the reference and times it; the choice is cached like every other.
#include "plan/gpu/lower_net.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <future>
#include <memory>
#include <mutex>
#include <set>

#include "core/log.hpp"
#include "ir/fused.hpp"
#include "ir/ops.hpp"
#include "kernels/jit.hpp"
#include "kernels/net.cuh"
#include "kernels/seqnet.cuh"
#include "plan/gpu/conv_step.hpp"
#include "plan/gpu/lower_util.hpp"

namespace cnnrt::plan {

namespace {

using kernels::NetOp;
using kernels::NetOpKind;

constexpr size_t kMaxCuts = 4;  // the first cut and the last three: each candidate replays the network
// Cuts whose layers do more than this an image are not tried: at the kernel's rate (16 SMs of generic FP32 sums, a
// microsecond or more an op) they lose to the steps' tuned kernels by far, and each costs the tuner a replay.
constexpr double kMaxFlopsAnImage = 2.0e7;

// The sequence kernel compiled for one program at plan time. NVRTC runs on threads of their own: at the first
// launch of any compiled candidate of the offer (the tuner's check run), every one of them starts, so that they
// compile at once; a choice read from the tuning cache compiles its own only (prepare()). The kernel is loaded at
// its first launch (never inside a graph capture: the tuner's check run, or prepare() once chosen). Where NVRTC or
// the load fails, the built kernel runs the program instead, with one warning: same code, same results.
class PlanTimeSeq {
 public:
  using Group = std::vector<std::weak_ptr<PlanTimeSeq>>;  // the offer's compiled candidates

  PlanTimeSeq(std::shared_ptr<const kernels::SeqProgram> program, const kernels::SeqLayer* layers, int arch,
              std::string name, std::shared_ptr<Group> group)
      : program_(std::move(program)), layers_(layers), arch_(arch), name_(std::move(name)), group_(std::move(group)) {}

  void start() {
    std::call_once(started_, [this] {
      cubin_ = std::async(std::launch::async, [source = kernels::seqnet_jit_source(*program_), arch = arch_] {
        const auto start = std::chrono::steady_clock::now();
        std::string cubin = kernels::compile_jit_source(source, arch, "the sequence kernel");
        return std::make_pair(std::move(cubin),
                              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      });
    });
  }

  void prepare() {
    std::call_once(loaded_, [this] {
      start();
      try {
        const auto [cubin, seconds] = cubin_.get();
        compiled_ = std::make_unique<kernels::SeqJitKernel>(cubin, *program_);
        log().debug("{}: compiled in {:.2f} s", name_, seconds);
      } catch (const std::exception& e) {
        log().warn("{}: {}; the kernel as built runs instead", name_, e.what());
      }
    });
  }

  // A candidate's launch: the offer's compiles started, this one's waited for.
  void launch(const float* const* x, float* y, int batch, cudaStream_t s) {
    for (const std::weak_ptr<PlanTimeSeq>& member : *group_) {
      if (const std::shared_ptr<PlanTimeSeq> m = member.lock()) m->start();
    }
    run(x, y, batch, s);
  }

  // The chosen step's launch.
  void run(const float* const* x, float* y, int batch, cudaStream_t s) {
    prepare();
    if (compiled_) {
      compiled_->launch(*program_, x, y, batch, s);
    } else {
      kernels::launch_seqnet(*program_, layers_, x, y, batch, s);
    }
  }

 private:
  std::shared_ptr<const kernels::SeqProgram> program_;
  const kernels::SeqLayer* layers_;
  int arch_;
  std::string name_;
  std::shared_ptr<Group> group_;
  std::once_flag started_, loaded_;
  std::future<std::pair<std::string, double>> cubin_;
  std::unique_ptr<kernels::SeqJitKernel> compiled_;
};

int to_int(int64_t v, const char* what) {
  CNNRT_CHECK(v >= 0 && v <= INT_MAX, ErrorCode::Unsupported, "{} {} is beyond the network kernel's 32-bit offsets", what, v);
  return static_cast<int>(v);
}

// Row-major strides of `shape`.
std::vector<int64_t> strides_of(const ir::Shape& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * shape[d];
  return s;
}

// A node as the kernel's ops, tensors named by their slots (renumbered per table later). Throws Unsupported.
class Describer {
 public:
  Describer(LowerContext& lc, int64_t batch) : lc_(lc), g_(lc.graph), batch_(batch) {}

  std::vector<NetOp> describe(const ir::Node& node) {
    const std::string& op = node.op;
    CNNRT_CHECK(!node.outputs.empty() && node.outputs[0] >= 0, ErrorCode::Unsupported, "{} without an output", op);
    for (size_t i = 1; i < node.outputs.size(); ++i) {
      CNNRT_CHECK(node.outputs[i] < 0, ErrorCode::Unsupported, "{} with a second output", op);
    }
    if (op == "Conv" || op == ir::fused::kFusedConv) return conv(node);
    if (op == "Gemm" || op == ir::fused::kFusedGemm) return gemm(node);
    if (op == "GlobalAveragePool" || op == "GlobalMaxPool") return global_pool(node);
    if (op == "MaxPool" || op == "AveragePool") return pool(node);
    if ((op == "Add" || op == "Sub" || op == "Mul" || op == "Div") && node.inputs.size() == 2) return binary(node);
    if (op == "BatchNormalization" || op == ir::fused::kFusedBatchNorm) return batchnorm(node);
    if (op == "Concat") return concat(node);
    if (op == "Transpose") return transpose(node);
    if (const std::optional<ir::fused::Activation> a = ir::fused::activation_of(node)) return activation(node, *a);
    fail(ErrorCode::Unsupported, "{} is not among the network kernel's ops", op);
  }

 private:
  // Floats from one image of `value` to the next (which must lead with the batch axis): its own, or the Concat
  // output's where it is a strided block of one; 0 for a constant shared by every image.
  int image_floats(int value) {
    const ir::Shape& s = g_.shape_of(value);
    if (g_.values[static_cast<size_t>(value)].is_constant() && (s.empty() || s[0] != batch_)) return 0;
    CNNRT_CHECK(!s.empty() && s[0] == batch_, ErrorCode::Unsupported, "a tensor {} without the batch axis first",
                ir::shape_str(s));
    if (const int64_t strided = lc_.image_floats(value)) return to_int(strided, "tensor size");
    return to_int(ir::numel(s) / batch_, "tensor size");
  }
  void set_io(NetOp& o, const ir::Node& node) {
    o.in0 = lc_.slot(node.input(0));
    o.in0_stride = image_floats(node.input(0));
    o.out = lc_.slot(node.outputs[0]);
    o.out_stride = image_floats(node.outputs[0]);
  }

  std::vector<NetOp> conv(const ir::Node& node) {
    const ConvStep cs = describe_conv(node, lc_);
    const kernels::ConvLayer& L = cs.layer;
    CNNRT_CHECK(L.g.N == batch_, ErrorCode::Unsupported, "a convolution of another batch");
    NetOp o;
    o.kind = NetOpKind::Conv;
    o.g = L.g;
    o.w = lc_.weight(node.input(1));
    o.bias = L.e.bias;
    o.act = L.e.param_act;
    o.alpha = L.e.alpha;
    o.beta = L.e.beta;
    set_io(o, node);
    if (L.residual) {
      o.in1 = lc_.slot(node.input(ir::fused::kResidualInput));
      o.in1_stride = image_floats(node.input(ir::fused::kResidualInput));
    }
    if (!L.pooled()) return {o};
    // Pooled: the convolution into a scratch tensor, then the pooling from it.
    const int conv_image = to_int(int64_t(L.g.F) * L.g.OH * L.g.OW, "convolution output");
    NetOp p;
    p.kind = NetOpKind::Pool;
    p.g.C = L.g.F;
    p.g.H = L.g.OH;
    p.g.W = L.g.OW;
    p.g.OH = L.e.pool.PH;
    p.g.OW = L.e.pool.PW;
    p.pool = L.e.pool;
    p.out = o.out;
    p.out_stride = o.out_stride;
    o.out = lc_.workspace(int64_t(conv_image) * batch_ * static_cast<int64_t>(sizeof(float)),
                          node.name + " (before pooling)");
    o.out_stride = conv_image;
    p.in0 = o.out;
    p.in0_stride = conv_image;
    return {o, p};
  }

  std::vector<NetOp> gemm(const ir::Node& node) {
    const ir::Shape& a = g_.shape_of(node.input(0));
    CNNRT_CHECK(node.attrs.get_int("transA", 0) == 0 && a.size() == 2, ErrorCode::Unsupported, "a Gemm of A transposed");
    CNNRT_CHECK(g_.constant_of(node.input(1)) != nullptr, ErrorCode::Unsupported, "a Gemm of run-time B");
    if (node.has_input(2)) {
      const ir::HostTensor* c = g_.constant_of(node.input(2));
      CNNRT_CHECK(c != nullptr, ErrorCode::Unsupported, "a Gemm of run-time C");
    }
    const DenseWeights dw = dense_weights(node, g_);
    if (node.has_input(2)) {
      const int64_t n = g_.constant_of(node.input(2))->numel();
      CNNRT_CHECK(n == 1 || n == dw.n, ErrorCode::Unsupported, "a Gemm whose C is not one row");
    }
    CNNRT_CHECK(a[1] == dw.k, ErrorCode::Unsupported, "a Gemm of inner size {} against B's {}", a[1], dw.k);
    NetOp o;
    o.kind = NetOpKind::Conv;
    o.g.C = to_int(dw.k, "Gemm inner size");
    o.g.F = to_int(dw.n, "Gemm outputs");
    // B already [N][K] and C a row, unscaled: the constants as uploaded; else their [N][K] form with alpha and beta in.
    const bool b_as_is = node.attrs.get_int("transB", 0) != 0 && node.attrs.get_float("alpha", 1.0f) == 1.0f;
    const bool c_as_is = node.has_input(2) && g_.constant_of(node.input(2))->numel() == dw.n &&
                         node.attrs.get_float("beta", 1.0f) == 1.0f;
    o.w = b_as_is ? lc_.weight(node.input(1)) : lc_.context.weights.upload(dw.w, "net_dense_nk");
    o.bias = dw.bias.empty() ? nullptr
             : c_as_is     ? lc_.weight(node.input(2))
                           : lc_.context.weights.upload(dw.bias, "net_dense_bias");
    if (node.op == ir::fused::kFusedGemm) {
      const KernelActivation act = kernel_activation(node);
      o.act = act.act;
      o.alpha = act.alpha;
      o.beta = act.beta;
    }
    set_io(o, node);
    return {o};
  }

  std::vector<NetOp> global_pool(const ir::Node& node) {
    const ir::Shape& x = g_.shape_of(node.input(0));
    CNNRT_CHECK(x.size() >= 3, ErrorCode::Unsupported, "{} of a rank-{} input", node.op, x.size());
    NetOp o;
    o.kind = NetOpKind::GlobalPool;
    o.g.C = to_int(x[1], "channels");
    o.g.H = to_int(product(x, 2), "map size");
    o.pool.kind = node.op == "GlobalMaxPool" ? kernels::FusedPool::Max : kernels::FusedPool::Avg;
    set_io(o, node);
    return {o};
  }

  std::vector<NetOp> pool(const ir::Node& node) {
    const PoolWindow w = describe_pool(node, lc_);
    NetOp o;
    o.kind = NetOpKind::Pool;
    o.g.C = w.channels;
    o.g.H = w.H;
    o.g.W = w.W;
    o.g.OH = w.pool.PH;
    o.g.OW = w.pool.PW;
    o.pool = w.pool;
    set_io(o, node);
    return {o};
  }

  // The per-image strides of `operand` broadcast to `out` (right-aligned; an axis of 1 repeats: stride 0).
  void broadcast_strides(const ir::Shape& out, const ir::Shape& operand, int* strides) {
    const std::vector<int64_t> s = strides_of(operand);
    const size_t lead = out.size() - operand.size();
    for (size_t d = 1; d < out.size(); ++d) {
      strides[d - 1] = d < lead || operand[d - lead] == 1 ? 0 : to_int(s[d - lead], "stride");
    }
  }

  std::vector<NetOp> binary(const ir::Node& node) {
    const ir::Shape& out = g_.shape_of(node.outputs[0]);
    const ir::Shape& a = g_.shape_of(node.input(0));
    const ir::Shape& b = g_.shape_of(node.input(1));
    CNNRT_CHECK(out.size() >= 2 && out.size() - 1 <= size_t(kernels::kNetMaxRank) && a.size() <= out.size() &&
                    b.size() <= out.size(),
                ErrorCode::Unsupported, "{} of rank {}", node.op, out.size());
    NetOp o;
    o.kind = NetOpKind::Binary;
    o.binary = node.op == "Add"   ? kernels::NetBinary::Add
               : node.op == "Sub" ? kernels::NetBinary::Sub
               : node.op == "Mul" ? kernels::NetBinary::Mul
                                  : kernels::NetBinary::Div;
    set_io(o, node);
    o.in1 = lc_.slot(node.input(1));
    // An operand without the batch axis (or with one of 1) is the same for every image.
    auto image_stride = [&](int value, const ir::Shape& s) {
      return s.size() == out.size() && s[0] == batch_ && batch_ > 1 ? image_floats(value) : 0;
    };
    o.in0_stride = image_stride(node.input(0), a);
    o.in1_stride = image_stride(node.input(1), b);
    o.rank = static_cast<int>(out.size()) - 1;
    for (size_t d = 1; d < out.size(); ++d) o.dims[d - 1] = to_int(out[d], "extent");
    broadcast_strides(out, a, o.sa);
    broadcast_strides(out, b, o.sb);
    o.count = o.out_stride;
    return {o};
  }

  // y = act(x * scale[c] + shift[c]) over [C][inner] (scale, shift: null for 1 and 0).
  std::vector<NetOp> affine(const ir::Node& node, const KernelActivation& act, const ChannelAffine& affine, int inner) {
    NetOp o;
    o.kind = NetOpKind::Affine;
    o.w = affine.scale;
    o.bias = affine.shift;
    o.act = act.act;
    o.alpha = act.alpha;
    o.beta = act.beta;
    o.inner = inner;
    set_io(o, node);
    o.count = o.out_stride;
    return {o};
  }

  std::vector<NetOp> batchnorm(const ir::Node& node) {
    const int inner = to_int(product(g_.shape_of(node.input(0)), 2), "map size");
    return affine(node, kernel_activation(node), batchnorm_affine(node, lc_), inner);
  }

  std::vector<NetOp> activation(const ir::Node& node, const ir::fused::Activation& a) {
    return affine(node, kernel_activation(a), ChannelAffine{}, 1);
  }

  std::vector<NetOp> concat(const ir::Node& node) {
    const ir::Shape& out = g_.shape_of(node.outputs[0]);
    int64_t axis = node.attrs.get_int("axis", 0);
    if (axis < 0) axis += static_cast<int64_t>(out.size());
    CNNRT_CHECK(axis == 1, ErrorCode::Unsupported, "a Concat along axis {}", axis);
    std::vector<NetOp> ops;
    int64_t at = 0;
    for (int v : node.inputs) {
      CNNRT_CHECK(v >= 0 && !g_.values[static_cast<size_t>(v)].is_constant(), ErrorCode::Unsupported,
                  "a Concat of a constant");
      NetOp o;
      o.kind = NetOpKind::Copy;
      o.in0 = lc_.slot(v);
      o.in0_stride = image_floats(v);
      o.out = lc_.slot(node.outputs[0]);
      o.out_stride = image_floats(node.outputs[0]);
      o.out_offset = to_int(at, "Concat offset");
      o.count = o.in0_stride;
      at += o.count;
      ops.push_back(o);
    }
    return ops;
  }

  std::vector<NetOp> transpose(const ir::Node& node) {
    const ir::Shape& x = g_.shape_of(node.input(0));
    const ir::Shape& out = g_.shape_of(node.outputs[0]);
    const std::vector<int64_t> perm = node.attrs.get_ints("perm");
    CNNRT_CHECK(perm.size() == x.size() && x.size() >= 2 && x.size() - 1 <= size_t(kernels::kNetMaxRank) && perm[0] == 0,
                ErrorCode::Unsupported, "a Transpose that moves the batch axis or of rank {}", x.size());
    const std::vector<int64_t> s = strides_of(x);
    NetOp o;
    o.kind = NetOpKind::Permute;
    set_io(o, node);
    o.rank = static_cast<int>(out.size()) - 1;
    for (size_t d = 1; d < out.size(); ++d) {
      o.dims[d - 1] = to_int(out[d], "extent");
      o.sa[d - 1] = to_int(s[static_cast<size_t>(perm[d])], "stride");
    }
    o.count = o.out_stride;
    return {o};
  }

  LowerContext& lc_;
  const ir::Graph& g_;
  int64_t batch_;
};

// The ops from a cut on as one launch's table: tensors renumbered in order of first use, the lanes an output for
// `threads` threads an image, a barrier before each op that reads (or overwrites) what an op since the last one wrote.
struct Table {
  std::vector<NetOp> ops;
  std::vector<int> tensors;  // slot of each tensor index
  int staging_floats = 0;  // the shared memory a block stages into (the most of any op)
};

Table make_table(const std::vector<NetOp>& ops, int ranks, int smem_optin, const SlotAliases& aliases) {
  const int threads = ranks * kernels::kNetThreads;
  const int budget = kernels::net_staging_floats(static_cast<int>(ops.size()), smem_optin);
  Table t;
  auto index = [&t](int slot) {
    if (slot < 0) return -1;
    auto at = std::find(t.tensors.begin(), t.tensors.end(), slot);
    if (at != t.tensors.end()) return static_cast<int>(at - t.tensors.begin());
    t.tensors.push_back(slot);
    return static_cast<int>(t.tensors.size()) - 1;
  };
  auto buffer = [&aliases](int slot) {
    auto at = aliases.find(slot);
    return at == aliases.end() ? slot : at->second.first;
  };
  std::set<int> written, read;  // buffers since the last barrier
  for (size_t k = 0; k < ops.size(); ++k) {
    NetOp o = ops[k];
    // Copies into one Concat's output write disjoint blocks: no barrier between them.
    const bool conflict = (o.in0 >= 0 && written.count(buffer(o.in0))) || (o.in1 >= 0 && written.count(buffer(o.in1))) ||
                          read.count(buffer(o.out)) || (written.count(buffer(o.out)) && o.kind != NetOpKind::Copy);
    o.barrier = k > 0 && conflict ? 1 : 0;
    if (o.barrier) {
      written.clear();
      read.clear();
    }
    for (int s : {o.in0, o.in1}) {
      if (s >= 0) read.insert(buffer(s));
    }
    written.insert(buffer(o.out));
    if (o.kind == NetOpKind::Conv) {
      const kernels::NetStaging staging = kernels::configure_net_conv(o, ranks, budget);
      t.staging_floats = std::max(t.staging_floats, staging.total());
    } else if (o.kind == NetOpKind::GlobalPool) {
      int lanes = 1;
      while (lanes < 32 && lanes * 2 <= int64_t(o.g.H) * o.g.W && int64_t(o.g.C) * lanes * 2 <= threads) lanes *= 2;
      o.lanes = lanes;
    }
    o.in0 = index(o.in0);
    o.in1 = index(o.in1);
    o.out = index(o.out);
    t.ops.push_back(o);
  }
  return t;
}

// A text that identifies the ops (not their addresses): the tuning cache's key, hashed.
std::string ops_fingerprint(const std::vector<NetOp>& ops) {
  uint64_t hash = 1469598103934665603ull;
  auto mix = [&hash](int64_t v) {
    for (int i = 0; i < 8; ++i) {
      hash ^= static_cast<uint64_t>(v >> (8 * i)) & 0xffu;
      hash *= 1099511628211ull;
    }
  };
  for (const NetOp& o : ops) {
    const kernels::ConvGeometry& g = o.g;
    const kernels::PoolGeometry& p = o.pool;
    for (int64_t v : {int64_t(o.kind), int64_t(o.in0 >= 0), int64_t(o.in1 >= 0), int64_t(o.out_stride),
                      int64_t(o.in0_stride), int64_t(o.in1_stride), int64_t(o.out_offset), int64_t(g.C), int64_t(g.H),
                      int64_t(g.W), int64_t(g.F), int64_t(g.KH), int64_t(g.KW), int64_t(g.OH), int64_t(g.OW),
                      int64_t(g.stride_h), int64_t(g.stride_w), int64_t(g.pad_top), int64_t(g.pad_left),
                      int64_t(g.pad_bottom), int64_t(g.pad_right), int64_t(g.dil_h), int64_t(g.dil_w), int64_t(g.groups),
                      int64_t(p.kind), int64_t(p.kh), int64_t(p.kw), int64_t(p.sh), int64_t(p.sw), int64_t(p.pad_top),
                      int64_t(p.pad_left), int64_t(p.pad_bottom), int64_t(p.pad_right), int64_t(p.dil_h),
                      int64_t(p.dil_w), int64_t(p.PH), int64_t(p.PW), int64_t(p.count_include_pad), int64_t(o.w != nullptr),
                      int64_t(o.bias != nullptr), int64_t(o.act), int64_t(o.binary), int64_t(o.count), int64_t(o.inner),
                      int64_t(o.rank)}) {
      mix(v);
    }
    for (float f : {o.alpha, o.beta}) {
      uint32_t bits = 0;
      std::memcpy(&bits, &f, sizeof(bits));
      mix(bits);
    }
    for (int d = 0; d < o.rank; ++d) {
      mix(o.dims[d]);
      mix(o.sa[d]);
      mix(o.sb[d]);
    }
  }
  return fmt::format("{:016x}", hash);
}

}  // namespace

void offer_net_kernel(const NetOffer& offer, LowerContext& lc, GpuPlan& plan) {
  const ir::Graph& g = lc.graph;
  if (offer.nodes.empty() || g.inputs.size() != 1 || plan.output_slots.size() != 1) return;
  const ir::Shape& input = g.shape_of(g.inputs[0]);
  if (input.empty() || input[0] > std::max(kernels::kNetMaxBatch, kernels::kSeqMaxBatch)) return;
  const int64_t batch = input[0];
  // The network kernel (clusters: compute capability 9.0) up to its batch; the sequence kernel where it runs the
  // ops (one block an image on any GPU, clusters from 9.0).
  const std::vector<kernels::NetVariant> variants =
      batch <= kernels::kNetMaxBatch ? kernels::net_variants(lc.context.device.arch()) : std::vector<kernels::NetVariant>{};
  const std::vector<kernels::SeqVariant> seq_variants = kernels::seqnet_variants(lc.context.device.arch());
  const int optin = static_cast<int>(lc.context.device.smem_per_block_optin);
  if (variants.empty() && batch <= kernels::kNetMaxBatch) {
    lc.note(fmt::format("network kernel: not offered (thread-block clusters need compute capability 9.0, this GPU is "
                        "{}.{})", lc.context.device.arch() / 10, lc.context.device.arch() % 10));
  }
  // The nodes within the multiply-adds a cut may have (their steps' flops from each node's first step on).
  const size_t n = offer.nodes.size();
  const size_t end = plan.steps.size();
  auto flops_from = [&](size_t k) {
    double flops = 0;
    for (size_t s = offer.step_at[static_cast<size_t>(offer.nodes[k])]; s < end; ++s) flops += plan.steps[s].flops;
    return flops;
  };
  size_t lowest = n;
  while (lowest > 0 && flops_from(lowest - 1) <= kMaxFlopsAnImage * double(batch)) --lowest;
  // Every node from `first` on described; the node before it is not of a kind the kernel runs (or beyond them).
  Describer describer(lc, batch);
  std::vector<std::vector<NetOp>> node_ops(n);
  size_t first = n;
  std::string stop;
  for (size_t k = n; k-- > lowest;) {
    const ir::Node& node = g.nodes[static_cast<size_t>(offer.nodes[k])];
    try {
      node_ops[k] = describer.describe(node);
      first = k;
    } catch (const Error& e) {
      stop = fmt::format("{}: {}", ir::node_short_name(node), e.what());
      break;
    }
  }
  auto buffer = [&offer](int slot) {
    auto at = offer.aliases.find(slot);
    return at == offer.aliases.end() ? slot : at->second.first;
  };
  const int out_slot = plan.output_slots[0];
  // The cuts: from a node of a clean cut, writing the graph's output, replacing two steps or more. Where its ops write
  // blocks of an in-place Concat that steps before the cut wrote other blocks of (DenseNet's stage after a
  // transition), only the sequence kernel is offered it: it keeps every tensor but the output in shared memory and
  // stages the earlier blocks, where the network kernel writes its tensors where the steps put them.
  struct Cut {
    size_t k;
    size_t step;
    std::vector<NetOp> ops;
    bool net = true;  // the network kernel runs it too
  };
  std::vector<Cut> cuts;
  std::string seq_only_why;  // why the sequence kernel runs none of the cuts only it could take
  int64_t last_map = INT64_MAX;
  for (size_t k = first; k < n; ++k) {
    const int node = offer.nodes[k];
    const size_t step = offer.step_at[static_cast<size_t>(node)];
    if (!offer.clean_cut[static_cast<size_t>(node)] || end - step < 2) continue;
    const ir::Shape& x = g.shape_of(g.nodes[static_cast<size_t>(node)].input(0));
    const int64_t map = x.size() > 2 ? product(x, 2) : 1;
    if (!cuts.empty() && map >= last_map) continue;
    std::vector<NetOp> ops;
    for (size_t j = k; j < n; ++j) ops.insert(ops.end(), node_ops[j].begin(), node_ops[j].end());
    std::set<int> before;
    for (size_t s = 0; s < step; ++s) {
      for (int o : plan.steps[s].outputs) before.insert(buffer(o));
    }
    bool net = true, writes_output = false;
    for (const NetOp& o : ops) {
      net = net && !before.count(buffer(o.out));
      writes_output = writes_output || o.out == out_slot;
    }
    if (ops.size() > size_t(kernels::kNetMaxOps) || !writes_output || (!net && seq_variants.empty())) continue;
    if (!net) {
      // Only where the sequence kernel runs it (its largest cluster): else a later cut of this map stays offered.
      std::string why;
      if (!kernels::build_seqnet(ops, seq_variants.front().ranks, optin, &why, &offer.aliases)) {
        seq_only_why += fmt::format("{}from {}: {}", seq_only_why.empty() ? "" : "; ",
                                    ir::node_short_name(g.nodes[static_cast<size_t>(node)]), why);
        continue;
      }
    }
    last_map = map;
    cuts.push_back({k, step, std::move(ops), net});
  }
  if (cuts.empty()) {
    lc.note(fmt::format("network kernel: not offered ({})",
                        stop.empty() ? "no cut of two steps or more within its multiply-adds an image" : stop));
    return;
  }
  if (cuts.size() > kMaxCuts) cuts.erase(cuts.begin() + 1, cuts.end() - static_cast<std::ptrdiff_t>(kMaxCuts - 1));

  // The inputs of the whole run from the first cut: the buffers its steps or ops read and none of them writes.
  std::set<int> written;
  std::vector<int> reads;
  for (size_t s = cuts[0].step; s < end; ++s) {
    for (int o : plan.steps[s].outputs) written.insert(buffer(o));
    reads.insert(reads.end(), plan.steps[s].inputs.begin(), plan.steps[s].inputs.end());
  }
  for (const NetOp& o : cuts[0].ops) {
    written.insert(buffer(o.out));
    for (int s : {o.in0, o.in1}) {
      if (s >= 0) reads.push_back(s);
    }
  }
  std::vector<int> in_slots;
  for (int s : reads) {
    const int b = buffer(s);
    if (lc.slot_info(b).kind == SlotKind::Weight || b == out_slot || written.count(b) ||
        std::find(in_slots.begin(), in_slots.end(), b) != in_slots.end()) {
      continue;
    }
    in_slots.push_back(b);
  }
  auto layout = std::make_shared<TuningLayout>(in_slots, out_slot, &offer.aliases, lc);
  std::vector<KernelCandidate> candidates(1);
  {
    const std::vector<Step> all(plan.steps.begin() + static_cast<std::ptrdiff_t>(cuts[0].step), plan.steps.end());
    KernelCandidate& reference = candidates[0];
    reference.name = "separate_steps";
    reference.config = fmt::format("{} steps", all.size());
    reference.reference = true;
    reference.contender = true;
    reference.launch = replay_launch(all, *layout);
  }
  const ir::Node& first_node = g.nodes[static_cast<size_t>(offer.nodes[cuts[0].k])];
  struct Option {
    size_t cut;
    kernels::NetVariant variant;
    Table table;
    std::shared_ptr<const kernels::SeqProgram> seq;  // the sequence kernel's program instead, with its table uploaded
    const kernels::SeqLayer* seq_layers = nullptr;
    std::shared_ptr<PlanTimeSeq> jit;  // the program's kernel compiled for it, instead of the built one
  };
  std::vector<Option> options;
  std::string signature = fmt::format("net batch={} cuts={}", batch, cuts.size());
  std::string seq_why;  // why the sequence kernel does not run the first cut it does not
  int seq_offered = 0;
  kernels::SeqHostCopies host_weights;  // each layer's weights read back once for every variant and cut
  auto jit_group = std::make_shared<PlanTimeSeq::Group>();
  for (size_t c = 0; c < cuts.size(); ++c) {
    signature += fmt::format(" {}:{}", cuts[c].ops.size(), ops_fingerprint(cuts[c].ops));
    std::vector<Step> prefix(plan.steps.begin() + static_cast<std::ptrdiff_t>(cuts[0].step),
                             plan.steps.begin() + static_cast<std::ptrdiff_t>(cuts[c].step));
    const LaunchFn before = prefix.empty() ? LaunchFn{} : replay_launch(prefix, *layout);
    for (const kernels::NetVariant& v : variants) {
      if (!cuts[c].net) break;
      Table table = make_table(cuts[c].ops, v.ranks, optin, offer.aliases);
      CNNRT_CHECK(table.tensors.size() <= size_t(kernels::kNetMaxTensors), ErrorCode::Internal,
                  "network kernel: {} tensors", table.tensors.size());
      std::vector<TuningLayout::Ref> refs;
      for (int s : table.tensors) refs.push_back(layout->ref(s));
      const auto* ops = static_cast<const NetOp*>(lc.context.weights.upload_bytes(
          table.ops.data(), table.ops.size() * sizeof(NetOp), "net_ops"));
      const int n_ops = static_cast<int>(table.ops.size());
      const int staging = table.staging_floats;
      const size_t n_in = layout->inputs();
      KernelCandidate cand;
      cand.name = fmt::format("{}_cut{}", v.name, c);
      cand.config = fmt::format("{} ops from {}, a cluster of {} blocks an image", n_ops,
                                ir::node_short_name(g.nodes[static_cast<size_t>(offer.nodes[cuts[c].k])]), v.ranks);
      cand.launch = [before, refs, ops, n_ops, staging, n_in, v, batch](const float* const* in, float* const* out, Stream s) {
        if (before) before(in, out, s);
        std::vector<const float*> tensors;
        for (const TuningLayout::Ref& r : refs) tensors.push_back(TuningLayout::resolve(r, in, n_in, out));
        kernels::launch_net(v, ops, n_ops, tensors.data(), static_cast<int>(tensors.size()), static_cast<int>(batch),
                            staging, static_cast<cudaStream_t>(s));
      };
      candidates.push_back(std::move(cand));
      options.push_back({c, v, std::move(table), nullptr, nullptr, nullptr});
    }
    for (const kernels::SeqVariant& v : seq_variants) {
      std::string why;
      std::optional<kernels::SeqProgram> program = kernels::build_seqnet(cuts[c].ops, v.ranks, optin, &why,
                                                                         &offer.aliases);
      if (!program) {
        if (seq_why.empty()) {
          seq_why = fmt::format("from {}: {}",
                                ir::node_short_name(g.nodes[static_cast<size_t>(offer.nodes[cuts[c].k])]), why);
        }
        continue;
      }
      ++seq_offered;
      program->packed = program->staged_floats() > 0
                            ? lc.context.weights.upload(kernels::seqnet_packed_weights(*program, &host_weights),
                                                        fmt::format("seqnet_weights_cl{}", v.ranks))
                            : nullptr;
      auto seq = std::make_shared<const kernels::SeqProgram>(std::move(*program));
      const auto* layers = static_cast<const kernels::SeqLayer*>(lc.context.weights.upload_bytes(
          seq->layers.data(), seq->layers.size() * sizeof(kernels::SeqLayer), "seqnet_layers"));
      std::vector<TuningLayout::Ref> xs;
      for (const kernels::SeqInput& staged : seq->inputs) xs.push_back(layout->ref(staged.slot));
      const TuningLayout::Ref y = layout->ref(out_slot);
      const size_t n_in = layout->inputs();
      KernelCandidate cand;
      cand.name = fmt::format("{}_cut{}", v.name, c);
      cand.config = fmt::format("{} layers from {} in shared memory, a cluster of {} blocks an image", seq->layers.size(),
                                ir::node_short_name(g.nodes[static_cast<size_t>(offer.nodes[cuts[c].k])]), v.ranks);
      cand.launch = [before, seq, layers, xs, y, n_in, batch](const float* const* in, float* const* out, Stream s) {
        if (before) before(in, out, s);
        const float* x[kernels::kSeqMaxInputs] = {};
        for (size_t i = 0; i < xs.size(); ++i) x[i] = TuningLayout::resolve(xs[i], in, n_in, out);
        kernels::launch_seqnet(*seq, layers, x, TuningLayout::resolve(y, in, n_in, out), static_cast<int>(batch),
                               static_cast<cudaStream_t>(s));
      };
      candidates.push_back(std::move(cand));
      options.push_back({c, {}, {}, seq, layers, nullptr});
      if (!plan_time_compilation()) continue;
      // The same program compiled for itself (after the built one: --force-kernel NAME finds that first).
      const std::string jit_name = fmt::format("{}_jit_cut{}", v.name, c);
      auto jit = std::make_shared<PlanTimeSeq>(seq, layers, lc.context.device.device_arch, jit_name, jit_group);
      jit_group->push_back(jit);
      KernelCandidate compiled;
      compiled.name = jit_name;
      compiled.config = candidates.back().config + ", compiled for them";
      compiled.launch = [before, jit, xs, y, n_in, batch](const float* const* in, float* const* out, Stream s) {
        if (before) before(in, out, s);
        const float* x[kernels::kSeqMaxInputs] = {};
        for (size_t i = 0; i < xs.size(); ++i) x[i] = TuningLayout::resolve(xs[i], in, n_in, out);
        jit->launch(x, TuningLayout::resolve(y, in, n_in, out), static_cast<int>(batch), static_cast<cudaStream_t>(s));
      };
      candidates.push_back(std::move(compiled));
      options.push_back({c, {}, {}, seq, layers, jit});
    }
  }
  if (seq_offered == 0) lc.note(fmt::format("sequence kernel: not offered ({})", seq_why));
  if (!seq_only_why.empty()) {
    lc.note(fmt::format("sequence kernel: cuts within an in-place Concat not offered ({})", seq_only_why));
  }
  if (candidates.size() == 1) return;
  for (KernelCandidate& c : candidates) c.workspace_floats = layout->workspace_floats();
  TuneShapes shapes;
  for (int s : in_slots) shapes.input_floats.push_back(lc.slot_info(s).bytes / static_cast<int64_t>(sizeof(float)));
  shapes.output_floats = lc.slot_info(out_slot).bytes / static_cast<int64_t>(sizeof(float));
  // From the plan's first step, every candidate is the whole plan: timed as it runs, one replay at a time.
  shapes.single_replays = cuts[0].step == 0;
  if (shapes.single_replays) signature += " single";
  const Choice choice = choose_kernel(lc, signature, candidates, shapes);
  const std::string what = fmt::format("network kernel from {}", ir::node_short_name(first_node));
  // One launch must measure 5% faster than the steps' replay: ResNet-20's last stage at batch 1 ties it (17.81 against
  // 17.76 us) and runs 7 us slower in the network; DenseNet-BC's tail at batch 16 2% faster, the network 1% slower.
  if (choice.index == 0 || !clearly_faster_than_steps(choice, candidates[choice.index].name, 0.95)) {
    lc.note(fmt::format("{}: separate steps ({}{})", what, choice.index == 0 ? "" : "one launch not 5% faster: ",
                        timing_text(choice)));
    return;
  }
  const Option& chosen = options[choice.index - 1];
  const Cut& cut = cuts[chosen.cut];
  const KernelCandidate& winner = candidates[choice.index];
  ir::Node covered;
  covered.op = "Network";
  for (size_t j = cut.k; j < n; ++j) {
    const ir::Node& node = g.nodes[static_cast<size_t>(offer.nodes[j])];
    covered.covers.insert(covered.covers.end(), node.covers.begin(), node.covers.end());
    covered.outputs = node.outputs;
  }
  auto replace_steps = [&](Step step) {
    step.output_shape = g.shape_of(g.outputs[0]);
    step.candidates = choice.timings;
    for (size_t s = cut.step; s < end; ++s) step.flops += plan.steps[s].flops;
    const auto from = plan.steps.begin() + static_cast<std::ptrdiff_t>(cut.step);
    const auto to = plan.steps.begin() + static_cast<std::ptrdiff_t>(end);
    step.replaced = std::make_shared<const std::vector<Step>>(from, to);
    lc.note(fmt::format("{}: one launch, {} for {} steps ({})", what, winner.name, end - cut.step, timing_text(choice)));
    plan.steps.erase(plan.steps.begin() + static_cast<std::ptrdiff_t>(cut.step), plan.steps.end());
    plan.steps.push_back(std::move(step));
  };
  if (chosen.seq) {
    const std::shared_ptr<const kernels::SeqProgram> seq = chosen.seq;
    const kernels::SeqLayer* layers = chosen.seq_layers;
    std::vector<int> inputs;
    for (const kernels::SeqInput& staged : seq->inputs) inputs.push_back(staged.slot);
    if (const std::shared_ptr<PlanTimeSeq> jit = chosen.jit) {
      jit->prepare();
      replace_steps(lc.make_step(covered, winner.name, winner.config + ", " + choice.how, inputs, {out_slot},
                                 [jit, batch](const float* const* in, float* const* out, Stream s) {
                                   jit->run(in, out[0], static_cast<int>(batch), static_cast<cudaStream_t>(s));
                                 }));
      return;
    }
    replace_steps(lc.make_step(covered, winner.name, winner.config + ", " + choice.how, inputs, {out_slot},
                               [seq, layers, batch](const float* const* in, float* const* out, Stream s) {
                                 kernels::launch_seqnet(*seq, layers, in, out[0], static_cast<int>(batch),
                                                        static_cast<cudaStream_t>(s));
                               }));
    return;
  }
  // The step: every tensor of the table is an input (their addresses are the kernel's parameter), the output too.
  std::vector<int> inputs;
  std::vector<int> where;  // per tensor: its index among the inputs, or -1 for the output
  for (int s : chosen.table.tensors) {
    if (s == out_slot) {
      where.push_back(-1);
    } else {
      where.push_back(static_cast<int>(inputs.size()));
      inputs.push_back(s);
    }
  }
  const auto* ops = static_cast<const NetOp*>(lc.context.weights.upload_bytes(
      chosen.table.ops.data(), chosen.table.ops.size() * sizeof(NetOp), "net_ops"));
  const int n_ops = static_cast<int>(chosen.table.ops.size());
  const int staging = chosen.table.staging_floats;
  const kernels::NetVariant v = chosen.variant;
  replace_steps(lc.make_step(covered, winner.name, winner.config + ", " + choice.how, inputs, {out_slot},
                           [where, ops, n_ops, staging, v, batch](const float* const* in, float* const* out, Stream s) {
                             std::vector<const float*> tensors;
                             for (int w : where) tensors.push_back(w < 0 ? out[0] : in[w]);
                             kernels::launch_net(v, ops, n_ops, tensors.data(), static_cast<int>(tensors.size()),
                                                 static_cast<int>(batch), staging, static_cast<cudaStream_t>(s));
                           }));
}

}  // namespace cnnrt::plan
