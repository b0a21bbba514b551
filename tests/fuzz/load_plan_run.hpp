// What the fuzzer does with one input, shared with unit_tests so that every corpus file (and every crash
// the fuzzer ever found, once added to tests/fuzz/corpus) is replayed by the normal test run.
//
// Bytes -> Model::load_from_memory -> describe_plan -> (tiny inputs only) one CPU inference. The only
// acceptable outcomes are success or a cnnrt::Error; the limits keep every accepted input cheap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "cnnrt/cnnrt.hpp"

namespace cnnrt::fuzzing {

constexpr int64_t kMaxInputElements = 4096;  // run inference only when all inputs together are this small

inline Options fuzz_options() {
  Options o;
  o.device = Device::Cpu;
  o.limits.max_model_bytes = int64_t(1) << 20;
  o.limits.max_weight_bytes = int64_t(64) << 10;       // 16 Ki floats: bounds the work of any one node
  o.limits.max_activation_bytes = int64_t(256) << 10;  // bounds every tensor a run allocates
  o.limits.max_nodes = 256;
  return o;
}

// Inputs of the declared shapes, symbolic dims as 1; false when a rank is unknown or the inputs are big.
inline bool tiny_inputs(const Model& model, std::vector<Tensor>& inputs) {
  int64_t total = 0;
  for (const TensorDesc& desc : model.inputs()) {
    if (desc.shape.empty()) return false;
    Tensor t;
    int64_t count = 1;
    for (int64_t d : desc.shape) {
      const int64_t dim = d < 0 ? 1 : d;
      if (dim > kMaxInputElements) return false;
      count *= dim;  // both factors <= 4096 here: no overflow
      if (count > kMaxInputElements) return false;
      t.shape.push_back(dim);
    }
    total += count;
    if (total > kMaxInputElements) return false;
    t.data.resize(static_cast<size_t>(count));
    for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = static_cast<float>(i % 7) * 0.25f - 0.5f;
    inputs.push_back(std::move(t));
  }
  return true;
}

// Returns true when the model loaded (and, if its inputs are tiny, ran); false when it was refused with a
// cnnrt::Error. Any other exception escapes: that is a bug.
inline bool load_plan_run(const uint8_t* data, size_t size) {
  try {
    const Model model = Model::load_from_memory(data, size, fuzz_options(), "fuzz.onnx");
    (void)model.describe_plan(0, true);
    std::vector<Tensor> inputs;
    if (tiny_inputs(model, inputs)) {
      Context context(model);
      (void)context.run(inputs);
    }
    return true;
  } catch (const Error&) {
    return false;  // refused with a code and a message: the expected outcome for most inputs
  }
}

}  // namespace cnnrt::fuzzing
