// The official ONNX test cases on the CPU reference backend: every case whose ops cnnrt supports must
// match the expected outputs; every other case must be refused with an Unsupported error, never crash.
#include <doctest/doctest.h>

#include <filesystem>
#include <iostream>

#include "conformance.hpp"

using namespace cnnrt;

TEST_CASE("ONNX conformance on the CPU backend") {
  const std::string root = testing::onnx_testdata_root();
  REQUIRE_MESSAGE(std::filesystem::is_directory(root),
                  "ONNX test data not found at " << root << " (install libonnx-testdata: scripts/install-deps.sh)");
  set_log_level(LogLevel::Off);
  const testing::ConformanceReport report = testing::run_conformance(Device::Cpu);
  set_log_level(LogLevel::Warn);
  const int passed = report.count("passed"), failed = report.count("failed");
  const int unsupported = report.count("unsupported");
  std::cout << "conformance (cpu): " << passed << " passed, " << failed << " failed, " << unsupported
            << " unsupported, of " << report.cases.size() << " cases\n";
  for (const auto& c : report.cases) {
    if (c.outcome == "failed") std::cout << "  FAILED " << c.name << ": " << c.detail << "\n";
  }
  CHECK(failed == 0);
  CHECK(passed >= 200);
  // Refusals must say what is unsupported: the file, and the node, opset, domain or type at fault.
  for (const auto& c : report.cases) {
    if (c.outcome != "unsupported") continue;
    const std::string& d = c.detail;
    const bool names_file = d.find(c.name.substr(c.name.find('/') + 1) + "/model.onnx") != std::string::npos;
    const bool names_what = d.find(" node ") != std::string::npos || d.find("opset") != std::string::npos ||
                            d.find("domain") != std::string::npos || d.find("type") != std::string::npos ||
                            d.find("graph input") != std::string::npos || d.find("graph output") != std::string::npos;
    CHECK_MESSAGE((names_file && names_what), c.name << ": " << d);
  }
}

TEST_CASE("ONNX conformance on the CPU backend: every ConvTranspose, DepthToSpace, SpaceToDepth and "
          "InstanceNormalization case passes") {
  const std::string root = testing::onnx_testdata_root();
  REQUIRE(std::filesystem::is_directory(root));
  set_log_level(LogLevel::Off);
  int passed = 0;
  for (const std::string& name : testing::zoo_op_cases()) {
    // Case by case (not run_conformance, which would rewrite CNNRT_CONFORMANCE_REPORT with these alone).
    const testing::CaseResult c = testing::run_case(std::filesystem::path(root) / name, name, Device::Cpu);
    CHECK_MESSAGE(c.outcome == "passed", c.name << ": " << c.detail);
    passed += c.outcome == "passed";
  }
  set_log_level(LogLevel::Warn);
  CHECK(passed == static_cast<int>(testing::zoo_op_cases().size()));
}
