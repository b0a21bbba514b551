// Models exported by a real tool (PyTorch 1.13's TorchScript exporter, opsets 9/11/13/17; made by
// scripts/make_test_models.py into tests/data/<case>/) on the CPU backend, and the shipped models in models/:
// they load with their documented metadata, fashion_lenet classifies Fashion-MNIST test images, and
// edges.onnx's Sobel maps match a hand-written Sobel.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "apps/cnnrt/idx.hpp"
#include "apps/cnnrt/images.hpp"
#include "conformance.hpp"

using namespace cnnrt;

namespace {

#ifndef CNNRT_TEST_DATA_DIR
#error "tests/CMakeLists.txt passes CNNRT_TEST_DATA_DIR (the tests/data folder)"
#endif

// Cases the engine cannot run yet: case folder -> a piece of the error it must fail with. A case listed here
// that passes, or fails for another reason, fails the test (update the list when the engine learns more).
const std::map<std::string, std::string>& known_failures() {
  // None now: nearest upsampling (Upsample at opset 9, Resize from 11) runs since Resize support.
  static const std::map<std::string, std::string> cases = {};
  return cases;
}

std::vector<std::filesystem::path> exported_case_dirs() {
  std::vector<std::filesystem::path> dirs;
  for (const auto& entry : std::filesystem::directory_iterator(CNNRT_TEST_DATA_DIR)) {
    if (std::filesystem::exists(entry.path() / "model.onnx")) dirs.push_back(entry.path());
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

}  // namespace

TEST_CASE("models exported by PyTorch at opsets 9, 11, 13, 17 run on the CPU backend") {
  const std::vector<std::filesystem::path> dirs = exported_case_dirs();
  REQUIRE_MESSAGE(dirs.size() >= 60, "expected the cases of scripts/make_test_models.py in " CNNRT_TEST_DATA_DIR);
  set_log_level(LogLevel::Off);
  int passed = 0, known = 0;
  for (const std::filesystem::path& dir : dirs) {
    const std::string name = dir.filename().string();
    // rtol 1e-4, atol 1e-5 (the absolute floor for outputs near zero), as for the ONNX conformance cases.
    const testing::CaseResult r = testing::run_case(dir, name, Device::Cpu);
    const auto expected_failure = known_failures().find(name);
    if (expected_failure == known_failures().end()) {
      CHECK_MESSAGE(r.outcome == "passed", name << ": " << r.outcome << ": " << r.detail);
      passed += r.outcome == "passed";
    } else {
      const bool fails_as_listed = r.outcome != "passed" && r.detail.find(expected_failure->second) != std::string::npos;
      CHECK_MESSAGE(fails_as_listed, name << " is a known failure (\"" << expected_failure->second
                                          << "\") but now: " << r.outcome << " " << r.detail);
      known += fails_as_listed;
    }
  }
  set_log_level(LogLevel::Warn);
  std::cout << "exported models (cpu): " << passed << " passed, " << known << " known failures, of " << dirs.size()
            << " cases\n";
}

namespace {

const std::string models_dir = std::string(CNNRT_SOURCE_DIR) + "/models";
const char* fashion_test_images = "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz";
const char* fashion_test_labels = "/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz";

}  // namespace

TEST_CASE("models/fashion_lenet.onnx: metadata, and >= 85% on the first 500 Fashion-MNIST test images") {
  Options options;
  options.device = Device::Cpu;
  options.tuning = false;
  const Model model = Model::load(models_dir + "/fashion_lenet.onnx", options);

  REQUIRE(model.inputs().size() == 1);
  CHECK(model.inputs()[0].name == "input");
  CHECK(model.inputs()[0].shape == std::vector<int64_t>{-1, 1, 28, 28});
  CHECK(model.inputs()[0].dim_names.at(0) == "N");
  REQUIRE(model.outputs().size() == 1);
  CHECK(model.outputs()[0].name == "logits");
  CHECK(model.outputs()[0].shape == std::vector<int64_t>{-1, 10});

  const std::map<std::string, std::string>& meta = model.metadata();
  for (const char* key : {"labels", "input_scale", "mean", "std", "invert", "task", "test_accuracy"}) {
    REQUIRE_MESSAGE(meta.count(key) == 1, "metadata_props lacks " << key);
  }
  CHECK(meta.at("labels") == "T-shirt/top,Trouser,Pullover,Dress,Coat,Sandal,Shirt,Sneaker,Bag,Ankle boot");
  CHECK(meta.at("input_scale") == "0.00392156862745098");
  CHECK(meta.at("invert") == "0");
  CHECK(meta.at("task") == "classification");
  CHECK(std::stod(meta.at("test_accuracy")) >= 90.0);
  const cnnrt_cli::Normalization norm = cnnrt_cli::resolve_normalization(meta, {}, 1);
  CHECK(norm.mean.at(0) > 0.2f);  // the training set's mean of p/255 is about 0.286
  CHECK(norm.mean.at(0) < 0.4f);
  CHECK(norm.stddev.at(0) > 0.2f);
  CHECK(norm.stddev.at(0) < 0.5f);

  constexpr int64_t count = 500;
  const cnnrt_cli::IdxArray images = cnnrt_cli::read_idx(fashion_test_images);
  const cnnrt_cli::IdxArray labels = cnnrt_cli::read_idx(fashion_test_labels);
  REQUIRE(images.dims == std::vector<int64_t>{10000, 28, 28});
  REQUIRE(labels.dims == std::vector<int64_t>{10000});

  Tensor input{{int64_t(count), 1, 28, 28}, std::vector<float>(count * 28 * 28)};
  for (int64_t i = 0; i < count; ++i) {  // each image as `cnnrt infer` would feed it
    const auto first = images.values.begin() + i * 784;
    const cnnrt_cli::Image image{28, 28, 1, std::vector<float>(first, first + 784)};
    cnnrt_cli::normalise_into(image, norm, input.data.data() + i * 784);
  }
  Context context(model);
  const std::vector<Tensor> out = context.run({input});
  REQUIRE(out.size() == 1);
  REQUIRE(out[0].shape == std::vector<int64_t>{int64_t(count), 10});
  int correct = 0;
  for (uint32_t i = 0; i < count; ++i) {
    const float* logits = out[0].data.data() + i * 10;
    correct += std::max_element(logits, logits + 10) - logits == int64_t(labels.values[i]);
  }
  const double accuracy = 100.0 * correct / count;
  std::cout << "fashion_lenet (cpu): " << accuracy << "% on the first " << count << " test images\n";
  CHECK(accuracy >= 85.0);
}

TEST_CASE("models/edges.onnx: metadata, and its Sobel maps match a hand-computed Sobel") {
  Options options;
  options.device = Device::Cpu;
  options.tuning = false;
  const Model model = Model::load(models_dir + "/edges.onnx", options);
  REQUIRE(model.inputs().size() == 1);
  CHECK(model.inputs()[0].name == "input");
  CHECK(model.inputs()[0].shape == std::vector<int64_t>{-1, 1, -1, -1});
  REQUIRE(model.outputs().size() == 1);
  CHECK(model.outputs()[0].name == "maps");
  const std::map<std::string, std::string>& meta = model.metadata();
  CHECK(meta.at("task") == "image-to-image");
  CHECK(meta.at("labels") == "sobel_x,sobel_y,laplacian,blur3,blur5");
  CHECK(meta.at("input_scale") == "0.00392156862745098");
  CHECK(std::stof(meta.at("mean")) == 0.0f);
  CHECK(std::stof(meta.at("std")) == 1.0f);
  CHECK(meta.at("invert") == "0");

  constexpr int H = 31, W = 33;  // odd and unequal, so a transposed or off-by-one map cannot pass
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  Tensor image{{1, 1, H, W}, std::vector<float>(H * W)};
  for (float& v : image.data) v = uniform(rng);
  Context context(model);
  const std::vector<Tensor> out = context.run({image});
  REQUIRE(out.size() == 1);
  REQUIRE(out[0].shape == std::vector<int64_t>{1, 5, H, W});

  // Zero padding outside the image; cross-correlation (no kernel flip), as ONNX Conv.
  auto pixel = [&](int y, int x) { return y < 0 || y >= H || x < 0 || x >= W ? 0.0 : double(image.data[y * W + x]); };
  const int sobel_x[3][3] = {{-1, 0, 1}, {-2, 0, 2}, {-1, 0, 1}};
  double max_err_x = 0, max_err_y = 0;
  for (int y = 0; y < H; ++y) {
    for (int x = 0; x < W; ++x) {
      double gx = 0, gy = 0;
      for (int dy = -1; dy <= 1; ++dy) {
        for (int dx = -1; dx <= 1; ++dx) {
          gx += sobel_x[dy + 1][dx + 1] * pixel(y + dy, x + dx);
          gy += sobel_x[dx + 1][dy + 1] * pixel(y + dy, x + dx);  // sobel_y is sobel_x transposed
        }
      }
      max_err_x = std::max(max_err_x, std::fabs(out[0].data[0 * H * W + y * W + x] - gx));
      max_err_y = std::max(max_err_y, std::fabs(out[0].data[1 * H * W + y * W + x] - gy));
    }
  }
  CHECK(max_err_x < 1e-5);
  CHECK(max_err_y < 1e-5);
}
