// Measured kernel choice. For a step with several eligible kernels, the tuner times each on scratch
// buffers of the real shapes and keeps the fastest; choices are cached on disk per device, kernel set and
// layer signature (plan/tuning_cache.hpp), so a second load does no timing.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cnnrt/cnnrt.hpp"
#include "gpu/device_info.hpp"
#include "plan/gpu_plan.hpp"
#include "plan/tuning_cache.hpp"

namespace cnnrt::plan {

// The kernel set the cache keys carry: a fingerprint of every variant name the planner can offer (the
// convolution registry's and the chain kernel's), so that a change to the set invalidates cached choices.
const std::string& kernel_set_version();

// Throws Usage unless `name` (Options::force_kernel) names a kernel this build offers, or the start of some
// kernels' names: a family of the registry, one of its variants, a chain variant ("chain", "..._jit"), or
// "separate_steps" / "direct_reference".
void check_forced_kernel(const std::string& name);

struct KernelCandidate {
  std::string name;    // unique, stable: used in the cache and by --force-kernel
  std::string config;  // launch configuration, for plans
  LaunchFn launch;     // same contract as Step::launch
  HostLaunchFn launch_from_host = {};  // optional: as Step::launch_from_host
  bool signals_done = false;           // as Step::signals_done
  int64_t workspace_floats = 0;  // scratch it needs, passed as its last input
  bool reference = false;        // the plain kernel every other candidate's output is checked against
  bool contender = false;        // a reference that may also be chosen where it is the fastest (a chain's
                                 // separate steps); else it is chosen only when no other candidate runs
};

struct TuneShapes {
  std::vector<int64_t> input_floats;  // element count of each data input the launch reads (random-filled)
  int64_t output_floats = 0;          // element count of the output
  // Time one launch a sample instead of back-to-back launches: for candidates that are the whole plan (a network
  // in one launch against all its steps), measured as the plan runs, one replay at a time (a kernel whose
  // prologue overlaps the launch before it gains back to back what a single replay does not give it).
  bool single_replays = false;
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
  // `reference` (else index 0) is run first; a candidate whose output disagrees with it is dropped. The
  // reference is chosen only when no other candidate runs (it is the oracle), unless it is a `contender`.
  // `signature` must identify the layer completely (op, shapes, attributes, epilogue).
  virtual Choice choose(const std::string& signature, const std::vector<KernelCandidate>& candidates,
                        const TuneShapes& shapes) = 0;

  // Whole-plan choices measured outside the tuner (which steps launch without overlap) share its cache, keyed
  // by device and kernel set as its own entries: the entry stored for `signature`, if any, and storing one.
  virtual std::optional<CachedChoice> recall(const std::string& signature) const = 0;
  virtual void remember(const std::string& signature, const CachedChoice& choice) = 0;
};

std::unique_ptr<Tuner> make_tuner(const Options& options, const gpu::DeviceInfo& device);

// Where the tuning cache lives when Options::tuning_cache is empty: $CNNRT_CACHE_DIR/tuning.json, else
// $XDG_CACHE_HOME/cnnrt/tuning.json, else ~/.cache/cnnrt/tuning.json.
std::string default_tuning_cache_path();

}  // namespace cnnrt::plan
