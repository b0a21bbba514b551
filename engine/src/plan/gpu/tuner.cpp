#include "plan/gpu/tuner.hpp"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>

#include "core/error.hpp"
#include "core/log.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/device_memory.hpp"
#include "gpu/graph_timing.hpp"

namespace cnnrt::plan {

namespace fs = std::filesystem;

std::string default_tuning_cache_path() {
  if (const char* dir = std::getenv("CNNRT_CACHE_DIR"); dir && *dir) return (fs::path(dir) / "tuning.json").string();
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    return (fs::path(xdg) / "cnnrt" / "tuning.json").string();
  }
  if (const char* home = std::getenv("HOME"); home && *home) {
    return (fs::path(home) / ".cache" / "cnnrt" / "tuning.json").string();
  }
  return "cnnrt-tuning.json";
}

namespace {

constexpr int kLaunchesPerSample = 10;  // launches captured in one graph: amortises launch gaps
constexpr int kSamples = 7;             // graph replays timed; the median is kept

class MeasuringTuner final : public Tuner {
 public:
  MeasuringTuner(const Options& options, const gpu::DeviceInfo& device) : options_(options), device_(device) {
    if (options.tuning_cache != "none") {
      path_ = options.tuning_cache.empty() ? default_tuning_cache_path() : options.tuning_cache;
      load();
    }
  }

  Choice choose(const std::string& signature, const std::vector<KernelCandidate>& candidates,
                const TuneShapes& shapes) override {
    CNNRT_CHECK(!candidates.empty(), ErrorCode::Internal, "no eligible kernel for {}", signature);
    Choice choice;
    if (!options_.force_kernel.empty()) {
      for (size_t i = 0; i < candidates.size(); ++i) {
        if (candidates[i].name == options_.force_kernel ||
            candidates[i].name.rfind(options_.force_kernel, 0) == 0) {
          choice.index = i;
          choice.how = "forced";
          return choice;
        }
      }
      log().warn("--force-kernel {}: not eligible for {}; choosing as usual", options_.force_kernel, signature);
    }
    if (candidates.size() == 1 || !options_.tuning) {
      choice.how = candidates.size() == 1 ? "only candidate" : "heuristic";
      return choice;
    }
    const std::string key = fmt::format("{}|v{}|{}", device_.name, kKernelSetVersion, signature);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = cache_.find(key);
      if (it != cache_.end()) {
        const std::string winner = it->value("kernel", "");
        for (size_t i = 0; i < candidates.size(); ++i) {
          if (candidates[i].name == winner) {
            choice.index = i;
            choice.how = "cache";
            for (const auto& t : it->value("timings", nlohmann::json::array())) {
              choice.timings.push_back({t.value("kernel", ""), t.value("us", -1.0)});
            }
            return choice;
          }
        }
      }
    }
    choice = measure(signature, candidates, shapes);
    remember(key, candidates[choice.index].name, choice.timings);
    return choice;
  }

 private:
  Choice measure(const std::string& signature, const std::vector<KernelCandidate>& candidates,
                 const TuneShapes& shapes) {
    // Scratch buffers of the real shapes, inputs random in [-1, 1) (never zeros).
    std::vector<gpu::DeviceAllocation> inputs;
    std::vector<const float*> in_ptrs;
    std::mt19937 rng(12345);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (int64_t n : shapes.input_floats) {
      std::vector<float> host(static_cast<size_t>(n));
      for (float& x : host) x = dist(rng);
      inputs.emplace_back(host.size() * sizeof(float));
      CNNRT_CUDA_CHECK(cudaMemcpy(inputs.back().get(), host.data(), host.size() * sizeof(float),
                                  cudaMemcpyHostToDevice));
      in_ptrs.push_back(inputs.back().floats());
    }
    int64_t workspace_floats = 0;
    for (const KernelCandidate& c : candidates) workspace_floats = std::max(workspace_floats, c.workspace_floats);
    gpu::DeviceAllocation workspace(static_cast<size_t>(workspace_floats) * sizeof(float));
    const size_t out_bytes = static_cast<size_t>(shapes.output_floats) * sizeof(float);
    gpu::DeviceAllocation out(out_bytes);
    float* out_ptrs[1] = {out.floats()};
    cudaStream_t stream = nullptr;
    CNNRT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    // The reference runs first: every other candidate must agree with it on these inputs.
    size_t reference = 0;
    for (size_t c = 0; c < candidates.size(); ++c) {
      if (candidates[c].reference) reference = c;
    }
    std::vector<size_t> order = {reference};
    for (size_t c = 0; c < candidates.size(); ++c) {
      if (c != reference) order.push_back(c);
    }
    std::vector<float> expected, result(static_cast<size_t>(shapes.output_floats));
    Choice choice;
    double best = INFINITY;
    for (size_t c : order) {
      const KernelCandidate& cand = candidates[c];
      std::vector<const float*> args = in_ptrs;
      if (cand.workspace_floats > 0) args.push_back(workspace.floats());
      CNNRT_CUDA_CHECK(cudaMemsetAsync(out.get(), 0xFF, out_bytes, stream));  // poison: NaN everywhere
      cand.launch(args.data(), out_ptrs, stream);
      cudaError_t err = cudaGetLastError();
      if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
      if (err != cudaSuccess) {
        CNNRT_CHECK(c != reference, ErrorCode::DeviceError, "reference kernel {} failed on {}: {}", cand.name,
                    signature, cudaGetErrorString(err));
        log().warn("tuning {}: {} failed ({}); dropped", signature, cand.name, cudaGetErrorString(err));
        choice.timings.push_back({cand.name, -1});
        continue;
      }
      CNNRT_CUDA_CHECK(cudaMemcpy(result.data(), out.get(), out_bytes, cudaMemcpyDeviceToHost));
      if (c == reference) {
        expected = result;
      } else if (!agrees(result, expected)) {
        log().warn("tuning {}: {} disagrees with {}; dropped", signature, cand.name, candidates[reference].name);
        choice.timings.push_back({cand.name, -1});
        continue;
      }
      const double us = time_candidate(cand, args.data(), out_ptrs, stream);
      choice.timings.push_back({cand.name, us});
      if (us < best) {
        best = us;
        choice.index = c;
      }
    }
    cudaStreamDestroy(stream);
    std::stable_sort(choice.timings.begin(), choice.timings.end(), [](const Candidate& a, const Candidate& b) {
      return (a.median_us < 0 ? INFINITY : a.median_us) < (b.median_us < 0 ? INFINITY : b.median_us);
    });
    choice.how = "measured";
    log().debug("tuned {}: {} ({:.2f} us)", signature, candidates[choice.index].name, best);
    return choice;
  }

  static bool agrees(const std::vector<float>& got, const std::vector<float>& want) {
    double num = 0, den = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      if (std::isnan(got[i]) != std::isnan(want[i])) return false;
      if (std::isnan(got[i])) continue;
      num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
      den += double(want[i]) * want[i];
    }
    return std::sqrt(num) <= 1e-4 * std::sqrt(den) + 1e-6;
  }

  // Median over kSamples of (time of kLaunchesPerSample back-to-back launches in one CUDA graph) / launches.
  static double time_candidate(const KernelCandidate& cand, const float* const* in, float* const* out,
                               cudaStream_t stream) {
    return gpu::median(gpu::time_captured_runs(stream, kLaunchesPerSample, kSamples,
                                               [&] { cand.launch(in, out, stream); }));
  }

  void load() {
    std::ifstream in(path_);
    if (!in.good()) return;
    try {
      nlohmann::json doc = nlohmann::json::parse(in);
      if (doc.value("format", 0) == 1 && doc.contains("entries") && doc["entries"].is_object()) {
        cache_ = doc["entries"];
      }
    } catch (const std::exception& e) {
      log().warn("tuning cache '{}' is unreadable ({}); it will be rewritten", path_, e.what());
    }
  }

  void remember(const std::string& key, const std::string& kernel, const std::vector<Candidate>& timings) {
    std::lock_guard<std::mutex> lock(mutex_);
    nlohmann::json entry;
    entry["kernel"] = kernel;
    entry["timings"] = nlohmann::json::array();
    for (const Candidate& t : timings) entry["timings"].push_back({{"kernel", t.kernel}, {"us", t.median_us}});
    cache_[key] = entry;
    if (path_.empty()) return;
    // Write to a temporary file and rename, so a concurrent reader never sees half a file.
    std::error_code ec;
    fs::create_directories(fs::path(path_).parent_path(), ec);
    const std::string tmp = fmt::format("{}.{}.tmp", path_, static_cast<const void*>(this));
    {
      std::ofstream out(tmp);
      out << nlohmann::json{{"format", 1}, {"entries", cache_}}.dump(1) << "\n";
      if (!out.good()) {
        log().warn("cannot write tuning cache '{}'; choices will be measured again next time", path_);
        return;
      }
    }
    fs::rename(tmp, path_, ec);
    if (ec) log().warn("cannot write tuning cache '{}': {}", path_, ec.message());
  }

  Options options_;
  const gpu::DeviceInfo& device_;
  std::string path_;
  std::mutex mutex_;
  nlohmann::json cache_ = nlohmann::json::object();
};

}  // namespace

std::unique_ptr<Tuner> make_tuner(const Options& options, const gpu::DeviceInfo& device) {
  return std::make_unique<MeasuringTuner>(options, device);
}

}  // namespace cnnrt::plan
