// Opsets 18 to 21 on the GPU: the dynamo-style small CNN (tests/opset_models.hpp) and Split-18's uneven
// num_outputs chunks give the CPU backend's outputs. The CPU side is checked in tests/test_opset18_21.cpp.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "cnnrt/cnnrt.hpp"
#include "gpu_test_util.hpp"
#include "opset_models.hpp"

using namespace cnnrt;
using namespace cnnrt::testing;

namespace {

std::vector<Tensor> run_on(Device device, const std::string& bytes, const Tensor& input) {
  Options options;
  options.device = device;
  options.tuning = false;  // results, not speed, are under test
  options.tuning_cache = "none";
  const Model model = Model::load_from_memory(bytes.data(), bytes.size(), options, "opset_model.onnx");
  Context context(model);
  return context.run({input});
}

void check_gpu_matches_cpu(const std::string& bytes, const Tensor& input) {
  const std::vector<Tensor> want = run_on(Device::Cpu, bytes, input);
  const std::vector<Tensor> got = run_on(Device::Gpu, bytes, input);
  REQUIRE(got.size() == want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    CAPTURE(k);
    CHECK(got[k].shape == want[k].shape);
    CHECK(relative_error(got[k].data, want[k].data) < 1e-5);
  }
}

}  // namespace

TEST_CASE("the dynamo-style small CNN at opsets 18 to 21 gives the CPU's outputs on the GPU") {
  Tensor x{{2, kInChannels, kSide, kSide}, random_floats(static_cast<size_t>(2 * kInChannels * kSide * kSide), 7)};
  for (int64_t opset : {18, 19, 20, 21}) {
    CAPTURE(opset);
    check_gpu_matches_cpu(small_cnn(opset), x);
  }
}

TEST_CASE("Split on the GPU: num_outputs chunks (18) and even parts (13)") {
  Tensor x{{2, 10}, random_floats(20, 8)};
  check_gpu_matches_cpu(split_model(18, 3, true), x);   // 4 + 4 + 2
  check_gpu_matches_cpu(split_model(18, 4, true), x);   // 3 + 3 + 3 + 1
  check_gpu_matches_cpu(split_model(13, 5, false), x);  // 2 each
}
