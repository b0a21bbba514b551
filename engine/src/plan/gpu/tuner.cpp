#include "plan/gpu/tuner.hpp"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <regex>

#include "core/error.hpp"
#include "core/log.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/device_memory.hpp"
#include "gpu/graph_timing.hpp"
#include "kernels/conv_chain.cuh"
#include "kernels/dense_chain.cuh"
#include "kernels/dense_layer.cuh"
#include "kernels/conv_registry.hpp"
#include "kernels/conv_pw.cuh"
#include "kernels/dw_pw.cuh"
#include "kernels/mbconv.cuh"
#include "kernels/net.cuh"
#include "kernels/seqnet.cuh"
#include "kernels/squeeze_excite.cuh"
#include "plan/gpu/lower_util.hpp"
#include "plan/tuning_cache.hpp"

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

// The kernels offered outside the convolution registry, against the steps they replace: the chain kernel's
// variants as built, the dense chain kernel's, the squeeze-excitation kernel's, the depthwise + pointwise
// kernel's, the inverted residual block kernel's (one block or a chain of them), the dense layer kernel's, the
// network kernel's and the sequence kernel's; and the Gemm steps' (ours and cuBLASLt's ranked algorithms).
std::vector<std::string> fusion_kernel_names() {
  std::vector<std::string> names = kernels::conv_chain_variant_names();
  for (std::string& n : kernels::dense_chain_variant_names()) names.push_back(std::move(n));
  for (std::string& n : kernels::squeeze_excite_variant_names()) names.push_back(std::move(n));
  for (std::string& n : kernels::dw_pw_variant_names()) names.push_back(std::move(n));
  for (std::string& n : kernels::conv_pw_variant_names()) names.push_back(std::move(n));
  for (std::string& n : kernels::mbconv_variant_names()) names.push_back(std::move(n));
  for (std::string& n : kernels::mbconv_chain_variant_names()) names.push_back(std::move(n));
  for (std::string& n : kernels::dense_layer_variant_names()) names.push_back(std::move(n));
  for (std::string& n : kernels::net_variant_names()) names.push_back(n + "_cut*");  // the cut: which node it starts at
  for (std::string& n : kernels::seqnet_variant_names()) {
    names.push_back(n + "_cut*");
    names.push_back(n + "_jit_cut*");  // compiled at plan time
  }
  for (std::string& n : gemm_kernel_names()) names.push_back(std::move(n));
  return names;
}

}  // namespace

const std::string& kernel_set_version() {
  static const std::string version = [] {
    // The registry's fingerprint, extended by the fusion kernels' names (FNV-1a over them, on top).
    uint64_t hash = std::stoull(kernels::kernel_set_version(), nullptr, 16);
    for (const std::string& name : fusion_kernel_names()) {
      for (const char c : name + "\n") {
        hash ^= static_cast<unsigned char>(c);
        hash *= 1099511628211ull;
      }
    }
    return fmt::format("{:016x}", hash);
  }();
  return version;
}

void check_forced_kernel(const std::string& name) {
  if (name.empty()) return;
  std::vector<std::string> names = fusion_kernel_names();
  names.insert(names.end(), {"separate_steps", "direct_reference"});
  for (const std::string& n : kernels::conv_chain_variant_names()) names.push_back(n + "_jit");  // compiled at plan time
  std::vector<std::string> families;
  for (const kernels::ConvFamily* f : kernels::conv_families()) {
    families.push_back(f->name());
    for (std::string& n : f->variant_names()) names.push_back(std::move(n));
  }
  for (const std::string& n : names) {
    // A whole name ("*": any value of that token), or the start of one.
    const std::string fixed = n.substr(0, n.find('*'));
    if (fixed.compare(0, name.size(), name) == 0 && name.size() <= fixed.size()) return;
    if (n.find('*') == std::string::npos) continue;
    std::string pattern;
    for (const char c : n) pattern += c == '*' ? std::string("[0-9x]+") : std::string(1, c);
    if (std::regex_match(name, std::regex(pattern))) return;
  }
  fail(ErrorCode::Usage,
       "--force-kernel '{}' names no kernel of this build: names start with a family ({}), 'chain', 'dense_chain', "
       "'squeeze_excite', 'dw_pw', 'wgr_pw', 'mbconv', 'mbchain', 'dense_layer', 'net', 'seqnet', 'gemm', 'cublaslt', "
       "'separate_steps' or 'direct_reference' (`cnnrt plan --list-kernels` lists them)",
       name, fmt::join(families, ", "));
}

namespace {

// A cached choice stands only where every candidate of today was timed beside it: a family that starts taking a
// layer it used to decline keeps its variants' names (and so the kernel-set version), and is measured there.
bool timed_all(const CachedChoice& cached, const std::vector<KernelCandidate>& candidates) {
  for (const KernelCandidate& c : candidates) {
    const auto same = [&](const std::pair<std::string, double>& t) { return t.first == c.name; };
    if (std::none_of(cached.timings.begin(), cached.timings.end(), same)) return false;
  }
  return true;
}

constexpr int kLaunchesPerSample = 10;  // launches captured in one graph: amortises launch gaps
constexpr int kSamples = 7;             // graph replays timed; the median is kept
constexpr int kSingleSamples = 31;      // replays of one launch timed (TuneShapes::single_replays): noisier

class MeasuringTuner final : public Tuner {
 public:
  MeasuringTuner(const Options& options, const gpu::DeviceInfo& device)
      : options_(options),
        device_(device),
        cache_(options.tuning_cache == "none" ? std::string()
               : options.tuning_cache.empty() ? default_tuning_cache_path()
                                              : options.tuning_cache) {}

  Choice choose(const std::string& signature, const std::vector<KernelCandidate>& candidates,
                const TuneShapes& shapes) override {
    CNNRT_CHECK(!candidates.empty(), ErrorCode::Internal, "no eligible kernel for {}", signature);
    Choice choice;
    if (!options_.force_kernel.empty()) {
      // The first candidate the name starts at a token of ("seqnet_cl1" names seqnet_cl1_cut0, not
      // seqnet_cl16_cut0), else the first it starts.
      const std::string& forced = options_.force_kernel;
      for (const bool whole_token : {true, false}) {
        for (size_t i = 0; i < candidates.size(); ++i) {
          const std::string& name = candidates[i].name;
          if (name.rfind(forced, 0) != 0) continue;
          if (whole_token && name.size() > forced.size() && name[forced.size()] != '_') continue;
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
    const std::string key = TuningCache::key(device_.name, kernel_set_version(), signature);
    if (const std::optional<CachedChoice> cached = cache_.find(key); cached && timed_all(*cached, candidates)) {
      for (size_t i = 0; i < candidates.size(); ++i) {
        if (candidates[i].name != cached->kernel) continue;
        choice.index = i;
        choice.how = "cache";
        for (const auto& [kernel, us] : cached->timings) {
          const auto e = cached->errors.find(kernel);
          choice.timings.push_back({kernel, us, e != cached->errors.end() ? e->second : -1.0});
        }
        return choice;
      }
    }
    choice = measure(signature, candidates, shapes);
    CachedChoice store;
    store.kernel = candidates[choice.index].name;
    for (const Candidate& t : choice.timings) {
      store.timings.emplace_back(t.kernel, t.median_us);
      if (t.error >= 0 && std::isfinite(t.error)) store.errors[t.kernel] = t.error;  // (JSON has no infinity)
    }
    cache_.store(key, store);
    return choice;
  }

  std::optional<CachedChoice> recall(const std::string& signature) const override {
    return cache_.find(TuningCache::key(device_.name, kernel_set_version(), signature));
  }

  void remember(const std::string& signature, const CachedChoice& choice) override {
    cache_.store(TuningCache::key(device_.name, kernel_set_version(), signature), choice);
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
    choice.index = reference;
    // A marked reference is the oracle: timed for the plan's report, chosen only when no other candidate runs
    // (unless it is a contender: then the fastest wins, it included).
    const bool oracle = candidates[reference].reference && !candidates[reference].contender;
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
        choice.timings.push_back({cand.name, -1, -1});
        continue;
      }
      CNNRT_CUDA_CHECK(cudaMemcpy(result.data(), out.get(), out_bytes, cudaMemcpyDeviceToHost));
      double error = 0;
      if (c == reference) {
        expected = result;
      } else {
        const OutputDistance d = distance(result, expected);
        error = d.relative();
        if (!d.agrees()) {
          log().warn("tuning {}: {} disagrees with {} ({:.2g} relative); dropped", signature, cand.name,
                     candidates[reference].name, error);
          choice.timings.push_back({cand.name, -1, error});
          continue;
        }
      }
      const double us = time_candidate(cand, args.data(), out_ptrs, stream, shapes.single_replays);
      choice.timings.push_back({cand.name, us, error});
      if ((c != reference || !oracle) && us < best) {
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

  // A candidate's output against the reference's: the 2-norms of the difference and of the reference, and
  // whether a NaN stands where the reference has none (or the other way round).
  struct OutputDistance {
    double diff = 0, norm = 0;
    bool nan_mismatch = false;
    // Within 1e-5 relative (2-norm) of the reference, the bound every kernel is held to (the convolutions'
    // reference sums in double: the FP64 answer for these inputs); NaN exactly where the reference has NaN.
    bool agrees() const { return !nan_mismatch && diff <= 1e-5 * norm + 1e-6; }
    double relative() const { return nan_mismatch ? INFINITY : diff / std::max(norm, 1e-30); }
  };
  static OutputDistance distance(const std::vector<float>& got, const std::vector<float>& want) {
    OutputDistance d;
    double num = 0, den = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      if (std::isnan(got[i]) != std::isnan(want[i])) d.nan_mismatch = true;
      if (std::isnan(got[i]) || std::isnan(want[i])) continue;
      num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
      den += double(want[i]) * want[i];
    }
    d.diff = std::sqrt(num);
    d.norm = std::sqrt(den);
    return d;
  }

  // Median over kSamples of (time of kLaunchesPerSample back-to-back launches in one CUDA graph) / launches; or, for
  // `single` replays, over kSingleSamples replays of a graph of one launch.
  static double time_candidate(const KernelCandidate& cand, const float* const* in, float* const* out,
                               cudaStream_t stream, bool single) {
    return gpu::median(gpu::time_captured_runs(stream, single ? 1 : kLaunchesPerSample,
                                               single ? kSingleSamples : kSamples,
                                               [&] { cand.launch(in, out, stream); }));
  }

  Options options_;
  const gpu::DeviceInfo& device_;
  TuningCache cache_;
};

}  // namespace

std::unique_ptr<Tuner> make_tuner(const Options& options, const gpu::DeviceInfo& device) {
  return std::make_unique<MeasuringTuner>(options, device);
}

}  // namespace cnnrt::plan
