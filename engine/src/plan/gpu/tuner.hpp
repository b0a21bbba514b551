// Measured kernel choice. For a step with several eligible kernels, the tuner times each on scratch
// buffers of the real shapes and keeps the fastest; choices are cached on disk per device, layer
// signature and kernel-set version, so a second load does no timing.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cnnrt/cnnrt.hpp"
#include "gpu/device_info.hpp"
#include "plan/gpu_plan.hpp"

namespace cnnrt::plan {

// Bump when a kernel changes in a way that invalidates cached timings, or candidates are added (a cached
// winner would otherwise stand without the new ones being timed). 2: c1 filter groups, pooled split;
// 3: general-kernel splits of 16 (non-portable clusters); 4: wgmma (wg3) and small-map kernels; 5: chain
// window lanes; 6: chain kernels compiled for the model's shapes at plan time; 7: wgr (wgmma, input split in
// registers); 8: wgh (wgmma from a halo tile, filters by TMA) and the two-instruction TF32 split; 9: wgh
// partials of 2 or 4 stages (names gain _p2 / _p4).
constexpr int kKernelSetVersion = 9;

struct KernelCandidate {
  std::string name;    // unique, stable: used in the cache and by --force-kernel
  std::string config;  // launch configuration, for plans
  LaunchFn launch;     // same contract as Step::launch
  int64_t workspace_floats = 0;  // scratch it needs, passed as its last input
  bool reference = false;        // the plain kernel every other candidate's output is checked against
};

struct TuneShapes {
  std::vector<int64_t> input_floats;  // element count of each data input the launch reads (random-filled)
  int64_t output_floats = 0;          // element count of the output
};

struct Choice {
  size_t index = 0;                   // into the candidate list
  std::vector<Candidate> timings;     // fastest first; empty when not measured
  std::string how;                    // "measured", "cache", "heuristic", "forced"
};

class Tuner {
 public:
  virtual ~Tuner() = default;
  // Candidates are in heuristic order: index 0 is the choice when tuning is off. The candidate marked
  // `reference` (else index 0) is run first; a candidate whose output disagrees with it is dropped.
  // `signature` must identify the layer completely (op, shapes, attributes, epilogue).
  virtual Choice choose(const std::string& signature, const std::vector<KernelCandidate>& candidates,
                        const TuneShapes& shapes) = 0;
};

std::unique_ptr<Tuner> make_tuner(const Options& options, const gpu::DeviceInfo& device);

// Where the tuning cache lives when Options::tuning_cache is empty: $CNNRT_CACHE_DIR/tuning.json, else
// $XDG_CACHE_HOME/cnnrt/tuning.json, else ~/.cache/cnnrt/tuning.json.
std::string default_tuning_cache_path();

}  // namespace cnnrt::plan
