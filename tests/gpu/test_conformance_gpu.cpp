// The official ONNX test cases on the GPU backend: every case the CPU backend passes must pass here too.
// On the GPU machine CNNRT_ONNX_TESTDATA points at the cases the CPU suite passed (scripts/bundle_device.sh);
// elsewhere the installed libonnx-testdata is used, and cases the CPU backend refuses are skipped.
#include <doctest/doctest.h>

#include <filesystem>
#include <iostream>

#include "conformance.hpp"

using namespace cnnrt;

TEST_CASE("ONNX conformance on the GPU backend matches the CPU backend") {
  const std::string root = testing::onnx_testdata_root();
  REQUIRE_MESSAGE(std::filesystem::is_directory(root), "ONNX test data not found at " << root);
  set_log_level(LogLevel::Off);
  const testing::ConformanceReport cpu = testing::run_conformance(Device::Cpu);
  std::vector<std::string> cpu_passed;
  for (const auto& c : cpu.cases) {
    if (c.outcome == "passed") cpu_passed.push_back(c.name);
  }
  const testing::ConformanceReport gpu = testing::run_conformance(Device::Gpu, cpu_passed);
  set_log_level(LogLevel::Warn);
  std::cout << "conformance (gpu): " << gpu.count("passed") << " passed, " << gpu.count("failed") << " failed, "
            << gpu.count("unsupported") << " unsupported, of the " << cpu_passed.size() << " cases the CPU passes\n";
  for (const auto& c : gpu.cases) {
    if (c.outcome != "passed") std::cout << "  " << c.outcome << " " << c.name << ": " << c.detail << "\n";
  }
  CHECK(gpu.count("passed") == static_cast<int>(cpu_passed.size()));
  CHECK(cpu_passed.size() >= 200);
}

// Listed by name, so that a case missing from the data (or refused by the CPU backend) fails here instead of
// dropping out of the comparison above.
TEST_CASE("ONNX conformance on the GPU backend: every ConvTranspose, DepthToSpace, SpaceToDepth and "
          "InstanceNormalization case passes") {
  const std::string root = testing::onnx_testdata_root();
  REQUIRE_MESSAGE(std::filesystem::is_directory(root), "ONNX test data not found at " << root);
  set_log_level(LogLevel::Off);
  int passed = 0;
  for (const std::string& name : testing::zoo_op_cases()) {
    // Case by case (not run_conformance, which would rewrite CNNRT_CONFORMANCE_REPORT with these alone).
    const testing::CaseResult c = testing::run_case(std::filesystem::path(root) / name, name, Device::Gpu);
    CHECK_MESSAGE(c.outcome == "passed", c.name << ": " << c.detail);
    passed += c.outcome == "passed";
  }
  set_log_level(LogLevel::Warn);
  CHECK(passed == static_cast<int>(testing::zoo_op_cases().size()));
}
