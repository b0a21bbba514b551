// The model zoo on the CPU backend: every model of models/zoo/ against PyTorch's answer (tests/zoo.hpp),
// the folder list against the test list, and the README's command for checking a zoo model.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>

#include "image_test_util.hpp"
#include "zoo.hpp"

using namespace cnnrt;

#define CNNRT_ZOO_CPU_CASE(name) \
  TEST_CASE("zoo: " name " on the CPU matches PyTorch") { testing::check_zoo_model(name, Device::Cpu); }

CNNRT_ZOO_MODELS(CNNRT_ZOO_CPU_CASE)

TEST_CASE("zoo: the zoo's folders are the models the tests run") {
  std::vector<std::string> folders;
  for (const auto& entry : std::filesystem::directory_iterator(testing::zoo_root())) {
    if (entry.is_directory() && entry.path().filename() != "__pycache__") folders.push_back(entry.path().filename());
  }
  std::sort(folders.begin(), folders.end());
  std::vector<std::string> listed = testing::zoo_model_names();
  std::sort(listed.begin(), listed.end());
  CHECK(folders == listed);
  CHECK(listed.size() >= 17);
}

TEST_CASE("zoo: the README's cnnrt run command checks a zoo model, and fails on another model's data") {
  testing::ScratchDir dir("zoo_cli");
  const std::string zoo = testing::zoo_root().string();
  const testing::CliResult ok = testing::run_cli(
      dir, {"run", zoo + "/resnet20/model.onnx", "--test-data", zoo + "/resnet20", "--device", "cpu", "--rtol", "1e-4",
            "--atol", "1e-4"});
  INFO("stdout: " << ok.out << "\nstderr: " << ok.err);
  CHECK(ok.status == 0);
  CHECK(ok.out.find("all match") != std::string::npos);
  // Same input shape, other weights: DenseNet-BC's data through ResNet-20 must be reported as a mismatch.
  const testing::CliResult bad = testing::run_cli(
      dir, {"run", zoo + "/resnet20/model.onnx", "--test-data", zoo + "/densenet_bc", "--device", "cpu", "--rtol",
            "1e-4", "--atol", "1e-4"});
  INFO("stdout: " << bad.out << "\nstderr: " << bad.err);
  CHECK(bad.status == 1);
  CHECK(bad.out.find("MISMATCH") != std::string::npos);
}
