// launch_reduce against the CPU reference: trailing, leading, middle and non-adjacent axes, all axes, none,
// unit axes only, ranks 1..5, short and long rows, float4 and scalar rows, many short rows (a thread a row).
#include "kernel_test_util.hpp"
#include "kernels/reduce.cuh"

namespace cnnrt::testing {
namespace {

using kernels::ReduceOp;

struct ReduceCase {
  ir::Shape shape;
  std::vector<int64_t> axes;  // sorted
};

TEST_CASE("ReduceSum, ReduceMean, ReduceMax and ReduceMin match the CPU reference") {
  const std::vector<ReduceCase> cases = {
      {{2, 3, 4, 5}, {2, 3}},  // trailing: rows
      {{2, 3, 4, 5}, {3}},
      {{2, 3, 4, 5}, {1}},           // middle: columns
      {{2, 3, 4, 5}, {0}},           // leading
      {{2, 3, 4, 5}, {0, 2}},        // non-adjacent
      {{2, 3, 4, 5}, {1, 3}},        // non-adjacent, innermost reduced
      {{2, 3, 4, 5}, {0, 1, 2, 3}},  // everything
      {{1000}, {0}},
      {{7, 1000}, {1}},
      {{1000, 7}, {0}},
      {{2, 3, 1, 4, 5}, {1, 2, 4}},  // rank 5 with a unit axis
      {{3, 1, 5, 1, 7}, {1, 3}},     // only unit axes: a copy
      {{33, 31}, {}},                // no axes (noop_with_empty_axes): a copy
      {{4, 5000}, {1}},              // long rows, few: a block per row
      {{2, 8, 64}, {2}},             // float4 rows
      {{1, 64, 33, 31}, {1}},        // channel mean
      {{3, 1}, {0}},
      {{256, 40, 3, 3}, {2, 3}},     // many short rows: a thread a row (a global pool over 3x3 maps)
      {{8193, 1, 7}, {2}},           // the fewest rows that take it, an odd length
  };
  struct OpCase {
    const char* onnx_op;
    ReduceOp op;
  };
  const std::vector<OpCase> ops = {{"ReduceSum", ReduceOp::Sum},
                                   {"ReduceMean", ReduceOp::Mean},
                                   {"ReduceMax", ReduceOp::Max},
                                   {"ReduceMin", ReduceOp::Min}};
  uint32_t seed = 800;
  for (const ReduceCase& c : cases) {
    const ir::HostTensor x = random_tensor(c.shape, seed++);
    DeviceBuffer x_device(x.float_values());
    kernels::ReduceDesc desc;
    desc.rank = static_cast<int>(c.shape.size());
    for (int axis = 0; axis < desc.rank; ++axis) desc.dims[axis] = c.shape[axis];
    desc.axis_count = static_cast<int>(c.axes.size());
    for (size_t i = 0; i < c.axes.size(); ++i) desc.axes[i] = static_cast<int>(c.axes[i]);
    ir::Shape out_shape = c.shape;  // keepdims = 1
    for (int64_t axis : c.axes) out_shape[axis] = 1;
    const ir::Attributes attrs = make_attrs(
        {{"axes", c.axes}, {"keepdims", int64_t{1}}, {"noop_with_empty_axes", int64_t{c.axes.empty() ? 1 : 0}}});
    for (const OpCase& op : ops) {
      INFO(op.onnx_op << " of " << ir::shape_str(c.shape) << " over " << c.axes.size() << " axes");
      const ir::HostTensor want = cpu_reference(op.onnx_op, attrs, {&x}, out_shape);
      DeviceBuffer out(static_cast<size_t>(want.numel()));
      kernels::launch_reduce(op.op, x_device.get(), out.get(), desc, nullptr);
      finish_launch();
      CHECK(error_against(out, want) < kTolerance);
    }
  }
}

}  // namespace
}  // namespace cnnrt::testing
