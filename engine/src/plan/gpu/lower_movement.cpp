// Lowering of data movement (Transpose, DepthToSpace, SpaceToDepth, Slice, Concat, Split, Pad, Gather) and
// row-wise ops (Softmax, LogSoftmax, Reduce*). Views (Reshape, Flatten, ...) never get here: the planner
// aliases them.
#include "ir/depth_space.hpp"
#include "kernels/movement.cuh"
#include "kernels/reduce.cuh"
#include "kernels/softmax.cuh"
#include "plan/gpu/lower_util.hpp"

namespace cnnrt::plan {

namespace {

int rank_of(const ir::Shape& s) { return static_cast<int>(s.size()); }

void lower_transpose(const ir::Node& node, LowerContext& lc) {
  const ir::Shape& in = input_shape(lc, node, 0);
  require_rank_at_most(in, kernels::kMaxRank, "Transpose input");
  const std::vector<int64_t> perm = node.attrs.get_ints("perm");
  const kernels::StridedCopyDesc desc = kernels::transpose_desc(rank_of(in), in.data(), perm.data());
  add_simple_step(lc, node, "strided_copy", fmt::format("perm {}", fmt::join(perm, ",")),
                  [desc](const float* const* i, float* const* o, Stream s) { kernels::launch_strided_copy(i[0], o[0], desc, s); });
}

// DepthToSpace, SpaceToDepth: exactly a 6-D transpose (ir/depth_space.hpp), so the strided copy runs them; it
// merges the axes it can, and its writes are coalesced.
void lower_depth_space(const ir::Node& node, LowerContext& lc) {
  const ir::Shape& in = input_shape(lc, node, 0);
  const ir::BlockRearrangement r = ir::block_rearrangement(node, in);
  kernels::StridedCopyDesc desc;
  desc.rank = rank_of(r.dims);
  for (int d = 0; d < desc.rank; ++d) {
    desc.dims[d] = r.dims[d];
    desc.in_strides[d] = r.in_strides[d];
  }
  int64_t stride = 1;  // the output is written contiguously in the order of the index space
  for (int d = desc.rank - 1; d >= 0; --d) {
    desc.out_strides[d] = stride;
    stride *= desc.dims[d];
  }
  const std::string config = node.op == "SpaceToDepth"
                                 ? fmt::format("block {}", node.attrs.get_int("blocksize", 0))
                                 : fmt::format("block {} {}", node.attrs.get_int("blocksize", 0),
                                               node.attrs.get_string("mode", "DCR"));
  add_simple_step(lc, node, "strided_copy", config, [desc](const float* const* i, float* const* o, Stream s) {
    kernels::launch_strided_copy(i[0], o[0], desc, s);
  });
}

void lower_slice(const ir::Node& node, LowerContext& lc) {
  const ir::Shape& in = input_shape(lc, node, 0);
  const ir::Shape& out = output_shape(lc, node);
  require_rank_at_most(in, kernels::kMaxRank, "Slice input");
  const std::vector<int64_t> starts = node.attrs.get_ints("starts"), steps = node.attrs.get_ints("steps");
  CNNRT_CHECK(starts.size() == in.size() && steps.size() == in.size(), ErrorCode::Internal,
              "Slice is not in canonical form (starts/steps per axis)");
  const kernels::StridedCopyDesc desc =
      kernels::slice_desc(rank_of(in), in.data(), out.data(), starts.data(), steps.data());
  const std::vector<int> inputs = {lc.slot(node.input(0))};
  lc.add_step(node, "strided_copy", "slice", inputs, output_slots(lc, node),
              [desc](const float* const* i, float* const* o, Stream s) { kernels::launch_strided_copy(i[0], o[0], desc, s); });
}

// One launch for up to kMaxConcatInputs inputs; more are copied one launch each.
void lower_concat(const ir::Node& node, LowerContext& lc) {
  const ir::Shape& out = output_shape(lc, node);
  require_rank_at_most(out, kernels::kMaxRank, "Concat output");
  const int axis = static_cast<int>(node.attrs.get_int("axis", 0));
  if (node.inputs.size() <= static_cast<size_t>(kernels::kMaxConcatInputs)) {
    std::vector<const int64_t*> dims;
    for (size_t i = 0; i < node.inputs.size(); ++i) dims.push_back(input_shape(lc, node, i).data());
    const kernels::ConcatDesc desc =
        kernels::concat_desc(static_cast<int>(dims.size()), rank_of(out), dims.data(), out.data(), axis);
    add_simple_step(lc, node, "concat", fmt::format("{} inputs on axis {}", desc.inputs, axis),
                    [desc](const float* const* i, float* const* o, Stream s) { kernels::launch_concat(i, o[0], desc, s); });
    return;
  }
  std::vector<kernels::StridedCopyDesc> descs;
  int64_t offset = 0;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const ir::Shape& in = input_shape(lc, node, i);
    descs.push_back(kernels::concat_input_desc(rank_of(in), in.data(), out.data(), axis, offset));
    offset += in[axis];
  }
  add_simple_step(lc, node, "strided_copy", fmt::format("{} inputs on axis {}", descs.size(), axis),
                  [descs](const float* const* i, float* const* o, Stream s) {
                    for (size_t k = 0; k < descs.size(); ++k) kernels::launch_strided_copy(i[k], o[0], descs[k], s);
                  });
}

// One slice per output: output k starts at the sum of the sizes before it along `axis`.
void lower_split(const ir::Node& node, LowerContext& lc) {
  const ir::Shape& in = input_shape(lc, node, 0);
  require_rank_at_most(in, kernels::kMaxRank, "Split input");
  const int axis = static_cast<int>(node.attrs.get_int("axis", 0));
  const std::vector<int64_t> sizes = node.attrs.get_ints("split");
  CNNRT_CHECK(sizes.size() == node.outputs.size(), ErrorCode::Internal, "Split is not in canonical form (one size "
              "per output)");
  std::vector<kernels::StridedCopyDesc> descs;  // one per present output, in the order of output_slots
  const std::vector<int64_t> steps(in.size(), 1);
  std::vector<int64_t> starts(in.size(), 0);
  for (size_t k = 0; k < node.outputs.size(); ++k) {
    if (node.outputs[k] != ir::kNoValue) {
      const ir::Shape& out = lc.graph.shape_of(node.outputs[k]);
      descs.push_back(kernels::slice_desc(rank_of(in), in.data(), out.data(), starts.data(), steps.data()));
    }
    starts[axis] += sizes[k];
  }
  add_simple_step(lc, node, "strided_copy", fmt::format("{} outputs on axis {}", descs.size(), axis),
                  [descs](const float* const* i, float* const* o, Stream s) {
                    for (size_t k = 0; k < descs.size(); ++k) kernels::launch_strided_copy(i[0], o[k], descs[k], s);
                  });
}

void lower_pad(const ir::Node& node, LowerContext& lc) {
  const ir::Shape& in = input_shape(lc, node, 0);
  const ir::Shape& out = output_shape(lc, node);
  require_rank_at_most(in, kernels::kMaxRank, "Pad input");
  const std::vector<int64_t> pads = node.attrs.get_ints("pads");
  const std::string mode = node.attrs.get_string("mode", "constant");
  kernels::PadDesc desc;
  desc.rank = rank_of(in);
  for (int d = 0; d < desc.rank; ++d) {
    desc.in_dims[d] = in[d];
    desc.out_dims[d] = out[d];
    desc.pads_begin[d] = pads.at(d);
  }
  desc.mode = mode == "edge" ? kernels::PadMode::Edge : mode == "reflect" ? kernels::PadMode::Reflect
                                                                          : kernels::PadMode::Constant;
  desc.value = node.attrs.get_float("value", 0.0f);
  const std::vector<int> inputs = {lc.slot(node.input(0))};
  lc.add_step(node, "pad", mode, inputs, output_slots(lc, node),
              [desc](const float* const* i, float* const* o, Stream s) { kernels::launch_pad(i[0], o[0], desc, s); });
}

void lower_gather(const ir::Node& node, LowerContext& lc) {
  const ir::Shape& data = input_shape(lc, node, 0);
  const ir::HostTensor* indices = lc.graph.constant_of(node.input(1));
  CNNRT_CHECK(indices != nullptr, ErrorCode::Unsupported, "Gather indices computed at run time");
  const int axis = static_cast<int>(node.attrs.get_int("axis", 0));
  for (int64_t i = 0; i < indices->numel(); ++i) {
    const int64_t index = indices->int_at(i);
    CNNRT_CHECK(index >= -data[axis] && index < data[axis], ErrorCode::InvalidModel,
                "Gather index {} is outside [-{}, {})", index, data[axis], data[axis]);
  }
  kernels::GatherDesc desc;
  desc.outer = product(data, 0, axis);
  desc.axis_extent = data[axis];
  desc.inner = product(data, axis + 1);
  desc.index_count = indices->numel();
  const int64_t* device_indices = lc.context.weights.upload_indices(*indices);
  lc.add_step(node, "gather", fmt::format("{} indices on axis {}", desc.index_count, axis), {lc.slot(node.input(0))},
              output_slots(lc, node), [desc, device_indices](const float* const* i, float* const* o, Stream s) {
                kernels::launch_gather(i[0], device_indices, o[0], desc, s);
              });
}

void lower_softmax(const ir::Node& node, LowerContext& lc) {
  const ir::Shape& in = input_shape(lc, node, 0);
  const int axis = static_cast<int>(node.attrs.get_int("axis", static_cast<int64_t>(in.size()) - 1));
  const bool coerce_2d = node.attrs.get_int("coerce_2d", 0) != 0;
  const int64_t outer = product(in, 0, axis);
  const int64_t length = coerce_2d ? product(in, axis) : in[axis];
  const int64_t inner = coerce_2d ? 1 : product(in, axis + 1);
  const auto kind = node.op == "LogSoftmax" ? kernels::SoftmaxKind::LogSoftmax : kernels::SoftmaxKind::Softmax;
  add_simple_step(lc, node, node.op == "LogSoftmax" ? "log_softmax" : "softmax",
                  fmt::format("{} rows of {} (inner {})", outer, length, inner),
                  [=](const float* const* i, float* const* o, Stream s) {
                    kernels::launch_softmax(kind, i[0], o[0], outer, length, inner, s);
                  });
}

void lower_reduce(const ir::Node& node, LowerContext& lc) {
  const ir::Shape& in = input_shape(lc, node, 0);
  require_rank_at_most(in, kernels::kMaxRank, "reduction input");
  kernels::ReduceDesc desc;
  desc.rank = rank_of(in);
  for (int d = 0; d < desc.rank; ++d) desc.dims[d] = in[d];
  for (int64_t a : node.attrs.get_ints("axes")) desc.axes[desc.axis_count++] = static_cast<int>(a);
  const kernels::ReduceOp op = node.op == "ReduceSum"   ? kernels::ReduceOp::Sum
                               : node.op == "ReduceMax" ? kernels::ReduceOp::Max
                               : node.op == "ReduceMin" ? kernels::ReduceOp::Min
                                                        : kernels::ReduceOp::Mean;
  const std::vector<int> inputs = {lc.slot(node.input(0))};
  lc.add_step(node, "reduce", fmt::format("{} axes", desc.axis_count), inputs, output_slots(lc, node),
              [op, desc](const float* const* i, float* const* o, Stream s) { kernels::launch_reduce(op, i[0], o[0], desc, s); });
}

}  // namespace

std::vector<LoweringEntry> movement_lowerings() {
  return {{"Transpose", lower_transpose}, {"DepthToSpace", lower_depth_space}, {"SpaceToDepth", lower_depth_space},
          {"Slice", lower_slice},         {"Concat", lower_concat},
          {"Split", lower_split},         {"Pad", lower_pad},       {"Gather", lower_gather},
          {"Softmax", lower_softmax},     {"LogSoftmax", lower_softmax}, {"ReduceMean", lower_reduce},
          {"ReduceSum", lower_reduce},    {"ReduceMax", lower_reduce},   {"ReduceMin", lower_reduce}};
}

}  // namespace cnnrt::plan
