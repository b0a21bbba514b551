// The strided copy (Transpose, Slice, Concat), Pad and Gather against the CPU reference: ranks 1..5,
// negative steps, aligned and misaligned blocks, every pad mode with pads beyond the axis, negative indices.
#include "kernel_test_util.hpp"
#include "kernels/movement.cuh"

namespace cnnrt::testing {
namespace {

int rank_of(const ir::Shape& shape) { return static_cast<int>(shape.size()); }

TEST_CASE("Transpose matches the CPU reference") {
  struct TransposeCase {
    ir::Shape input;
    std::vector<int64_t> perm;
  };
  const std::vector<TransposeCase> cases = {
      {{5}, {0}},
      {{33, 31}, {1, 0}},
      {{2, 3, 4}, {2, 0, 1}},
      {{2, 3, 4}, {0, 1, 2}},        // identity: one flat float4 copy
      {{2, 3, 4, 5}, {0, 2, 3, 1}},  // NCHW -> NHWC
      {{1, 2, 3, 4, 5}, {4, 3, 2, 1, 0}},
      {{1, 2, 3, 4, 4}, {0, 2, 1, 3, 4}},  // channel shuffle: contiguous 16-float blocks
      {{64, 1000}, {1, 0}},
  };
  uint32_t seed = 1200;
  for (const TransposeCase& c : cases) {
    ir::Shape out_shape;
    for (int64_t axis : c.perm) out_shape.push_back(c.input[axis]);
    INFO("Transpose " << ir::shape_str(c.input) << " -> " << ir::shape_str(out_shape));
    const ir::HostTensor x = random_tensor(c.input, seed++);
    const ir::HostTensor want = cpu_reference("Transpose", make_attrs({{"perm", c.perm}}), {&x}, out_shape);
    DeviceBuffer in(x.float_values());
    DeviceBuffer out(static_cast<size_t>(want.numel()));
    kernels::launch_strided_copy(in.get(), out.get(),
                                 kernels::transpose_desc(rank_of(c.input), c.input.data(), c.perm.data()), nullptr);
    finish_launch();
    CHECK(error_against(out, want) < kTolerance);
  }
}

TEST_CASE("Slice matches the CPU reference") {
  struct SliceCase {
    ir::Shape input;
    std::vector<int64_t> starts;
    std::vector<int64_t> steps;
    ir::Shape output;  // counts, as shape inference gives them
  };
  const std::vector<SliceCase> cases = {
      {{10, 11}, {1, 2}, {2, 3}, {5, 3}},
      {{7}, {6}, {-1}, {7}},  // reversed
      {{4, 5, 6}, {3, 0, 5}, {-1, 2, -2}, {4, 3, 3}},
      {{2, 3, 32}, {0, 1, 4}, {1, 1, 1}, {2, 2, 16}},  // 16-byte aligned rows: float4
      {{1000}, {1}, {1}, {999}},                       // misaligned start: scalar
      {{2, 3, 4, 5, 6}, {1, 0, 3, 1, 5}, {1, 2, -1, 2, -3}, {1, 2, 4, 2, 2}},
  };
  uint32_t seed = 1300;
  for (const SliceCase& c : cases) {
    INFO("Slice " << ir::shape_str(c.input) << " -> " << ir::shape_str(c.output));
    const ir::HostTensor x = random_tensor(c.input, seed++);
    const ir::HostTensor want =
        cpu_reference("Slice", make_attrs({{"starts", c.starts}, {"steps", c.steps}}), {&x}, c.output);
    DeviceBuffer in(x.float_values());
    DeviceBuffer out(static_cast<size_t>(want.numel()));
    kernels::launch_strided_copy(
        in.get(), out.get(),
        kernels::slice_desc(rank_of(c.input), c.input.data(), c.output.data(), c.starts.data(), c.steps.data()),
        nullptr);
    finish_launch();
    CHECK(error_against(out, want) < kTolerance);
  }
}

TEST_CASE("Concat matches the CPU reference") {
  struct ConcatCase {
    std::vector<ir::Shape> inputs;
    int axis;
  };
  const std::vector<ConcatCase> cases = {
      {{{2, 3, 4}, {2, 5, 4}, {2, 1, 4}}, 1},
      {{{3, 8}, {3, 8}}, 0},
      {{{1, 16, 7, 7}, {1, 32, 7, 7}}, 1},  // channel concat: aligned blocks, float4
      {{{5}, {7}}, 0},                      // second input starts misaligned: scalar
      {{{2, 2, 3, 1, 2}, {2, 2, 3, 4, 2}}, 3},
      {{{4, 1}, {4, 2}, {4, 3}}, 1},
      {{{2, 4, 3, 4}, {2, 8, 3, 4}, {2, 4, 3, 4}}, 1},  // float4 packs in one launch
      {{{1000, 3}, {1000, 1}, {1000, 5}, {1000, 7}, {1000, 2}, {1000, 1}, {1000, 3}, {1000, 4},
        {1000, 1}, {1000, 6}, {1000, 2}, {1000, 3}, {1000, 1}, {1000, 8}, {1000, 2}, {1000, 5}}, 1},  // 16 inputs
  };
  uint32_t seed = 1400;
  for (const ConcatCase& c : cases) {
    ir::Shape out_shape = c.inputs[0];
    out_shape[c.axis] = 0;
    for (const ir::Shape& shape : c.inputs) out_shape[c.axis] += shape[c.axis];
    INFO("Concat to " << ir::shape_str(out_shape) << " along axis " << c.axis);
    std::vector<ir::HostTensor> inputs;
    for (const ir::Shape& shape : c.inputs) inputs.push_back(random_tensor(shape, seed++));
    std::vector<const ir::HostTensor*> refs;
    for (const ir::HostTensor& input : inputs) refs.push_back(&input);
    const ir::HostTensor want = cpu_reference("Concat", make_attrs({{"axis", int64_t{c.axis}}}), refs, out_shape);

    DeviceBuffer out(static_cast<size_t>(want.numel()));
    int64_t axis_offset = 0;
    for (const ir::HostTensor& input : inputs) {
      DeviceBuffer in(input.float_values());
      kernels::launch_strided_copy(in.get(), out.get(),
                                   kernels::concat_input_desc(rank_of(input.shape()), input.shape().data(),
                                                              out_shape.data(), c.axis, axis_offset),
                                   nullptr);
      finish_launch();
      axis_offset += input.shape()[c.axis];
    }
    CHECK(error_against(out, want) < kTolerance);

    // The same in one launch (the planner's way for up to kMaxConcatInputs inputs), on a poisoned output.
    std::vector<DeviceBuffer> device_inputs;
    std::vector<const float*> pointers;
    std::vector<const int64_t*> dims;
    for (const ir::HostTensor& input : inputs) {
      device_inputs.emplace_back(input.float_values());
      pointers.push_back(device_inputs.back().get());
      dims.push_back(input.shape().data());
    }
    DeviceBuffer joined(static_cast<size_t>(want.numel()));  // poisoned
    kernels::launch_concat(pointers.data(), joined.get(),
                           kernels::concat_desc(static_cast<int>(inputs.size()), rank_of(out_shape), dims.data(),
                                                out_shape.data(), c.axis),
                           nullptr);
    finish_launch();
    CHECK(error_against(joined, want) < kTolerance);
  }
}

TEST_CASE("Pad matches the CPU reference") {
  struct PadCase {
    ir::Shape input;
    std::vector<int64_t> pads;  // begins, then ends
  };
  const std::vector<PadCase> cases = {
      {{3, 4}, {1, 2, 0, 3}},
      {{2, 3}, {0, 4, 0, 5}},                    // reflect beyond the axis: periodic
      {{2}, {2, 2}},                             // the ONNX reflect example's axis of 2
      {{1, 5}, {2, 1, 3, 2}},                    // reflect on an axis of 1
      {{2, 3, 5, 5}, {0, 0, 2, 2, 0, 0, 2, 2}},  // spatial padding of NCHW
      {{1, 2, 3, 4, 5}, {0, 1, 0, 2, 1, 0, 2, 1, 0, 3}},
      {{1000}, {7, 0}},
  };
  struct ModeCase {
    const char* name;
    kernels::PadMode mode;
  };
  const std::vector<ModeCase> modes = {{"constant", kernels::PadMode::Constant},
                                       {"edge", kernels::PadMode::Edge},
                                       {"reflect", kernels::PadMode::Reflect}};
  const float value = 1.5f;
  uint32_t seed = 1500;
  for (const PadCase& c : cases) {
    const int rank = rank_of(c.input);
    kernels::PadDesc desc;
    desc.rank = rank;
    ir::Shape out_shape;
    for (int axis = 0; axis < rank; ++axis) {
      desc.in_dims[axis] = c.input[axis];
      desc.pads_begin[axis] = c.pads[axis];
      desc.out_dims[axis] = c.input[axis] + c.pads[axis] + c.pads[rank + axis];
      out_shape.push_back(desc.out_dims[axis]);
    }
    desc.value = value;
    const ir::HostTensor x = random_tensor(c.input, seed++);
    DeviceBuffer in(x.float_values());
    for (const ModeCase& m : modes) {
      INFO("Pad " << m.name << " " << ir::shape_str(c.input) << " -> " << ir::shape_str(out_shape));
      const ir::HostTensor want = cpu_reference(
          "Pad", make_attrs({{"pads", c.pads}, {"mode", std::string(m.name)}, {"value", value}}), {&x}, out_shape);
      desc.mode = m.mode;
      DeviceBuffer out(static_cast<size_t>(want.numel()));
      kernels::launch_pad(in.get(), out.get(), desc, nullptr);
      finish_launch();
      CHECK(error_against(out, want) < kTolerance);
    }
  }
}

TEST_CASE("Gather matches the CPU reference") {
  struct GatherCase {
    ir::Shape data;
    ir::Shape indices_shape;
    std::vector<int64_t> indices;
    int axis;
  };
  const std::vector<GatherCase> cases = {
      {{5, 4}, {3}, {4, -1, 0}, 0},           {{2, 7, 3}, {2, 2}, {-7, 6, 3, 0}, 1},
      {{3, 4, 5}, {3}, {4, -5, 2}, 2},                               // last axis
      {{1000}, {3}, {999, -1000, 5}, 0},      {{4, 3}, {}, {2}, 0},  // scalar index: the axis disappears
      {{2, 3, 33}, {5}, {1, 1, -2, 0, 2}, 1},
  };
  uint32_t seed = 1600;
  for (const GatherCase& c : cases) {
    const size_t axis = static_cast<size_t>(c.axis);
    ir::Shape out_shape(c.data.begin(), c.data.begin() + c.axis);
    out_shape.insert(out_shape.end(), c.indices_shape.begin(), c.indices_shape.end());
    out_shape.insert(out_shape.end(), c.data.begin() + c.axis + 1, c.data.end());
    INFO("Gather " << ir::shape_str(c.data) << " axis " << c.axis << " -> " << ir::shape_str(out_shape));
    const ir::HostTensor data = random_tensor(c.data, seed++);
    const ir::HostTensor indices = ir::HostTensor::ints(c.indices_shape, c.indices);
    const ir::HostTensor want =
        cpu_reference("Gather", make_attrs({{"axis", int64_t{c.axis}}}), {&data, &indices}, out_shape);
    DeviceBuffer data_device(data.float_values());
    DeviceInts indices_device(c.indices);
    DeviceBuffer out(static_cast<size_t>(want.numel()));
    kernels::GatherDesc desc;
    desc.outer = product(c.data, 0, axis);
    desc.axis_extent = c.data[axis];
    desc.inner = product(c.data, axis + 1);
    desc.index_count = static_cast<int64_t>(c.indices.size());
    kernels::launch_gather(data_device.get(), indices_device.get(), out.get(), desc, nullptr);
    finish_launch();
    CHECK(error_against(out, want) < kTolerance);
  }
}

}  // namespace
}  // namespace cnnrt::testing
