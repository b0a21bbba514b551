// launch_binary, the variadic chains built on it, and launch_expand against the CPU reference: same-shape,
// scalar, per-channel and two-sided broadcasting at ranks 0..5, float4 and scalar paths, in-place outputs.
#include <memory>
#include <string>

#include "ir/window.hpp"
#include "kernel_test_util.hpp"
#include "kernels/broadcast.cuh"
#include "kernels/elementwise.cuh"

namespace cnnrt::testing {
namespace {

using kernels::BinaryOp;

kernels::BroadcastDesc describe(const ir::Shape& out, const ir::Shape& a, const ir::Shape& b) {
  return kernels::make_broadcast_desc(static_cast<int>(out.size()), out.data(), static_cast<int>(a.size()), a.data(),
                                      static_cast<int>(b.size()), b.data());
}

struct ShapePair {
  ir::Shape a;
  ir::Shape b;
};

const std::vector<ShapePair>& shape_pairs() {
  static const std::vector<ShapePair> pairs = {
      {{1}, {1}},
      {{7}, {7}},
      {{1000}, {1000}},          // same shape: one flat float4 loop
      {{2, 3, 33}, {2, 3, 33}},  // same shape, not a multiple of 4
      {{2, 3, 31}, {}},          // scalar b
      {{}, {4, 5}},              // scalar a
      {{1000}, {1}},
      {{2, 16, 7, 7}, {16, 1, 1}},     // per-channel, inner 49
      {{1, 32, 8, 8}, {1, 32, 1, 1}},  // per-channel, inner 64: float4 with a repeated operand
      {{3, 5, 4}, {5, 1}},
      {{6, 33}, {33}},  // a row repeated over the outer axis
      {{6, 32}, {32}},
      {{3, 1, 5}, {4, 1}},  // both sides broadcast
      {{4}, {3, 1}},
      {{1, 1, 1, 1, 7}, {7}},
      {{2, 1, 4, 1, 3}, {1, 5, 1, 6, 1}},  // rank 5, alternating
      {{1000, 1}, {1, 33}},
  };
  return pairs;
}

struct BinaryCase {
  const char* onnx_op;
  BinaryOp op;
  float a_lo, a_hi, b_lo, b_hi;
};

TEST_CASE("binary broadcast ops match the CPU reference") {
  const std::vector<BinaryCase> cases = {
      {"Add", BinaryOp::Add, -1, 1, -1, 1},   {"Sub", BinaryOp::Sub, -1, 1, -1, 1},
      {"Mul", BinaryOp::Mul, -1, 1, -1, 1},   {"Div", BinaryOp::Div, -1, 1, 0.25f, 2},
      {"Pow", BinaryOp::Pow, 0.1f, 3, -2, 2}, {"Max", BinaryOp::Max, -1, 1, -1, 1},
      {"Min", BinaryOp::Min, -1, 1, -1, 1},   {"PRelu", BinaryOp::PRelu, -1, 1, 0.05f, 0.5f},
  };
  uint32_t seed = 100;
  for (const BinaryCase& c : cases) {
    for (const ShapePair& shapes : shape_pairs()) {
      // PRelu broadcasts its slope to X only (unidirectional): skip pairs that grow X.
      const ir::Shape out_shape = ir::broadcast_shapes(shapes.a, shapes.b);
      if (c.op == BinaryOp::PRelu && out_shape != shapes.a) continue;
      INFO(c.onnx_op << " " << ir::shape_str(shapes.a) << " with " << ir::shape_str(shapes.b));
      const ir::HostTensor a = random_tensor(shapes.a, seed++, c.a_lo, c.a_hi);
      const ir::HostTensor b = random_tensor(shapes.b, seed++, c.b_lo, c.b_hi);
      const ir::HostTensor want = cpu_reference(c.onnx_op, {}, {&a, &b}, out_shape);

      DeviceBuffer a_device(a.float_values());
      DeviceBuffer b_device(b.float_values());
      DeviceBuffer out(static_cast<size_t>(want.numel()));
      kernels::launch_binary(c.op, a_device.get(), b_device.get(), out.get(), describe(out_shape, shapes.a, shapes.b),
                             nullptr);
      finish_launch();
      CHECK(error_against(out, want) < kTolerance);

      // Operands one float past a 16-byte boundary: the scalar path.
      std::vector<float> a_shifted(1, 0.5f), b_shifted(1, 0.5f);
      a_shifted.insert(a_shifted.end(), a.float_values().begin(), a.float_values().end());
      b_shifted.insert(b_shifted.end(), b.float_values().begin(), b.float_values().end());
      DeviceBuffer a_shifted_device(a_shifted);
      DeviceBuffer b_shifted_device(b_shifted);
      DeviceBuffer shifted_out(static_cast<size_t>(want.numel()) + 1);
      kernels::launch_binary(c.op, a_shifted_device.get() + 1, b_shifted_device.get() + 1, shifted_out.get() + 1,
                             describe(out_shape, shapes.a, shapes.b), nullptr);
      finish_launch();
      CHECK(error_against(shifted_out, 1, want) < kTolerance);

      // In place into a when a is not broadcast.
      if (out_shape == shapes.a) {
        kernels::launch_binary(c.op, a_device.get(), b_device.get(), a_device.get(),
                               describe(out_shape, shapes.a, shapes.b), nullptr);
        finish_launch();
        CHECK(error_against(a_device, want) < kTolerance);
      }
    }
  }
}

// Variadic Sum/Max/Min/Mean as the planner runs them: out = in0 op in1, then out = out op in_k (in place),
// and for Mean a final Scale by 1 / inputs. A single input is a broadcast copy (Expand).
TEST_CASE("variadic Sum, Max, Min and Mean as chains of binary ops") {
  const std::vector<ir::Shape> shapes = {{2, 3, 4}, {3, 1}, {4}, {1, 3, 4}};
  const ir::Shape out_shape = {2, 3, 4};
  std::vector<ir::HostTensor> inputs;
  for (size_t k = 0; k < shapes.size(); ++k) inputs.push_back(random_tensor(shapes[k], 300 + static_cast<uint32_t>(k)));
  struct VariadicCase {
    const char* onnx_op;
    BinaryOp op;
  };
  for (const VariadicCase c : {VariadicCase{"Sum", BinaryOp::Add}, VariadicCase{"Max", BinaryOp::Max},
                               VariadicCase{"Min", BinaryOp::Min}, VariadicCase{"Mean", BinaryOp::Add}}) {
    for (size_t count : {size_t{1}, size_t{2}, size_t{4}}) {
      INFO(c.onnx_op << " of " << count << " inputs");
      std::vector<const ir::HostTensor*> refs;
      std::vector<ir::Shape> used;
      // A single input must already have the output's shape (ONNX broadcasts inputs only among themselves).
      for (size_t k = 0; k < count; ++k) {
        refs.push_back(&inputs[count == 1 ? 0 : k]);
        used.push_back(shapes[count == 1 ? 0 : k]);
      }
      const ir::HostTensor want = cpu_reference(c.onnx_op, {}, refs, out_shape);

      std::vector<std::unique_ptr<DeviceBuffer>> devices;
      for (const ir::HostTensor* input : refs) devices.push_back(std::make_unique<DeviceBuffer>(input->float_values()));
      DeviceBuffer out(static_cast<size_t>(want.numel()));
      if (count == 1) {
        kernels::launch_expand(devices[0]->get(), out.get(), describe(out_shape, used[0], {}), nullptr);
      } else {
        kernels::launch_binary(c.op, devices[0]->get(), devices[1]->get(), out.get(),
                               describe(out_shape, used[0], used[1]), nullptr);
        for (size_t k = 2; k < count; ++k) {
          kernels::launch_binary(c.op, out.get(), devices[k]->get(), out.get(), describe(out_shape, out_shape, used[k]),
                                 nullptr);
        }
      }
      if (std::string(c.onnx_op) == "Mean") {
        kernels::UnaryParams scale;
        scale.alpha = 1.0f / static_cast<float>(count);
        kernels::launch_unary(kernels::UnaryOp::Scale, scale, out.get(), out.get(), want.numel(), nullptr);
      }
      finish_launch();
      CHECK(error_against(out, want) < kTolerance);
    }
  }
}

TEST_CASE("Expand matches the CPU reference") {
  const std::vector<ShapePair> cases = {
      {{3, 1}, {2, 3, 4}},
      {{1}, {5}},
      {{}, {2, 2}},
      {{4, 1, 6}, {2, 4, 5, 6}},
      {{1, 8}, {33, 8}},
      {{7}, {7}},
      {{2, 1, 1, 3, 1}, {2, 4, 5, 3, 6}},
  };
  uint32_t seed = 400;
  for (const ShapePair& c : cases) {
    INFO(ir::shape_str(c.a) << " to " << ir::shape_str(c.b));
    const ir::HostTensor in = random_tensor(c.a, seed++);
    const ir::HostTensor want = cpu_reference("Expand", {}, {&in}, c.b);
    DeviceBuffer in_device(in.float_values());
    DeviceBuffer out(static_cast<size_t>(want.numel()));
    kernels::launch_expand(in_device.get(), out.get(), describe(c.b, c.a, {}), nullptr);
    finish_launch();
    CHECK(error_against(out, want) < kTolerance);
  }
}

}  // namespace
}  // namespace cnnrt::testing
