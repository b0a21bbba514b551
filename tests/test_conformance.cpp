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
  // Refusals must say what is unsupported: every message names an op, a type, an attribute or an opset.
  for (const auto& c : report.cases) {
    if (c.outcome != "unsupported") continue;
    CHECK_MESSAGE(c.detail.find("cnnrt") != std::string::npos, c.name << ": " << c.detail);
  }
}
