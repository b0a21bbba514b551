// Lowering of Conv / FusedConv (kernel choice by eligibility, then measurement) and of pooling.
//
// Every convolution step lists its eligible kernels in heuristic order (the choice when tuning is off):
// depthwise, single-input-channel, small-map and general (small-map after general above batch 64), the
// tensor-core kernels; and last the reference: the plain direct kernel followed by separate
// residual/activation/pooling launches. The tuner runs the reference first and drops any
// candidate whose output disagrees with it.
#include <climits>
#include <memory>

#include "ir/window.hpp"
#include "kernels/broadcast.cuh"
#include "kernels/conv2d_c1.cuh"
#include "kernels/conv2d_depthwise.cuh"
#include "kernels/conv2d_direct.cuh"
#include "kernels/conv2d_general.cuh"
#include "kernels/conv2d_small.cuh"
#include "kernels/conv2d_tc.cuh"
#include "kernels/conv2d_wg.cuh"
#include "kernels/elementwise.cuh"
#include "kernels/pool.cuh"
#include "plan/gpu/conv_step.hpp"
#include "plan/gpu/lower_util.hpp"
#include "plan/gpu/tuner.hpp"

namespace cnnrt::plan {

bool fused_activation(const ir::Node& node, kernels::UnaryOp* op, kernels::UnaryParams* params,
                      const char* alpha_attr, const char* beta_attr);

namespace {

int to_int(int64_t v, const char* what) {
  CNNRT_CHECK(v >= 0 && v <= INT_MAX, ErrorCode::Unsupported, "{} {} is too large for the GPU kernels", what, v);
  return static_cast<int>(v);
}

kernels::SlidingAxis sliding_axis(const ir::WindowAxis& a) {
  kernels::SlidingAxis s;
  s.input = a.input;
  s.output = a.output;
  s.kernel = a.kernel;
  s.stride = a.stride;
  s.dilation = a.dilation;
  s.pad_begin = a.pad_begin;
  s.pad_end = a.pad_end;
  return s;
}

// A 1-D window op runs as 2-D with a unit row axis.
std::pair<kernels::SlidingAxis, kernels::SlidingAxis> rows_cols(const std::vector<ir::WindowAxis>& axes) {
  if (axes.size() == 1) return {kernels::SlidingAxis{}, sliding_axis(axes[0])};
  return {sliding_axis(axes[0]), sliding_axis(axes[1])};
}

std::vector<ir::WindowAxis> spatial_windows(const ir::Attributes& attrs, const ir::Shape& input,
                                            const std::vector<int64_t>& kernel, bool pooling, const char* what) {
  CNNRT_CHECK(input.size() == 3 || input.size() == 4, ErrorCode::Unsupported,
              "{} of a rank-{} input (1-D and 2-D are supported)", what, input.size());
  return ir::resolve_window(attrs, ir::Shape(input.begin() + 2, input.end()), kernel, pooling);
}

// The pooling attributes of a FusedConv as an ordinary pooling node's attributes.
ir::Attributes pool_attributes(const ir::Attributes& fused) {
  ir::Attributes a;
  a.set("kernel_shape", fused.get_ints("pool_kernel_shape"));
  if (fused.has("pool_strides")) a.set("strides", fused.get_ints("pool_strides"));
  if (fused.has("pool_pads")) a.set("pads", fused.get_ints("pool_pads"));
  if (fused.has("pool_dilations")) a.set("dilations", fused.get_ints("pool_dilations"));
  a.set("ceil_mode", fused.get_int("pool_ceil_mode", 0));
  return a;
}


// The reference: the plain direct kernel, then residual, activation and pooling as separate launches
// (pooling through a workspace holding the full-resolution conv output).
KernelCandidate reference_candidate(const ConvStep& cs, const float* weights) {
  KernelCandidate c;
  c.name = "direct_reference";
  c.reference = true;
  const bool pooled = cs.epilogue.pool.kind != kernels::FusedPool::None;
  c.workspace_floats = pooled ? cs.conv_floats : 0;
  const kernels::BroadcastDesc same = kernels::make_broadcast_desc(1, &cs.conv_floats, 1, &cs.conv_floats, 1, &cs.conv_floats);
  c.config = pooled ? "direct conv, then pool" : "direct conv";
  c.launch = [cs, weights, same, pooled](const float* const* in, float* const* out, Stream s) {
    const int workspace_index = cs.has_residual ? 2 : 1;
    float* conv_out = pooled ? const_cast<float*>(in[workspace_index]) : out[0];
    kernels::launch_conv2d_direct(in[0], weights, cs.epilogue.bias, conv_out, cs.direct, s);
    if (cs.has_residual) kernels::launch_binary(kernels::BinaryOp::Add, conv_out, in[1], conv_out, same, s);
    if (cs.has_activation) kernels::launch_unary(cs.act_op, cs.act_params, conv_out, conv_out, cs.conv_floats, s);
    if (pooled) {
      const auto kind = cs.epilogue.pool.kind == kernels::FusedPool::Max ? kernels::PoolOp::Max : kernels::PoolOp::Average;
      kernels::launch_pool2d(kind, conv_out, out[0], cs.pool, s);
    }
  };
  return c;
}

// `w`, `bias`: the host constants (bias may be null), for the kernels that pack their own layout.
std::vector<KernelCandidate> conv_candidates(const ConvStep& cs, const ir::HostTensor& w, const ir::HostTensor* bias,
                                             const float* w_device, LowerContext& lc) {
  std::vector<KernelCandidate> out;
  const kernels::ConvGeometry& g = cs.g;
  const kernels::Epilogue& e = cs.epilogue;
  const bool res = cs.has_residual;
  auto with_residual = [res](kernels::Epilogue ep, const float* const* in) {
    ep.residual = res ? in[1] : nullptr;
    return ep;
  };
  for (const auto& v : kernels::conv2d_depthwise_variants(g, e)) {
    out.push_back({v.name, "", [v, g, e, w_device, with_residual](const float* const* in, float* const* o, Stream s) {
                     v.launch(in[0], o[0], w_device, g, with_residual(e, in), s);
                   }});
  }
  if (kernels::conv2d_c1_supports(g, e)) {
    // Filters and bias travel by value in the kernel's parameter block (the constant bank).
    auto filters = std::make_shared<kernels::C1Filters>();
    kernels::pack_c1_filters(w.f32(), bias ? bias->f32() : nullptr, g.F, g.KH, g.KW, filters.get());
    // ... or, for the "_smemw" twins, from a device buffer staged into shared memory with the input tile.
    const float* smem_packed = nullptr;
    if (g.KH == g.KW && (g.KH == 1 || g.KH == 3 || g.KH == 5)) {  // the sizes with _smemw instantiations
      smem_packed = lc.context.weights.upload(
          kernels::pack_c1_smem_filters(w.f32(), bias ? bias->f32() : nullptr, g.F, g.KH), "conv_c1_smem");
    }
    for (const auto& v : kernels::conv2d_c1_variants(g, e)) {
      if (v.smem_weights && !smem_packed) continue;
      out.push_back({v.name, "", [v, g, e, filters, smem_packed, with_residual](const float* const* in, float* const* o, Stream s) {
                       v.launch(in[0], o[0], g, with_residual(e, in), *filters, smem_packed, s);
                     }});
    }
  }
  const bool general = kernels::conv2d_general_supports(g, e), small = kernels::conv2d_small_supports(g, e);
  // The general and small-map kernels read the same [C][K][K][Fpad] filters.
  const float* packed_cwf =
      general || small
          ? lc.context.weights.upload(kernels::pack_general_filters(w.f32(), g.F, g.C, g.KH, g.KW), "conv_general_cwf")
          : nullptr;
  auto add_small = [&] {
    for (const auto& v : kernels::conv2d_small_variants(g, e, lc.context.device.sm_count)) {
      out.push_back({v.name, fmt::format("{} filters x {} channel slices a block", v.config.ft * v.config.fg, v.config.cs),
                     [v, g, e, packed_cwf, with_residual](const float* const* in, float* const* o, Stream s) {
                       v.launch(in[0], o[0], packed_cwf, g, with_residual(e, in), v.config, s);
                     }});
    }
  };
  // Heuristic order: the small-map kernel leads for a few images (it fills the SMs where the general
  // kernel's tiles cannot), the general kernel for larger batches.
  const bool small_first = g.N <= 64;
  if (small_first) add_small();
  if (general) {
    for (const auto& v : kernels::conv2d_general_variants(g, e, lc.context.device.sm_count)) {
      out.push_back({v.name, v.split > 1 ? fmt::format("cluster split {}", v.split) : "",
                     [v, g, e, packed_cwf, with_residual](const float* const* in, float* const* o, Stream s) {
                       v.launch(in[0], o[0], packed_cwf, g, with_residual(e, in), v.split, s);
                     }});
    }
  }
  if (!small_first) add_small();
  if (kernels::conv2d_tc_supports(g, e)) {
    // The filters split into TF32 (big, small) halves once, here; the kernel splits the input.
    const float* packed = lc.context.weights.upload(kernels::pack_tc_filters(w.f32(), g.F, g.C, g.KH, g.KW),
                                                    "conv_tc_split");
    for (const auto& v : kernels::conv2d_tc_variants(g, e, lc.context.device.sm_count)) {
      out.push_back({v.name, "3xTF32 tensor cores", [v, g, e, packed, with_residual](const float* const* in, float* const* o, Stream s) {
                       v.launch(in[0], o[0], packed, g, with_residual(e, in), s);
                     }});
    }
  }
  const gpu::DeviceInfo& dev = lc.context.device;
  if (kernels::conv2d_wg_supports(g, e, dev.cc_major, dev.cc_minor)) {
    // The same split for the wgmma kernels, packed with K ordered (tap, channel).
    const float* packed = lc.context.weights.upload(kernels::pack_wg_filters(w.f32(), g.F, g.C, g.KH, g.KW),
                                                    "conv_wg_split");
    for (const auto& v : kernels::conv2d_wg_variants(g, e, dev.sm_count, dev.cc_major, dev.cc_minor)) {
      out.push_back({v.name, "3xTF32 wgmma", [v, g, e, packed, with_residual](const float* const* in, float* const* o, Stream s) {
                       v.launch(in[0], o[0], packed, g, with_residual(e, in), s);
                     }});
    }
  }
  out.push_back(reference_candidate(cs, w_device));
  return out;
}

void lower_conv(const ir::Node& node, LowerContext& lc) {
  ConvStep cs = describe_conv(node, lc);
  const ir::HostTensor& w = *lc.graph.constant_of(node.input(1));
  const float* w_device = lc.weight(node.input(1));
  const ir::HostTensor* bias = node.has_input(2) ? lc.graph.constant_of(node.input(2)) : nullptr;
  std::vector<KernelCandidate> candidates = conv_candidates(cs, w, bias, w_device, lc);

  TuneShapes shapes;
  shapes.input_floats = {ir::numel(input_shape(lc, node, 0))};
  if (cs.has_residual) shapes.input_floats.push_back(ir::numel(input_shape(lc, node, 3)));
  shapes.output_floats = cs.out_floats;
  Choice choice;
  if (lc.context.tuner) {
    choice = lc.context.tuner->choose(cs.signature, candidates, shapes);
  } else {
    choice.how = "heuristic";
  }
  KernelCandidate& chosen = candidates[choice.index];
  std::vector<int> inputs = {lc.slot(node.input(0))};
  if (cs.has_residual) inputs.push_back(lc.slot(node.input(3)));
  if (chosen.workspace_floats > 0) inputs.push_back(lc.workspace(chosen.workspace_floats * 4, "conv workspace"));
  Step& step = lc.add_step(node, chosen.name, chosen.config.empty() ? choice.how : chosen.config + ", " + choice.how,
                           inputs, output_slots(lc, node), chosen.launch);
  step.candidates = choice.timings;
  const kernels::ConvGeometry& g = cs.g;
  auto info = std::make_shared<ConvInfo>();
  info->N = g.N; info->C = g.C; info->H = g.H; info->W = g.W; info->F = g.F; info->KH = g.KH; info->KW = g.KW;
  info->stride_h = g.stride_h; info->stride_w = g.stride_w; info->dil_h = g.dil_h; info->dil_w = g.dil_w;
  info->groups = g.groups; info->OH = g.OH; info->OW = g.OW;
  info->pad_top = cs.direct.rows.pad_begin; info->pad_bottom = cs.direct.rows.pad_end;
  info->pad_left = cs.direct.cols.pad_begin; info->pad_right = cs.direct.cols.pad_end;
  info->weights = w_device;
  info->bias = cs.epilogue.bias;
  info->residual = cs.has_residual;
  info->activation = node.attrs.get_string("activation", "");
  info->alpha = cs.epilogue.alpha;
  info->beta = cs.epilogue.beta;
  if (cs.epilogue.pool.kind != kernels::FusedPool::None) {
    const kernels::PoolGeometry& p = cs.epilogue.pool;
    info->pool = p.kind == kernels::FusedPool::Max ? "MaxPool" : "AveragePool";
    info->pool_kh = p.kh; info->pool_kw = p.kw; info->pool_sh = p.sh; info->pool_sw = p.sw;
    info->pool_pad_top = p.pad_top; info->pool_pad_left = p.pad_left;
    info->pool_pad_bottom = p.pad_bottom; info->pool_pad_right = p.pad_right;
    info->pool_dil_h = p.dil_h; info->pool_dil_w = p.dil_w;
    info->PH = p.PH; info->PW = p.PW;
    info->pool_count_include_pad = p.count_include_pad;
  }
  step.conv = std::move(info);
  step.flops = 2.0 * double(g.N) * g.F * g.OH * g.OW * (double(g.C) / g.groups) * g.KH * g.KW;
  step.min_bytes = 4.0 * (double(ir::numel(input_shape(lc, node, 0))) + double(w.numel()) + double(cs.out_floats) +
                          (cs.has_residual ? double(cs.conv_floats) : 0.0));
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

kernels::ParamAct param_act(const std::string& act) {
  if (act == "Relu") return kernels::ParamAct::Relu;
  if (act == "LeakyRelu") return kernels::ParamAct::LeakyRelu;
  if (act == "Clip") return kernels::ParamAct::Clip;
  if (act == "Sigmoid") return kernels::ParamAct::Sigmoid;
  if (act == "Tanh") return kernels::ParamAct::Tanh;
  return kernels::ParamAct::None;
}

ConvStep describe_conv(const ir::Node& node, LowerContext& lc) {
  ConvStep cs;
  const ir::Shape& x = input_shape(lc, node, 0);
  const ir::HostTensor* w = lc.graph.constant_of(node.input(1));
  CNNRT_CHECK(w != nullptr, ErrorCode::Unsupported, "convolution weights computed at run time");
  const ir::Shape& ws = w->shape();
  const std::vector<int64_t> kernel(ws.begin() + 2, ws.end());
  const auto axes = spatial_windows(node.attrs, x, kernel, false, "convolution");
  const auto [rows, cols] = rows_cols(axes);
  kernels::ConvGeometry& g = cs.g;
  g.N = to_int(x[0], "batch");
  g.C = to_int(x[1], "channels");
  g.F = to_int(ws[0], "filters");
  g.groups = to_int(node.attrs.get_int("group", 1), "groups");
  g.H = to_int(rows.input, "height");
  g.W = to_int(cols.input, "width");
  g.KH = to_int(rows.kernel, "kernel height");
  g.KW = to_int(cols.kernel, "kernel width");
  g.OH = to_int(rows.output, "output height");
  g.OW = to_int(cols.output, "output width");
  g.stride_h = to_int(rows.stride, "stride");
  g.stride_w = to_int(cols.stride, "stride");
  g.pad_top = to_int(rows.pad_begin, "pad");
  g.pad_left = to_int(cols.pad_begin, "pad");
  g.dil_h = to_int(rows.dilation, "dilation");
  g.dil_w = to_int(cols.dilation, "dilation");
  cs.direct.batch = g.N;
  cs.direct.in_channels = g.C;
  cs.direct.out_channels = g.F;
  cs.direct.groups = g.groups;
  cs.direct.rows = rows;
  cs.direct.cols = cols;
  cs.conv_floats = int64_t(g.N) * g.F * g.OH * g.OW;
  cs.out_floats = ir::numel(output_shape(lc, node));

  kernels::Epilogue& e = cs.epilogue;
  e.bias = node.has_input(2) ? lc.weight(node.input(2)) : nullptr;
  cs.has_residual = node.op == "FusedConv" && node.has_input(3);
  const std::string act = node.attrs.get_string("activation", "");
  e.param_act = param_act(act);
  e.alpha = node.attrs.get_float("alpha", 0.0f);
  e.beta = node.attrs.get_float("beta", 0.0f);
  cs.has_activation = node.op == "FusedConv" && fused_activation(node, &cs.act_op, &cs.act_params, "alpha", "beta");

  const std::string pool = node.op == "FusedConv" ? node.attrs.get_string("pool", "") : "";
  if (!pool.empty()) {
    const ir::Attributes pa = pool_attributes(node.attrs);
    const ir::Shape conv_shape = x.size() == 4 ? ir::Shape{x[0], ws[0], rows.output, cols.output}
                                               : ir::Shape{x[0], ws[0], cols.output};
    const auto paxes = spatial_windows(pa, conv_shape, {}, true, "pooling");
    const auto [prows, pcols] = rows_cols(paxes);
    kernels::PoolGeometry& p = e.pool;
    p.kind = pool == "MaxPool" ? kernels::FusedPool::Max : kernels::FusedPool::Avg;
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
    p.count_include_pad = node.attrs.get_int("pool_count_include_pad", 0) != 0;
    CNNRT_CHECK(cs.out_floats == int64_t(g.N) * g.F * p.PH * p.PW, ErrorCode::Internal,
                "fused pooling output {} does not match the pooled geometry {}x{}", ir::shape_str(output_shape(lc, node)),
                p.PH, p.PW);
    cs.pool.planes = int64_t(g.N) * g.F;
    cs.pool.rows = prows;
    cs.pool.cols = pcols;
    cs.pool.count_include_pad = p.count_include_pad;
  }
  cs.signature = fmt::format("conv x={} w={} s={}x{} p={},{},{},{} d={}x{} g={} bias={} act={} a={} b={} res={} pool={}",
                             ir::shape_str(x), ir::shape_str(ws), g.stride_h, g.stride_w, g.pad_top, g.pad_left,
                             rows.pad_end, cols.pad_end, g.dil_h, g.dil_w, g.groups, e.bias != nullptr, act, e.alpha,
                             e.beta, cs.has_residual, pool);
  if (!pool.empty()) {
    const auto& p = e.pool;
    cs.signature += fmt::format(" {}x{}/{}x{} p={},{},{},{} d={}x{} out={}x{} cip={}", p.kh, p.kw, p.sh, p.sw, p.pad_top,
                                p.pad_left, p.pad_bottom, p.pad_right, p.dil_h, p.dil_w, p.PH, p.PW, p.count_include_pad);
  }
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
