// The tuning cache (plan/tuning_cache.hpp): entries survive a reload, a new kernel set misses the old entries,
// a broken file is replaced, and processes writing one file at once leave it valid with every entry.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "plan/tuning_cache.hpp"

using namespace cnnrt::plan;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    char name[] = "/tmp/cnnrt_tuning_cache_XXXXXX";
    path = mkdtemp(name);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

CachedChoice choice(const std::string& kernel, double us) { return {kernel, {{kernel, us}, {"direct_reference", 90.0}}, {}}; }

}  // namespace

TEST_CASE("tuning cache: what one process stores, the next finds, with its timings") {
  TempDir dir;
  const std::string file = (dir.path / "sub" / "tuning.json").string();  // folders made on first store
  const std::string key = TuningCache::key("NVIDIA H100", "0123abcd", "conv x=[1,1,28,28]");
  {
    TuningCache cache(file);
    CHECK_FALSE(cache.find(key).has_value());
    cache.store(key, choice("c1_k5_s1_f8_t32x8_r1_relu_pool", 1.5));
  }
  TuningCache again(file);
  const auto found = again.find(key);
  REQUIRE(found.has_value());
  CHECK(found->kernel == "c1_k5_s1_f8_t32x8_r1_relu_pool");
  REQUIRE(found->timings.size() == 2);
  CHECK(found->timings[0].second == doctest::Approx(1.5));
  CHECK(found->timings[1].first == "direct_reference");
}

TEST_CASE("tuning cache: each candidate's distance from the reference is kept where it was measured") {
  TempDir dir;
  const std::string file = (dir.path / "tuning.json").string();
  CachedChoice c = choice("wgh_px64_f64_st2_relu", 4.0);
  c.timings.emplace_back("tc_f64_px64_relu", -1.0);  // dropped: it failed its check
  c.errors = {{"wgh_px64_f64_st2_relu", 3.5e-7}, {"direct_reference", 0.0}, {"tc_f64_px64_relu", 2.0e-3}};
  TuningCache(file).store("k", c);
  const auto found = TuningCache(file).find("k");
  REQUIRE(found.has_value());
  REQUIRE(found->errors.size() == 3);
  CHECK(found->errors.at("wgh_px64_f64_st2_relu") == doctest::Approx(3.5e-7));
  CHECK(found->errors.at("direct_reference") == 0.0);
  CHECK(found->errors.at("tc_f64_px64_relu") == doctest::Approx(2.0e-3));
  // An entry stored without distances (an older file) reads back without them, and one whose distance is not a
  // number (a hand-edited file) reads back without it, the rest of the file intact.
  TuningCache(file).store("old", choice("gen_k3", 3.0));
  CHECK(TuningCache(file).find("old")->errors.empty());
  std::string text;
  {
    std::ifstream in(file);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const size_t at = text.find("3.5e-07");
  REQUIRE(at != std::string::npos);
  std::ofstream(file) << text.replace(at, 7, "null");
  const auto edited = TuningCache(file).find("k");
  REQUIRE(edited.has_value());
  CHECK(edited->errors.count("wgh_px64_f64_st2_relu") == 0);
  CHECK(edited->errors.size() == 2);
  CHECK(TuningCache(file).find("old").has_value());
}

TEST_CASE("tuning cache: an entry of another kernel set or device is not found") {
  TempDir dir;
  const std::string file = (dir.path / "tuning.json").string();
  TuningCache cache(file);
  cache.store(TuningCache::key("NVIDIA H100", "aaaa", "conv x"), choice("gen_k3", 3.0));
  TuningCache reloaded(file);
  CHECK(reloaded.find(TuningCache::key("NVIDIA H100", "aaaa", "conv x")).has_value());
  CHECK_FALSE(reloaded.find(TuningCache::key("NVIDIA H100", "bbbb", "conv x")).has_value());
  CHECK_FALSE(reloaded.find(TuningCache::key("NVIDIA A100", "aaaa", "conv x")).has_value());
  CHECK_FALSE(reloaded.find(TuningCache::key("NVIDIA H100", "aaaa", "conv y")).has_value());
}

TEST_CASE("tuning cache: an unreadable file is ignored, then rewritten whole") {
  TempDir dir;
  const std::string file = (dir.path / "tuning.json").string();
  std::ofstream(file) << "{ this is not json";
  TuningCache cache(file);
  CHECK(cache.size() == 0);
  cache.store("k", choice("tc_f64_px64_act", 2.0));
  TuningCache reloaded(file);
  CHECK(reloaded.size() == 1);
}

TEST_CASE("tuning cache: an in-memory cache writes no file") {
  TuningCache cache("");
  cache.store("k", choice("wgr_px64_f64_relu", 2.0));
  CHECK(cache.find("k").has_value());
  CHECK(cache.path().empty());
}

TEST_CASE("tuning cache: processes writing one file at once leave it valid, with every entry") {
  TempDir dir;
  const std::string file = (dir.path / "tuning.json").string();
  constexpr int kProcesses = 6, kEntries = 25;
  for (int p = 0; p < kProcesses; ++p) {
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      // Each process opens the cache before the others have written, then stores its own entries one by one.
      TuningCache cache(file);
      for (int e = 0; e < kEntries; ++e) {
        cache.store("proc" + std::to_string(p) + "/layer" + std::to_string(e), choice("k" + std::to_string(e), e));
      }
      _exit(0);
    }
  }
  for (int p = 0; p < kProcesses; ++p) {
    int status = 0;
    wait(&status);
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  }
  TuningCache merged(file);
  CHECK(merged.size() == size_t(kProcesses * kEntries));
  for (int p = 0; p < kProcesses; ++p) {
    for (int e = 0; e < kEntries; ++e) {
      const auto found = merged.find("proc" + std::to_string(p) + "/layer" + std::to_string(e));
      REQUIRE(found.has_value());
      CHECK(found->kernel == "k" + std::to_string(e));
    }
  }
  // No temporary files are left beside it.
  int others = 0;
  for (const auto& entry : fs::directory_iterator(dir.path)) {
    const std::string name = entry.path().filename().string();
    if (name != "tuning.json" && name != "tuning.json.lock") ++others;
  }
  CHECK(others == 0);
}
