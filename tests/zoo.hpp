// The model zoo (models/zoo/, made by models/zoo/make_zoo.py): each model against its test data, PyTorch's
// float64 answer, through the public API. Shared by the CPU suite (tests/test_zoo.cpp) and its GPU twin
// (tests/gpu/test_zoo_gpu.cpp), one test case per model so that each shows (and fails) by name.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "cnnrt/cnnrt.hpp"
#include "testdata.hpp"

namespace cnnrt::testing {

// Every model of the zoo, as an X-macro: X(name) for each. Both suites make one test case per entry; a
// folder models/zoo/<name>/ that is not listed fails "the zoo's folders are the models the tests run".
#define CNNRT_ZOO_MODELS(X)                                                                                  \
  X("lenet5") X("kws_cnn") X("vgg_small") X("resnet20") X("resnet18_narrow") X("mobilenet_v1") X("mobilenet_v2") \
  X("mobilenet_v3_small") X("efficientnet_b0_small") X("shufflenet_v1") X("squeezenet") X("densenet_bc")        \
  X("ts_cnn1d") X("dncnn") X("espcn") X("unet_small") X("conv_autoencoder")

inline const std::vector<std::string>& zoo_model_names() {
#define CNNRT_ZOO_NAME(name) name,
  static const std::vector<std::string> names = {CNNRT_ZOO_MODELS(CNNRT_ZOO_NAME)};
#undef CNNRT_ZOO_NAME
  return names;
}

// The zoo's tolerance (models/zoo/zoo_models.py RTOL, ATOL): per element |ours - exact| <= atol + rtol *
// |exact|. The outputs are of order 1; float32 rounding through the deepest model stays under an eighth of
// it on the CPU, and a batch-norm epsilon of 1e-3 instead of 1e-5 in one layer of ResNet-20 exceeds it.
constexpr double kZooRtol = 1e-4;
constexpr double kZooAtol = 1e-4;

// models/zoo under the source folder this was built from, or, on the GPU machine (where the repository
// lies elsewhere), relative to the working directory: the repository root, as scripts/gpu_round.sh runs.
inline std::filesystem::path zoo_root() {
  const std::filesystem::path built = std::filesystem::path(CNNRT_SOURCE_DIR) / "models/zoo";
  return std::filesystem::exists(built) ? built : std::filesystem::path("models/zoo");
}

inline std::string printed(const char* format, double v) {
  char text[32];
  std::snprintf(text, sizeof text, format, v);
  return text;
}

// Loads models/zoo/<name>/model.onnx on `device`, runs every data set and checks every output. On the GPU, no
// step may run the reference convolution (direct_reference, the oracle): every layer of the zoo has a kernel.
inline void check_zoo_model(const std::string& name, Device device) {
  const std::filesystem::path dir = zoo_root() / name;
  REQUIRE_MESSAGE(std::filesystem::exists(dir / "model.onnx"), (dir / "model.onnx").string() << " is missing");
  const auto start = std::chrono::steady_clock::now();
  std::string error;
  std::vector<std::string> mismatches, report, reference_steps;
  try {
    Options options;
    options.device = device;
    const Model model = Model::load((dir / "model.onnx").string(), options);
    Context context(model);
    for (const std::string& set_dir : cnnrt_cli::find_data_set_dirs(dir.string())) {
      const cnnrt_cli::DataSet set = cnnrt_cli::read_data_set(set_dir, model);
      REQUIRE_MESSAGE(set.expected.size() == model.outputs().size(), set_dir << " has no expected outputs");
      const std::vector<Tensor> outputs = context.run(set.inputs);
      for (size_t i = 0; i < outputs.size(); ++i) {
        const cnnrt_cli::Comparison c = cnnrt_cli::compare(outputs[i], set.expected[i], kZooRtol, kZooAtol);
        const std::string what = std::filesystem::path(set_dir).filename().string() + " output '" +
                                 model.outputs()[i].name + "'";
        report.push_back(what + " max abs err " + printed("%.2e", c.max_abs));
        if (!c.shapes_match) {
          mismatches.push_back(what + ": wrong shape");
        } else if (!c.ok()) {
          mismatches.push_back(what + ": " + std::to_string(c.mismatches) + " elements beyond rtol/atol 1e-4, max abs err " +
                               printed("%.2e", c.max_abs) + ", first at element " + std::to_string(c.first_bad));
        }
      }
      if (device == Device::Gpu && reference_steps.empty()) {
        for (const StepTiming& step : context.profile(set.inputs, 1)) {
          if (step.kernel == "direct_reference") reference_steps.push_back(step.step);
        }
      }
    }
  } catch (const Error& e) {
    error = std::string(to_string(e.code())) + ": " + e.what();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string on = std::string(" on the ") + (device == Device::Gpu ? "GPU" : "CPU");

  REQUIRE_MESSAGE(error.empty(), name << on << ": " << error);
  for (const std::string& m : mismatches) FAIL_CHECK(name << on << ": " << m);
  for (const std::string& step : reference_steps) FAIL_CHECK(name << on << ": step " << step << " runs direct_reference");
  std::string summary;
  for (const std::string& r : report) summary += (summary.empty() ? "" : "; ") + r;
  MESSAGE(name << on << " in " << printed("%.2f", seconds) << " s: " << summary);
}

}  // namespace cnnrt::testing
