// Lowering of InstanceNormalization (canonical form, docs/ir-ops.md) to launch_instance_norm. Scale and bias
// may be constants (uploaded once) or computed at run time (then step inputs after X).
#include "kernels/instance_norm.cuh"
#include "plan/gpu/lower_util.hpp"

namespace cnnrt::plan {

namespace {

void lower_instance_norm(const ir::Node& node, LowerContext& lc) {
  const ir::Shape& x = input_shape(lc, node, 0);
  CNNRT_CHECK(x.size() >= 3, ErrorCode::Internal, "InstanceNormalization of a rank-{} input", x.size());
  const int64_t channels = x[1];
  const int64_t planes = x[0] * channels;
  const int64_t plane = product(x, 2);
  const float epsilon = node.attrs.get_float("epsilon", 1e-5f);
  // Constant parameters are captured as device pointers; run-time ones come in as step inputs 1 and 2.
  std::vector<int> inputs = {lc.slot(node.input(0))};
  const float* constant[2] = {nullptr, nullptr};
  int runtime_index[2] = {-1, -1};
  for (int k = 0; k < 2; ++k) {
    const int value = node.input(static_cast<size_t>(k + 1));
    if (lc.graph.values[value].is_constant()) {
      constant[k] = lc.weight(value);
    } else {
      runtime_index[k] = static_cast<int>(inputs.size());
      inputs.push_back(lc.slot(value));
    }
  }
  const float* scale = constant[0];
  const float* bias = constant[1];
  const int scale_index = runtime_index[0], bias_index = runtime_index[1];
  Step& step = lc.add_step(node, "instance_norm", fmt::format("{} planes of {}", planes, plane), inputs,
                           output_slots(lc, node),
                           [=](const float* const* in, float* const* out, Stream s) {
                             kernels::launch_instance_norm(in[0], scale_index >= 0 ? in[scale_index] : scale,
                                                           bias_index >= 0 ? in[bias_index] : bias, out[0], planes,
                                                           channels, plane, epsilon, s);
                           });
  step.flops = 8.0 * double(planes) * double(plane);  // three passes: add; subtract, square, add; scale, shift
  step.min_bytes = 8.0 * double(planes) * double(plane);
}

}  // namespace

std::vector<LoweringEntry> normalization_lowerings() { return {{"InstanceNormalization", lower_instance_norm}}; }

}  // namespace cnnrt::plan
