// Lowering of Conv / FusedConv (kernel choice by eligibility, then measurement) and of pooling.
//
// A convolution step offers its layer to every family of the kernel registry (kernels/conv_registry.hpp), in
// registry order (the heuristic order, the choice when tuning is off), and last to the reference: the plain
// direct kernel followed by separate residual, activation and pooling launches. A step with fused pooling
// also offers the layer without it to every family, each variant followed by a separate pooling launch, so
// the fusion stays only where a kernel that pools measures faster than one that does not. The tuner runs the
// reference first and drops any candidate whose output disagrees with it.
#include <cuda_runtime.h>

#include <climits>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>

#include "ir/fused.hpp"
#include "ir/window.hpp"
#include "kernels/broadcast.cuh"
#include "kernels/conv2d_direct.cuh"
#include "kernels/conv_registry.hpp"
#include "kernels/elementwise.cuh"
#include "kernels/pool.cuh"
#include "plan/gpu/conv_step.hpp"
#include "plan/gpu/lower_util.hpp"
#include "plan/gpu/tuner.hpp"

namespace cnnrt::plan {

namespace {

std::vector<ir::WindowAxis> spatial_windows(const ir::Attributes& attrs, const ir::Shape& input,
                                            const std::vector<int64_t>& kernel, bool pooling, const char* what) {
  CNNRT_CHECK(input.size() == 3 || input.size() == 4, ErrorCode::Unsupported,
              "{} of a rank-{} input (1-D and 2-D are supported)", what, input.size());
  return ir::resolve_window(attrs, ir::Shape(input.begin() + 2, input.end()), kernel, pooling);
}

// A 1-D window op runs as 2-D with a unit row axis.
std::pair<ir::WindowAxis, ir::WindowAxis> rows_cols(const std::vector<ir::WindowAxis>& axes) {
  if (axes.size() == 1) return {ir::WindowAxis{}, axes[0]};
  return {axes[0], axes[1]};
}

int to_int(int64_t v, const char* what) {
  CNNRT_CHECK(v >= 0 && v <= INT_MAX, ErrorCode::Unsupported, "{} {} is too large for the GPU kernels", what, v);
  return static_cast<int>(v);
}

// The fused pooling as the separate pooling kernel's description (writing the step's output: strided where it is).
kernels::Pool2dDesc pool_desc(const kernels::ConvLayer& L) {
  const kernels::PoolGeometry& p = L.e.pool;
  kernels::Pool2dDesc d;
  d.planes = int64_t(L.g.N) * L.g.F;
  d.rows = {L.g.OH, p.PH, p.kh, p.sh, p.dil_h, p.pad_top, p.pad_bottom};
  d.cols = {L.g.OW, p.PW, p.kw, p.sw, p.dil_w, p.pad_left, p.pad_right};
  d.count_include_pad = p.count_include_pad;
  d.channels = L.g.F;
  d.out_image_floats = L.e.out_image_floats;
  return d;
}

// The fused pooling as a launch from the full-resolution conv output to the step's output: a reduction per
// plane when the window is the whole map (global pooling: a dense output only), else the pooling kernel.
std::function<void(const float*, float*, Stream)> pool_launch(const kernels::ConvLayer& L) {
  const kernels::PoolGeometry& p = L.e.pool;
  const auto kind = p.kind == kernels::FusedPool::Max ? kernels::PoolOp::Max : kernels::PoolOp::Average;
  if (L.pooled_globally()) {
    CNNRT_CHECK(L.e.out_image_floats == 0, ErrorCode::Internal, "a global pooling launch into a strided output");
    const int64_t planes = int64_t(L.g.N) * L.g.F, plane = int64_t(L.g.OH) * L.g.OW;
    return [kind, planes, plane](const float* in, float* out, Stream s) {
      kernels::launch_global_pool(kind, in, out, planes, plane, s);
    };
  }
  const kernels::Pool2dDesc desc = pool_desc(L);
  return [kind, desc](const float* in, float* out, Stream s) { kernels::launch_pool2d(kind, in, out, desc, s); };
}

// Copies `images` images of `floats` each from `from` (one every `from_stride` floats) to `to` (one every
// `to_stride`), on the device.
void copy_images(float* to, int64_t to_stride, const float* from, int64_t from_stride, int64_t floats, int64_t images,
                 Stream s) {
  const size_t bytes = static_cast<size_t>(floats) * sizeof(float);
  cudaMemcpy2DAsync(to, static_cast<size_t>(to_stride) * sizeof(float), from,
                    static_cast<size_t>(from_stride) * sizeof(float), bytes, static_cast<size_t>(images),
                    cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(s));
}

// The reference: the plain direct kernel, then residual, activation and pooling as separate launches
// (pooling through a workspace holding the full-resolution conv output). An input or output with an image stride is
// copied image by image into a dense one in the workspace, or from it.
KernelCandidate reference_candidate(const kernels::ConvLayer& L, const float* weights) {
  KernelCandidate c;
  c.name = "direct_reference";
  c.reference = true;
  const bool pooled = L.pooled();
  const int64_t conv_floats = L.conv_floats();
  const int64_t dense_floats = L.e.out_image_floats != 0 ? L.out_floats() : 0;  // the workspace's dense output
  const int64_t in_image = int64_t(L.g.C) * L.g.H * L.g.W;
  const int64_t dense_in_floats = L.in.image_floats != 0 ? L.g.N * in_image : 0;  // and dense input
  c.workspace_floats = (pooled ? conv_floats : 0) + dense_floats + dense_in_floats;
  const kernels::BroadcastDesc same = kernels::make_broadcast_desc(1, &conv_floats, 1, &conv_floats, 1, &conv_floats);
  kernels::ConvLayer dense = L;  // the pooling writes the dense output in the workspace
  dense.e.out_image_floats = 0;
  const auto pool = pooled ? pool_launch(dense) : nullptr;
  c.config = std::string(dense_in_floats ? "strided copy, then " : "") + (pooled ? "direct conv, then pool" : "direct conv") +
             (dense_floats ? ", then strided copy" : "");
  c.launch = [L, weights, same, pool, conv_floats, dense_floats, dense_in_floats, in_image,
              scratch = c.workspace_floats > 0](const float* const* in, float* const* out, Stream s) {
    float* workspace = scratch ? const_cast<float*>(in[L.residual ? 2 : 1]) : nullptr;
    float* dense_out = dense_floats ? workspace + (L.pooled() ? conv_floats : 0) : out[0];
    float* conv_out = L.pooled() ? workspace : dense_out;
    const float* x = in[0];
    if (dense_in_floats) {
      float* dense_in = workspace + (L.pooled() ? conv_floats : 0) + dense_floats;
      copy_images(dense_in, in_image, x, L.in.image_floats, in_image, L.g.N, s);
      x = dense_in;
    }
    kernels::launch_conv2d_direct(x, weights, L.e.bias, conv_out, L.g, s);
    if (L.residual) kernels::launch_binary(kernels::BinaryOp::Add, conv_out, in[1], conv_out, same, s);
    if (L.e.param_act != kernels::ParamAct::None) {
      kernels::launch_activation(L.e.param_act, L.e.alpha, L.e.beta, conv_out, conv_out, conv_floats, s);
    }
    if (pool) pool(conv_out, dense_out, s);
    if (dense_floats) {
      copy_images(out[0], L.e.out_image_floats, dense_out, L.out_image_dense(), L.out_image_dense(), L.g.N, s);
    }
  };
  return c;
}

// A registry variant as a planner candidate: input 0 is x, input 1 the residual when the layer adds one, then
// the variant's workspace when it needs one.
KernelCandidate registry_candidate(kernels::ConvVariant v, bool residual) {
  KernelCandidate c;
  c.name = std::move(v.name);
  c.config = std::move(v.config);
  c.workspace_floats = v.workspace_floats;
  c.launch = [launch = std::move(v.launch), residual, scratch = v.workspace_floats > 0](const float* const* in,
                                                                                      float* const* out, Stream s) {
    kernels::ConvArgs args;
    args.x = in[0];
    args.y = out[0];
    args.residual = residual ? in[1] : nullptr;
    args.workspace = scratch ? const_cast<float*>(in[residual ? 2 : 1]) : nullptr;
    launch(args, s);
  };
  return c;
}

// A registry variant of a pooled layer's convolution without its pooling, then the pooling as a second launch,
// through a workspace (the last input) that holds the full-resolution conv output, followed by the variant's
// own workspace when it needs one.
KernelCandidate unfused_pool_candidate(kernels::ConvVariant v, const kernels::ConvLayer& pooled) {
  KernelCandidate c;
  c.name = v.name + "+pool";
  c.config = (v.config.empty() ? "" : v.config + ", ") + "then pool";
  const int64_t conv_floats = pooled.conv_floats();
  c.workspace_floats = conv_floats + v.workspace_floats;
  c.launch = [launch = std::move(v.launch), pool = pool_launch(pooled), residual = pooled.residual, conv_floats,
              scratch = v.workspace_floats > 0](const float* const* in, float* const* out, Stream s) {
    float* conv_out = const_cast<float*>(in[residual ? 2 : 1]);
    kernels::ConvArgs args;
    args.x = in[0];
    args.y = conv_out;
    args.residual = residual ? in[1] : nullptr;
    args.workspace = scratch ? conv_out + conv_floats : nullptr;
    launch(args, s);
    pool(conv_out, out[0], s);
  };
  return c;
}

// A 1x1 convolution of 1x1 maps (a squeeze-and-excitation gate's layers, a classifier head written as a
// convolution) is a fully connected layer: out [N, F] = x [N, C] W[F, C]^T + bias, with its activation, or with the
// residual as C where it has no bias. Its step is also offered to the Gemm kernels, ours and cuBLASLt's (inputs: x,
// the residual, then the workspace). None where the layer is anything more. `what` names the node in warnings.
std::vector<KernelCandidate> matrix_product_candidates(const std::string& what, const kernels::ConvLayer& L,
                                                       const float* w_device, const LowerContext& lc) {
  const kernels::ConvGeometry& g = L.g;
  const bool product = g.H == 1 && g.W == 1 && g.OH == 1 && g.OW == 1 && g.KH == 1 && g.KW == 1 && g.groups == 1 &&
                       !L.pooled() && !L.in.any() && L.e.out_image_floats == 0 && !(L.residual && L.e.bias);
  if (!product) return {};
  kernels::GemmDesc desc;
  desc.m = g.N;
  desc.n = g.F;
  desc.k = g.C;
  desc.lda = g.C;
  desc.trans_b = true;
  desc.ldb = g.C;
  desc.act = L.e.param_act;
  desc.act_alpha = L.e.alpha;
  desc.act_beta = L.e.beta;
  GemmBinding bind;
  bind.b = -1;
  bind.b_fixed = w_device;
  bind.c = -1;
  if (L.residual) {
    bind.c = 1;
    desc.beta = 1.0f;
    desc.c_row_stride = g.F;
    desc.c_col_stride = 1;
  } else if (L.e.bias) {
    bind.c_fixed = L.e.bias;
    desc.beta = 1.0f;
    desc.c_col_stride = 1;  // a row: the bias of each filter, for every image
  }
  bind.workspace = L.residual ? 2 : 1;
  const std::string config = fmt::format("as a matrix product {}x{}x{}", desc.m, desc.n, desc.k);
  return gemm_candidates(what, desc, bind, config, lc.context.device.sm_count);
}

}  // namespace

std::vector<KernelCandidate> conv_kernel_candidates(const kernels::ConvLayer& L, const float* w_host,
                                                   const float* bias_host, const float* w_device, LowerContext& lc,
                                                   std::vector<std::string>* rejected) {
  std::vector<KernelCandidate> candidates;
  const kernels::DeviceCaps dev = device_caps(lc.context.device);
  const kernels::UploadFn upload = [&](const std::vector<float>& data, const std::string& layout) {
    return lc.context.weights.upload(data, layout);
  };
  for (const kernels::FamilyCandidates& fc : kernels::conv_candidates(L, dev, w_host, bias_host, w_device, upload)) {
    if (!fc.rejected.empty() && rejected) rejected->push_back(fmt::format("{}: {}", fc.family->name(), fc.rejected));
    for (const kernels::ConvVariant& v : fc.variants) candidates.push_back(registry_candidate(v, L.residual));
  }
  if (L.pooled() && (L.e.out_image_floats == 0 || !L.pooled_globally())) {  // (a global pooling writes dense outputs)
    kernels::ConvLayer unpooled = L;  // into the workspace: dense; the pooling writes the step's output
    unpooled.e.pool = kernels::PoolGeometry{};
    unpooled.e.out_image_floats = 0;
    for (const kernels::FamilyCandidates& fc : kernels::conv_candidates(unpooled, dev, w_host, bias_host, w_device, upload)) {
      for (const kernels::ConvVariant& v : fc.variants) candidates.push_back(unfused_pool_candidate(v, L));
    }
  }
  return candidates;
}

namespace {

void lower_conv(const ir::Node& node, LowerContext& lc) {
  const ConvStep cs = describe_conv(node, lc);
  const kernels::ConvLayer& L = cs.layer;
  const ir::HostTensor& w = *lc.graph.constant_of(node.input(1));
  const float* w_device = lc.weight(node.input(1));
  const ir::HostTensor* bias = node.has_input(2) ? lc.graph.constant_of(node.input(2)) : nullptr;
  CNNRT_CHECK(!node.has_input(2) || bias != nullptr, ErrorCode::Unsupported, "convolution bias computed at run time");

  std::vector<std::string> rejected;
  std::vector<KernelCandidate> candidates =
      conv_kernel_candidates(L, w.f32(), bias ? bias->f32() : nullptr, w_device, lc, &rejected);
  for (KernelCandidate& c : matrix_product_candidates(ir::node_label(node), L, w_device, lc)) {
    candidates.push_back(std::move(c));
  }
  candidates.push_back(reference_candidate(L, w_device));

  TuneShapes shapes;
  shapes.input_floats = {L.in_extent_floats()};
  if (L.residual) shapes.input_floats.push_back(ir::numel(input_shape(lc, node, ir::fused::kResidualInput)));
  shapes.output_floats = L.out_extent_floats();
  const Choice choice = choose_kernel(lc, cs.signature, candidates, shapes);
  KernelCandidate& chosen = candidates[choice.index];
  std::vector<int> inputs = {lc.slot(node.input(0))};
  if (L.residual) inputs.push_back(lc.slot(node.input(ir::fused::kResidualInput)));
  if (chosen.workspace_floats > 0) inputs.push_back(lc.workspace(chosen.workspace_floats * 4, "conv workspace"));
  Step& step = lc.add_step(node, chosen.name, chosen.config.empty() ? choice.how : chosen.config + ", " + choice.how,
                           inputs, output_slots(lc, node), chosen.launch);
  step.candidates = choice.timings;
  step.alternatives = close_alternatives(choice, candidates);
  step.not_eligible = std::move(rejected);
  step.conv = std::make_shared<ConvStepInfo>(ConvStepInfo{L, w_device, chosen.workspace_floats});
  step.flops = L.flops();
  step.min_bytes = 4.0 * (double(shapes.input_floats[0]) + double(w.numel()) + double(L.out_floats()) +
                          (L.residual ? double(L.conv_floats()) : 0.0));
}

void lower_pool(const ir::Node& node, LowerContext& lc) {
  const ir::Shape& x = input_shape(lc, node, 0);
  const auto axes = spatial_windows(node.attrs, x, {}, true, node.op.c_str());
  const auto [rows, cols] = rows_cols(axes);
  kernels::Pool2dDesc desc;
  desc.planes = x[0] * x[1];
  desc.rows = rows;
  desc.cols = cols;
  desc.count_include_pad = node.attrs.get_int("count_include_pad", 0) != 0;
  desc.channels = x[1];
  desc.out_image_floats = lc.image_floats(node.outputs.at(0));  // a strided block of a Concat's output, or 0
  CNNRT_CHECK(lc.image_floats(node.input(0)) == 0, ErrorCode::Internal, "a pooling of a strided input");
  const auto kind = node.op == "MaxPool" ? kernels::PoolOp::Max : kernels::PoolOp::Average;
  const std::vector<int> inputs = {lc.slot(node.input(0))};
  lc.add_step(node, node.op == "MaxPool" ? "max_pool2d" : "avg_pool2d",
              fmt::format("{}x{}/{}x{}", rows.kernel, cols.kernel, rows.stride, cols.stride), inputs,
              output_slots(lc, node),
              [kind, desc](const float* const* in, float* const* out, Stream s) { kernels::launch_pool2d(kind, in[0], out[0], desc, s); });
}

void lower_global_pool(const ir::Node& node, LowerContext& lc) {
  const ir::Shape& x = input_shape(lc, node, 0);
  CNNRT_CHECK(x.size() >= 3, ErrorCode::Unsupported, "{} of a rank-{} input", node.op, x.size());
  const int64_t planes = x[0] * x[1], plane = product(x, 2);
  const auto kind = node.op == "GlobalMaxPool" ? kernels::PoolOp::Max : kernels::PoolOp::Average;
  add_simple_step(lc, node, node.op == "GlobalMaxPool" ? "global_max_pool" : "global_avg_pool",
                  fmt::format("{} planes of {}", planes, plane),
                  [kind, planes, plane](const float* const* in, float* const* out, Stream s) {
                    kernels::launch_global_pool(kind, in[0], out[0], planes, plane, s);
                  });
}

}  // namespace

KernelActivation kernel_activation(const ir::fused::Activation& a) {
  KernelActivation k;
  k.alpha = a.alpha;
  k.beta = a.beta;
  if (a.op == "Relu") k.act = kernels::ParamAct::Relu;
  else if (a.op == "LeakyRelu") k.act = kernels::ParamAct::LeakyRelu;
  else if (a.op == "Clip") k.act = kernels::ParamAct::Clip;
  else if (a.op == "Sigmoid") k.act = kernels::ParamAct::Sigmoid;
  else if (a.op == "Tanh") k.act = kernels::ParamAct::Tanh;
  else if (a.op == "HardSigmoid") k.act = kernels::ParamAct::HardSigmoid;
  else if (a.op == "HardSwish") k.act = kernels::ParamAct::HardSwish;
  else if (a.op == "Swish") k.act = kernels::ParamAct::Swish;
  else if (a.op == "Gelu") k.act = kernels::ParamAct::Gelu;
  else fail(ErrorCode::Internal, "unknown fused activation '{}'", a.op);
  return k;
}

KernelActivation kernel_activation(const ir::Node& fused) {
  const std::optional<ir::fused::Activation> a = ir::fused::fused_activation(fused);
  if (!a) return {};
  try {
    return kernel_activation(*a);
  } catch (const Error& e) {
    rethrow_with_prefix(e, ir::node_label(fused));
  }
}

PoolWindow describe_pool(const ir::Node& node, LowerContext& lc) {
  const ir::Shape& x = input_shape(lc, node, 0);
  const auto [rows, cols] = rows_cols(spatial_windows(node.attrs, x, {}, true, node.op.c_str()));
  PoolWindow w;
  w.channels = to_int(x[1], "channels");
  w.H = to_int(rows.input, "pool input");
  w.W = to_int(cols.input, "pool input");
  kernels::PoolGeometry& p = w.pool;
  p.kind = node.op == "MaxPool" ? kernels::FusedPool::Max : kernels::FusedPool::Avg;
  p.kh = to_int(rows.kernel, "pool kernel");
  p.kw = to_int(cols.kernel, "pool kernel");
  p.sh = to_int(rows.stride, "pool stride");
  p.sw = to_int(cols.stride, "pool stride");
  p.pad_top = to_int(rows.pad_begin, "pool pad");
  p.pad_left = to_int(cols.pad_begin, "pool pad");
  p.pad_bottom = to_int(rows.pad_end, "pool pad");
  p.pad_right = to_int(cols.pad_end, "pool pad");
  p.dil_h = to_int(rows.dilation, "pool dilation");
  p.dil_w = to_int(cols.dilation, "pool dilation");
  p.PH = to_int(rows.output, "pooled height");
  p.PW = to_int(cols.output, "pooled width");
  p.count_include_pad = node.attrs.get_int("count_include_pad", 0) != 0;
  return w;
}

kernels::DeviceCaps device_caps(const gpu::DeviceInfo& device) {
  kernels::DeviceCaps caps;
  caps.cc_major = device.cc_major;
  caps.cc_minor = device.cc_minor;
  caps.sm_count = device.sm_count;
  caps.smem_optin = static_cast<int>(device.smem_per_block_optin);
  caps.sm90a_code = device.sm90a_code;
  return caps;
}

ConvStep describe_conv(const ir::Node& node, LowerContext& lc) {
  ConvStep cs;
  kernels::ConvLayer& L = cs.layer;
  const ir::Shape& x = input_shape(lc, node, 0);
  const ir::HostTensor* w = lc.graph.constant_of(node.input(1));
  CNNRT_CHECK(w != nullptr, ErrorCode::Unsupported, "convolution weights computed at run time");
  const ir::Shape& ws = w->shape();
  const std::vector<int64_t> kernel(ws.begin() + 2, ws.end());
  const auto [rows, cols] = rows_cols(spatial_windows(node.attrs, x, kernel, false, "convolution"));
  try {
    L.g = kernels::conv_geometry(x[0], x[1], ws[0], node.attrs.get_int("group", 1), rows, cols);
  } catch (const std::length_error& e) {
    fail(ErrorCode::Unsupported, "{}", e.what());
  }
  const bool fused = node.op == ir::fused::kFusedConv;
  L.e.bias = node.has_input(2) ? lc.weight(node.input(2)) : nullptr;
  L.residual = fused && node.has_input(ir::fused::kResidualInput);
  const KernelActivation act = fused ? kernel_activation(node) : KernelActivation{};
  L.e.param_act = act.act;
  L.e.alpha = act.alpha;
  L.e.beta = act.beta;
  if (fused && ir::fused::has_pool(node)) {
    const ir::Attributes pa = ir::fused::pool_attributes(node);
    const ir::Shape conv_shape = x.size() == 4 ? ir::Shape{x[0], ws[0], rows.output, cols.output}
                                               : ir::Shape{x[0], ws[0], cols.output};
    const auto [prows, pcols] = rows_cols(spatial_windows(pa, conv_shape, {}, true, "pooling"));
    kernels::PoolGeometry& p = L.e.pool;
    p.kind = node.attrs.get_string(ir::fused::kPool, "") == "MaxPool" ? kernels::FusedPool::Max : kernels::FusedPool::Avg;
    p.kh = to_int(prows.kernel, "pool kernel");
    p.kw = to_int(pcols.kernel, "pool kernel");
    p.sh = to_int(prows.stride, "pool stride");
    p.sw = to_int(pcols.stride, "pool stride");
    p.pad_top = to_int(prows.pad_begin, "pool pad");
    p.pad_left = to_int(pcols.pad_begin, "pool pad");
    p.pad_bottom = to_int(prows.pad_end, "pool pad");
    p.pad_right = to_int(pcols.pad_end, "pool pad");
    p.dil_h = to_int(prows.dilation, "pool dilation");
    p.dil_w = to_int(pcols.dilation, "pool dilation");
    p.PH = to_int(prows.output, "pooled height");
    p.PW = to_int(pcols.output, "pooled width");
    p.count_include_pad = pa.get_int("count_include_pad", 0) != 0;
  }
  CNNRT_CHECK(L.out_floats() == ir::numel(output_shape(lc, node)), ErrorCode::Internal,
              "the convolution's output {} does not match its geometry", ir::shape_str(output_shape(lc, node)));
  L.e.out_image_floats = lc.image_floats(node.outputs.at(0));
  L.in.image_floats = lc.image_floats(node.input(0));
  const kernels::ConvGeometry& g = L.g;
  const kernels::PoolGeometry& p = L.e.pool;
  cs.signature = fmt::format("conv x={} w={} s={}x{} p={},{},{},{} d={}x{} g={} bias={} act={} a={} b={} res={} pool={}",
                             ir::shape_str(x), ir::shape_str(ws), g.stride_h, g.stride_w, g.pad_top, g.pad_left,
                             g.pad_bottom, g.pad_right, g.dil_h, g.dil_w, g.groups, L.e.bias != nullptr,
                             static_cast<int>(L.e.param_act), L.e.alpha, L.e.beta, L.residual, static_cast<int>(p.kind));
  if (L.pooled()) {
    cs.signature += fmt::format(" {}x{}/{}x{} p={},{},{},{} d={}x{} out={}x{} cip={}", p.kh, p.kw, p.sh, p.sw, p.pad_top,
                                p.pad_left, p.pad_bottom, p.pad_right, p.dil_h, p.dil_w, p.PH, p.PW, p.count_include_pad);
  }
  if (L.e.out_image_floats != 0) cs.signature += fmt::format(" image={}", L.e.out_image_floats);
  if (L.in.image_floats != 0) cs.signature += fmt::format(" in_image={}", L.in.image_floats);
  return cs;
}
std::vector<LoweringEntry> window_lowerings() {
  return {{"Conv", lower_conv},
          {"FusedConv", lower_conv},
          {"MaxPool", lower_pool},
          {"AveragePool", lower_pool},
          {"GlobalAveragePool", lower_global_pool},
          {"GlobalMaxPool", lower_global_pool}};
}

}  // namespace cnnrt::plan
