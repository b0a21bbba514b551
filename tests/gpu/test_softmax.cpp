// launch_softmax against the CPU reference: warp and block rows, columns (inner > 1), opset < 13 coercion,
// length 1, and inputs large enough to overflow exp without the max subtraction.
#include "kernel_test_util.hpp"
#include "kernels/softmax.cuh"

namespace cnnrt::testing {
namespace {

using kernels::SoftmaxKind;

struct SoftmaxCase {
  ir::Shape shape;
  int64_t axis;
  bool coerce_2d = false;  // opset < 13: normalize over all axes from `axis` on
  float lo = -5.0f;
  float hi = 5.0f;
};

TEST_CASE("Softmax and LogSoftmax match the CPU reference") {
  const std::vector<SoftmaxCase> cases = {
      {{1, 1000}, 1},                   // a warp per row, float4
      {{7, 33}, 1},                     // a warp per row, scalar
      {{2, 3, 5000}, 2},                // few long rows: a block per row
      {{3, 1}, 1},                      // length 1
      {{2, 21, 7, 9}, 1},               // inner 63: a thread per column
      {{4, 5, 6}, 0},                   // outer 1
      {{2, 3, 4, 5}, 1, true},          // opset 11: length 60, inner 1
      {{31}, 0},                        // rank 1
      {{64, 1000}, 1, false, 50, 100},  // exp(100) overflows float: needs the max subtraction
      {{9000, 10}, 1},                  // many short rows
  };
  struct KindCase {
    const char* onnx_op;
    SoftmaxKind kind;
  };
  uint32_t seed = 900;
  for (const SoftmaxCase& c : cases) {
    const ir::HostTensor x = random_tensor(c.shape, seed++, c.lo, c.hi);
    DeviceBuffer x_device(x.float_values());
    const size_t axis = static_cast<size_t>(c.axis);
    const int64_t outer = product(c.shape, 0, axis);
    const int64_t length = c.coerce_2d ? product(c.shape, axis) : c.shape[axis];
    const int64_t inner = c.coerce_2d ? 1 : product(c.shape, axis + 1);
    const ir::Attributes attrs = make_attrs({{"axis", c.axis}, {"coerce_2d", int64_t{c.coerce_2d ? 1 : 0}}});
    for (const KindCase k :
         {KindCase{"Softmax", SoftmaxKind::Softmax}, KindCase{"LogSoftmax", SoftmaxKind::LogSoftmax}}) {
      INFO(k.onnx_op << " of " << ir::shape_str(c.shape) << " over axis " << c.axis << (c.coerce_2d ? " (2-D)" : ""));
      const ir::HostTensor want = cpu_reference(k.onnx_op, attrs, {&x}, c.shape);
      DeviceBuffer out(static_cast<size_t>(want.numel()));
      kernels::launch_softmax(k.kind, x_device.get(), out.get(), outer, length, inner, nullptr);
      finish_launch();
      CHECK(error_against(out, want) < kTolerance);
    }
  }
}

}  // namespace
}  // namespace cnnrt::testing
