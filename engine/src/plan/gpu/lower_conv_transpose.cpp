// Lowering of ConvTranspose and FusedConvTranspose (canonical form, docs/ir-ops.md) to the gather kernel
// (kernels/conv_transpose2d.cuh), bias and activation fused. The variants differ in how many output channels
// a thread computes; the tuner measures them when tuning is on. Weights and bias may be constants (uploaded
// once) or computed at run time (then they are step inputs after X).
#include "ir/fused.hpp"
#include "kernels/conv_transpose2d.cuh"
#include "plan/gpu/conv_step.hpp"
#include "plan/gpu/lower_util.hpp"
#include "plan/gpu/tuner.hpp"

namespace cnnrt::plan {

namespace {

// The transposed axis i of the canonical node (ir::resolve_transposed_window's pads), with extents from the
// bound shapes.
kernels::SlidingAxis transposed_axis(const ir::Node& node, const ir::Shape& x, const ir::Shape& y, size_t i) {
  const size_t spatial = x.size() - 2;
  const std::vector<int64_t> kernel = node.attrs.get_ints("kernel_shape");
  const std::vector<int64_t> strides = node.attrs.get_ints("strides");
  const std::vector<int64_t> dilations = node.attrs.get_ints("dilations");
  const std::vector<int64_t> pads = node.attrs.get_ints("pads");
  CNNRT_CHECK(kernel.size() == spatial && strides.size() == spatial && dilations.size() == spatial &&
                  pads.size() == 2 * spatial,
              ErrorCode::Internal, "ConvTranspose is not canonical for input {}", ir::shape_str(x));
  kernels::SlidingAxis a;
  a.input = x[2 + i];
  a.output = y[2 + i];
  a.kernel = kernel[i];
  a.stride = strides[i];
  a.dilation = dilations[i];
  a.pad_begin = pads[i];
  a.pad_end = pads[spatial + i];
  return a;
}

void lower_conv_transpose(const ir::Node& node, LowerContext& lc) {
  const ir::Shape& x = input_shape(lc, node, 0);
  const ir::Shape& y = output_shape(lc, node);
  const ir::Shape& w = input_shape(lc, node, 1);
  CNNRT_CHECK(x.size() == 3 || x.size() == 4, ErrorCode::Unsupported,
              "transposed convolution of a rank-{} input (1-D and 2-D are supported)", x.size());
  kernels::ConvTranspose2dDesc desc;
  desc.batch = x[0];
  desc.in_channels = x[1];
  desc.out_channels = y[1];
  desc.groups = node.attrs.get_int("group", 1);
  if (x.size() == 4) {
    desc.rows = transposed_axis(node, x, y, 0);
    desc.cols = transposed_axis(node, x, y, 1);
  } else {
    desc.cols = transposed_axis(node, x, y, 0);
  }

  // Step inputs: X, then the weights and the bias when they are computed at run time.
  std::vector<int> inputs = {lc.slot(node.input(0))};
  TuneShapes shapes;
  shapes.input_floats = {ir::numel(x)};
  const bool weights_constant = lc.graph.values[node.input(1)].is_constant();
  const float* weights = weights_constant ? lc.weight(node.input(1)) : nullptr;
  const int weights_input = weights_constant ? -1 : static_cast<int>(inputs.size());
  if (!weights_constant) {
    inputs.push_back(lc.slot(node.input(1)));
    shapes.input_floats.push_back(ir::numel(w));
  }
  const bool has_bias = node.has_input(2);
  const bool bias_constant = has_bias && lc.graph.values[node.input(2)].is_constant();
  kernels::Epilogue epilogue;
  epilogue.bias = bias_constant ? lc.weight(node.input(2)) : nullptr;
  const int bias_input = has_bias && !bias_constant ? static_cast<int>(inputs.size()) : -1;
  if (bias_input >= 0) {
    inputs.push_back(lc.slot(node.input(2)));
    shapes.input_floats.push_back(desc.out_channels);
  }
  const KernelActivation act = kernel_activation(node);
  epilogue.param_act = act.act;
  epilogue.alpha = act.alpha;
  epilogue.beta = act.beta;

  const std::string why = kernels::conv_transpose2d_unsupported(desc, epilogue);
  CNNRT_CHECK(why.empty(), ErrorCode::Unsupported, "no GPU kernel for this transposed convolution: {}", why);
  std::vector<KernelCandidate> candidates;
  for (const kernels::ConvTransposeVariant& v :
       kernels::conv_transpose2d_variants(desc, epilogue, lc.context.device.sm_count)) {
    KernelCandidate c;
    c.name = v.name;
    c.config = fmt::format("{} output channel{} a thread", v.channels_per_thread,
                           v.channels_per_thread == 1 ? "" : "s");
    c.launch = [v, desc, epilogue, weights, weights_input, bias_input](const float* const* in, float* const* out,
                                                                       Stream s) {
      kernels::Epilogue e = epilogue;
      if (bias_input >= 0) e.bias = in[bias_input];
      v.launch(in[0], weights_input >= 0 ? in[weights_input] : weights, out[0], desc, e, s);
    };
    candidates.push_back(std::move(c));
  }
  CNNRT_CHECK(!candidates.empty(), ErrorCode::Internal, "no transposed-convolution variant for {}", ir::shape_str(x));
  shapes.output_floats = ir::numel(y);

  const std::string signature =
      fmt::format("conv_transpose x={} w={} y={} s={}x{} p={},{} d={}x{} g={} bias={} act={} a={} b={}",
                  ir::shape_str(x), ir::shape_str(w), ir::shape_str(y), desc.rows.stride, desc.cols.stride,
                  desc.rows.pad_begin, desc.cols.pad_begin, desc.rows.dilation, desc.cols.dilation, desc.groups,
                  has_bias, static_cast<int>(act.act), epilogue.alpha, epilogue.beta);
  const Choice choice = choose_kernel(lc, signature, candidates, shapes);
  const KernelCandidate& chosen = candidates[choice.index];
  Step& step = lc.add_step(node, chosen.name, chosen.config + ", " + choice.how, inputs, output_slots(lc, node),
                           chosen.launch);
  step.candidates = choice.timings;
  const double taps = double(desc.rows.kernel) * double(desc.cols.kernel);
  step.flops = 2.0 * double(ir::numel(x)) * double(desc.out_channels / desc.groups) * taps;
  step.min_bytes = 4.0 * (double(ir::numel(x)) + double(ir::numel(w)) + double(ir::numel(y)));
}

}  // namespace

std::vector<LoweringEntry> conv_transpose_lowerings() {
  return {{"ConvTranspose", lower_conv_transpose}, {ir::fused::kFusedConvTranspose, lower_conv_transpose}};
}

}  // namespace cnnrt::plan
