// launch_unary against the CPU reference: every op, sizes around the float4 pack width, misaligned and
// in-place buffers.
#include <cmath>
#include <limits>

#include "kernel_test_util.hpp"
#include "kernels/elementwise.cuh"

namespace cnnrt::testing {
namespace {

using kernels::UnaryOp;
using kernels::UnaryParams;

struct UnaryCase {
  const char* onnx_op;
  UnaryOp op;
  ir::Attributes attrs;
  UnaryParams params;
  float lo = -1.0f;  // input range: inside the op's domain, wide enough to reach every branch
  float hi = 1.0f;
};

std::vector<UnaryCase> unary_cases() {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<UnaryCase> cases = {
      {"Relu", UnaryOp::Relu, {}, {}},
      {"Sigmoid", UnaryOp::Sigmoid, {}, {}, -12.0f, 12.0f},
      {"Tanh", UnaryOp::Tanh, {}, {}, -4.0f, 4.0f},
      {"Abs", UnaryOp::Abs, {}, {}},
      {"Neg", UnaryOp::Neg, {}, {}},
      {"Exp", UnaryOp::Exp, {}, {}, -5.0f, 5.0f},
      {"Log", UnaryOp::Log, {}, {}, 0.05f, 5.0f},
      {"Sqrt", UnaryOp::Sqrt, {}, {}, 0.01f, 9.0f},
      {"Reciprocal", UnaryOp::Reciprocal, {}, {}, 0.2f, 3.0f},
      {"Floor", UnaryOp::Floor, {}, {}, -5.0f, 5.0f},
      {"Ceil", UnaryOp::Ceil, {}, {}, -5.0f, 5.0f},
      {"Softsign", UnaryOp::Softsign, {}, {}, -5.0f, 5.0f},
      {"Softplus", UnaryOp::Softplus, {}, {}, -30.0f, 30.0f},
      {"Erf", UnaryOp::Erf, {}, {}, -3.0f, 3.0f},
      {"HardSwish", UnaryOp::HardSwish, {}, {}, -5.0f, 5.0f},
  };
  UnaryParams leaky;
  leaky.alpha = 0.1f;
  cases.push_back({"LeakyRelu", UnaryOp::LeakyRelu, make_attrs({{"alpha", 0.1f}}), leaky});
  UnaryParams elu;
  elu.alpha = 0.7f;
  cases.push_back({"Elu", UnaryOp::Elu, make_attrs({{"alpha", 0.7f}}), elu, -3.0f, 3.0f});
  UnaryParams selu;
  selu.alpha = 1.67326319217681884765625f;
  selu.gamma = 1.05070102214813232421875f;
  cases.push_back(
      {"Selu", UnaryOp::Selu, make_attrs({{"alpha", selu.alpha}, {"gamma", selu.gamma}}), selu, -3.0f, 3.0f});
  UnaryParams hard_sigmoid;
  hard_sigmoid.alpha = 0.3f;
  hard_sigmoid.beta = 0.4f;
  cases.push_back(
      {"HardSigmoid", UnaryOp::HardSigmoid, make_attrs({{"alpha", 0.3f}, {"beta", 0.4f}}), hard_sigmoid, -4.0f, 4.0f});
  UnaryParams clip;
  clip.min = -0.3f;
  clip.max = 0.6f;
  cases.push_back({"Clip", UnaryOp::Clip, make_attrs({{"min", -0.3f}, {"max", 0.6f}}), clip});
  UnaryParams clip_above;  // no min: -inf, as the engine passes it
  clip_above.min = -inf;
  clip_above.max = 0.25f;
  cases.push_back({"Clip", UnaryOp::Clip, make_attrs({{"max", 0.25f}}), clip_above});
  return cases;
}

TEST_CASE("unary elementwise ops match the CPU reference") {
  uint32_t seed = 1;
  for (const UnaryCase& c : unary_cases()) {
    for (int64_t count : {1, 3, 4, 7, 31, 33, 1000, 4099}) {
      INFO(c.onnx_op << ", " << count << " elements");
      const ir::HostTensor x = random_tensor({count}, seed++, c.lo, c.hi);
      const ir::HostTensor want = cpu_reference(c.onnx_op, c.attrs, {&x}, {count});

      DeviceBuffer in(x.float_values());
      DeviceBuffer out(static_cast<size_t>(count));
      kernels::launch_unary(c.op, c.params, in.get(), out.get(), count, nullptr);
      finish_launch();
      CHECK(error_against(out, want) < kTolerance);

      // One float past a 16-byte boundary: the scalar path.
      std::vector<float> shifted(1, 0.5f);
      shifted.insert(shifted.end(), x.float_values().begin(), x.float_values().end());
      DeviceBuffer shifted_in(shifted);
      DeviceBuffer shifted_out(shifted.size());
      kernels::launch_unary(c.op, c.params, shifted_in.get() + 1, shifted_out.get() + 1, count, nullptr);
      finish_launch();
      CHECK(error_against(shifted_out, 1, want) < kTolerance);

      // In place.
      kernels::launch_unary(c.op, c.params, in.get(), in.get(), count, nullptr);
      finish_launch();
      CHECK(error_against(in, want) < kTolerance);
    }
  }
}

TEST_CASE("unary ops leave elements past count untouched") {
  const ir::HostTensor x = random_tensor({37}, 99);
  DeviceBuffer in(x.float_values());
  DeviceBuffer out(37);  // poisoned: NaN bytes
  kernels::launch_unary(UnaryOp::Neg, UnaryParams{}, in.get(), out.get(), 33, nullptr);
  finish_launch();
  const std::vector<float> got = out.download();
  for (size_t i = 0; i < 33; ++i) CHECK(got[i] == -x.float_values()[i]);
  for (size_t i = 33; i < 37; ++i) CHECK(std::isnan(got[i]));
}

}  // namespace
}  // namespace cnnrt::testing
