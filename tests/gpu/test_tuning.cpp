// The planner's measured choices and their cache on the GPU: a first load measures and writes the cache, a
// second load of the same model measures nothing, and entries of another kernel set, or that lack a candidate of
// today, are measured again.
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "cnnrt/cnnrt.hpp"
#include "gpu_test_util.hpp"
#include "gpu/device_info.hpp"
#include "plan/gpu/tuner.hpp"

using namespace cnnrt;
using namespace cnnrt::testing;
namespace fs = std::filesystem;

namespace {

std::string plan_with_cache(const std::string& cache, int64_t batch) {
  Options options;
  options.device = Device::Gpu;
  options.tuning = true;
  options.tuning_cache = cache;
  options.batch_sizes = {batch};
  return Model::load(repo_path("models/fashion_lenet.onnx"), options).describe_plan(batch, true);
}

// How often `word` stands as a word in `text` (how each step was chosen: "measured", "cache", ...).
int count(const std::string& text, const std::string& word) {
  const std::regex pattern("\\b" + word + "\\b");
  return static_cast<int>(std::distance(std::sregex_iterator(text.begin(), text.end(), pattern), std::sregex_iterator()));
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A tuning cache in a fresh temporary folder, removed with it.
struct TempCache {
  explicit TempCache(const std::string& prefix) {
    std::string name = "/tmp/" + prefix + "_XXXXXX";
    dir = mkdtemp(name.data());
    file = (dir / "tuning.json").string();
  }
  ~TempCache() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  fs::path dir;
  std::string file;
};

// Whether a whole-plan choice is measured here: compute capability 9.0 or later (programmatic dependent launch,
// the kernels whose options the tests rely on), and `switch_off` (an environment variable) not set.
bool whole_plan_measured(const char* switch_off) {
  int device = 0, major = 0;
  REQUIRE(cudaGetDevice(&device) == cudaSuccess);
  REQUIRE(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess);
  const char* off = std::getenv(switch_off);
  return major >= 9 && !(off && std::string(off) != "0");
}

// A GPU model's options at batch 1, its kernel choices in the tuning cache `cache`.
Options batch1_gpu_options(const std::string& cache) {
  Options options;
  options.device = Device::Gpu;
  options.tuning_cache = cache;
  options.batch_sizes = {1};
  return options;
}

// The CPU backend's output of the model at `path` for `input`: what the GPU plans are checked against.
Tensor cpu_output(const std::string& path, const Tensor& input) {
  Options options;
  options.device = Device::Cpu;
  return Context(Model::load(path, options)).run({input})[0];
}

// A random input of batch 1 for `model`'s first input (other extents left open become 9).
Tensor batch1_input(const Model& model, uint32_t seed) {
  std::vector<int64_t> shape = model.inputs()[0].shape;
  shape[0] = 1;
  int64_t count = 1;
  for (int64_t& d : shape) count *= (d = d < 0 ? 9 : d);
  return Tensor{shape, random_floats(static_cast<size_t>(count), seed)};
}

}  // namespace

TEST_CASE("tuning cache: a second load measures nothing; another kernel set is measured again") {
  const TempCache temp("cnnrt_tuning");
  const std::string& cache = temp.file;
  for (int64_t batch : {1, 64}) {
    CAPTURE(batch);
    const std::string first = plan_with_cache(cache, batch);
    CHECK_MESSAGE(count(first, "measured") > 0, first);
    CHECK_MESSAGE(count(first, "cache") == 0, first);
    const std::string second = plan_with_cache(cache, batch);
    CHECK_MESSAGE(count(second, "measured") == 0, second);
    CHECK_MESSAGE(count(second, "cache") == count(first, "measured"), second);
    // Each candidate that ran shows its distance from the reference's output, within its check's bound for those
    // kept; the cache keeps the distances.
    const std::regex kept(R"(us  err ([0-9.e+-]+))");
    int shown = 0;
    for (auto it = std::sregex_iterator(first.begin(), first.end(), kept); it != std::sregex_iterator(); ++it) {
      CHECK(std::stod((*it)[1].str()) <= 1e-5);
      ++shown;
    }
    CHECK_MESSAGE(shown >= count(first, "measured"), first);  // the reference and one candidate at least, a step
    CHECK_MESSAGE(count(second, "err") == count(first, "err"), second);
  }
  // An entry that lacks one of today's candidates (a family that has started taking the layer) is measured again:
  // one kernel choice's entry, less a runner-up, gets that runner-up back, timed.
  {
    nlohmann::json doc = nlohmann::json::parse(read(cache));
    std::string key, dropped;
    for (auto& [k, e] : doc["entries"].items()) {
      // (Kernel choices only: the launch-overlap and plan-choice entries, "plain:..." and "changed:...", are whole-plan
      // choices of another kind.)
      if (k.find(plan::kernel_set_version()) == std::string::npos || !e.contains("timings") ||
          e.value("kernel", "").rfind("plain:", 0) == 0 || e.value("kernel", "").rfind("changed:", 0) == 0) {
        continue;
      }
      nlohmann::json& timings = e["timings"];
      for (size_t i = 0; i < timings.size() && dropped.empty(); ++i) {
        const std::string kernel = timings[i].value("kernel", "");
        if (kernel != e.value("kernel", "") && timings[i].value("us", -1.0) > 0) {
          dropped = kernel;
          timings.erase(i);
        }
      }
      if (!dropped.empty()) {
        key = k;
        break;
      }
    }
    REQUIRE_MESSAGE(!dropped.empty(), "no cached choice with a runner-up");
    std::ofstream(cache) << doc.dump();
    for (int64_t batch : {1, 64}) plan_with_cache(cache, batch);
    const nlohmann::json after = nlohmann::json::parse(read(cache));
    REQUIRE(after["entries"].contains(key));
    bool back = false;
    for (const auto& t : after["entries"][key]["timings"]) back |= t.value("kernel", "") == dropped;
    CHECK_MESSAGE(back, key << ": " << dropped << " was not measured again");
  }
  // The cache's keys carry the kernel set; rewritten to another set, nothing in the file matches any more.
  const std::string text = read(cache);
  REQUIRE(text.find(plan::kernel_set_version()) != std::string::npos);
  std::ofstream(cache) << std::regex_replace(text, std::regex(plan::kernel_set_version()), "0000000000000000");
  const std::string stale = plan_with_cache(cache, 1);
  CHECK_MESSAGE(count(stale, "measured") > 0, stale);
  CHECK_MESSAGE(count(stale, "cache") == 0, stale);
}

TEST_CASE("launch overlap: measured on the whole plan once, then from the cache; the outputs stay right") {
  if (!whole_plan_measured("CNNRT_NO_LAUNCH_TUNING")) {
    MESSAGE("no programmatic dependent launch here (or CNNRT_NO_LAUNCH_TUNING is set): nothing is measured");
    return;
  }
  const TempCache temp("cnnrt_overlap");
  const std::string& cache = temp.file;
  const std::string path = repo_path("tests/data/resnet_basic_block_opset13/model.onnx");
  // At batch 1 the sequence kernel runs the whole block as one step, which has no launch to overlap: the block runs
  // as its separate steps here (every other choice as usual).
  Options options = batch1_gpu_options(cache);
  options.force_kernel = "separate_steps";
  const Model first = Model::load(path, options);
  // The measured choice is stored beside the kernel choices, under this device and kernel set; the second load
  // (its kernels now from the cache too) finds it and writes nothing: a second measurement would store other
  // timings.
  const std::string text = read(cache);
  CHECK_MESSAGE(text.find("launch-overlap-v2|") != std::string::npos, text);
  const std::string first_plan = first.describe_plan(1);
  REQUIRE_MESSAGE(first_plan.find("steps (1,") == std::string::npos, first_plan);
  const Model second = Model::load(path, options);
  const std::string second_plan = second.describe_plan(1);
  CHECK(read(cache) == text);
  INFO(first_plan);
  INFO(second_plan);
  // Where some steps launch plainly, the second plan names the cache, with the same steps.
  const std::string note = "steps launched without overlapping the step before (";
  CHECK((first_plan.find(note) == std::string::npos) == (second_plan.find(note) == std::string::npos));
  if (first_plan.find(note) != std::string::npos) {
    CHECK(first_plan.find(note + "measured") != std::string::npos);
    CHECK(second_plan.find(note + "cache") != std::string::npos);
  }
  const Tensor input = batch1_input(first, 77);
  const Tensor want = cpu_output(path, input);
  CHECK(max_rel_error(Context(second).run({input})[0], want) < 1e-4);
}

TEST_CASE("side streams: measured on the whole plan once, then from the cache; the outputs stay right") {
  // ResNet-20's projection shortcuts can run beside their blocks' first convolutions (plan::side_steps): whether they
  // do is timed on the whole plan at load, stored beside the kernel choices, and found there by the next load.
  const char* off = std::getenv("CNNRT_NO_SIDE_STEPS");
  if (off && std::string(off) != "0") {
    MESSAGE("CNNRT_NO_SIDE_STEPS is set: nothing is measured");
    return;
  }
  const TempCache temp("cnnrt_side_streams");
  const std::string& cache = temp.file;
  const std::string path = repo_path("models/zoo/resnet20/model.onnx");
  const Options options = batch1_gpu_options(cache);
  const Model first = Model::load(path, options);
  const std::string first_plan = first.describe_plan(1);
  INFO(first_plan);
  const std::string text = read(cache);
  CHECK_MESSAGE(text.find("side-streams-v1|") != std::string::npos, text);
  const std::regex note(R"(side steps (beside the others|in order) \((measured|cache): a run)");
  std::smatch first_note;
  REQUIRE(std::regex_search(first_plan, first_note, note));
  CHECK(first_note[2].str() == "measured");
  // Beside the others, the plan names its side steps; in order, none.
  CHECK((first_note[1].str() == "beside the others") ==
        (first_plan.find("on a second stream of the CUDA graph") != std::string::npos));
  const Model second = Model::load(path, options);
  const std::string second_plan = second.describe_plan(1);
  INFO(second_plan);
  std::smatch second_note;
  REQUIRE(std::regex_search(second_plan, second_note, note));
  CHECK(second_note[1].str() == first_note[1].str());
  CHECK(second_note[2].str() == "cache");
  CHECK(read(cache) == text);
  const Tensor input = batch1_input(first, 79);
  const Tensor want = cpu_output(path, input);
  CHECK(max_rel_error(Context(first).run({input})[0], want) < 1e-4);
  CHECK(max_rel_error(Context(second).run({input})[0], want) < 1e-4);
}

TEST_CASE("whole-plan choices: measured once, then from the cache; fused steps run as theirs, outputs stay right") {
  if (!whole_plan_measured("CNNRT_NO_PLAN_TUNING")) {
    MESSAGE("the LeNet chain kernel needs compute capability 9.0 (or CNNRT_NO_PLAN_TUNING is set): nothing fused");
    return;
  }
  const TempCache temp("cnnrt_plan_choices");
  const std::string& cache = temp.file;
  const std::string path = repo_path("models/fashion_lenet.onnx");
  const Options options = batch1_gpu_options(cache);
  const Model first = Model::load(path, options);
  const std::string first_plan = first.describe_plan(1);
  INFO(first_plan);
  // At batch 1 the planner runs LeNet as one chain launch; the search's choice is stored under the plan's
  // signature, which names the fused steps. A second load finds it and measures nothing.
  const std::string note = "changed in the whole plan, which runs faster so (";
  const std::string text = read(cache);
  std::smatch key;
  const std::regex entry(R"re("([^"]*plan-choices-v2\|(\d+) steps\|fused ([0-9,]+)\|[^"]*)")re");
  REQUIRE_MESSAGE(std::regex_search(text, key, entry), text);
  const int planned_steps = std::stoi(key[2].str());
  const std::string fused = key[3].str();
  // (The same plan, every choice in it now from the cache.)
  const std::string from_cache = std::regex_replace(first_plan, std::regex("\\bmeasured\\b"), "cache");
  CHECK(Model::load(path, options).describe_plan(1) == from_cache);
  CHECK(read(cache) == text);
  if (first_plan.find(note) != std::string::npos) CHECK(first_plan.find(note + "measured") != std::string::npos);
  // The cached choice rewritten to run every fused step as its steps: the next load does, the arena placed for
  // them, and its outputs match the CPU backend's and the fused plan's.
  nlohmann::json doc = nlohmann::json::parse(text);
  doc["entries"][key[1].str()]["kernel"] = "changed:" + std::regex_replace(fused, std::regex("(\\d+)"), "$1=steps");
  std::ofstream(cache) << doc.dump();
  const Model unfused = Model::load(path, options);
  const std::string unfused_plan = unfused.describe_plan(1);
  INFO(unfused_plan);
  CHECK(unfused_plan.find(note + "cache") != std::string::npos);
  std::smatch steps;
  REQUIRE(std::regex_search(unfused_plan, steps, std::regex(R"(steps \((\d+), GPU\))")));
  CHECK(std::stoi(steps[1].str()) > planned_steps);
  const Tensor input = batch1_input(first, 78);
  const Tensor want = cpu_output(path, input);
  const Tensor got_fused = Context(first).run({input})[0];
  CHECK(max_rel_error(got_fused, want) < 1e-4);
  for (int r = 0; r < 2; ++r) CHECK(max_rel_error(Context(unfused).run({input})[0], want) < 1e-4);
}

// MobileNet v2 at batch 1 has every kind of option: fused blocks, convolutions with close runner-ups, and where
// the steps won alone, fusions offered. Each kind in turn is applied to every step that offers it, from a
// rewritten cache entry: the plan says so, and its outputs match the CPU backend's.
TEST_CASE("whole-plan choices: every fused step as its steps, every runner-up, every fusion offered: outputs right") {
  if (!whole_plan_measured("CNNRT_NO_PLAN_TUNING")) {
    MESSAGE("not on compute capability 9.0 (or CNNRT_NO_PLAN_TUNING is set): the options differ");
    return;
  }
  const TempCache temp("cnnrt_plan_options");
  const std::string& cache = temp.file;
  const std::string path = repo_path("models/zoo/mobilenet_v2/model.onnx");
  const Options options = batch1_gpu_options(cache);
  const Model first = Model::load(path, options);
  const std::string text = read(cache);
  std::smatch key;
  const std::regex entry(
      R"re("([^"]*plan-choices-v2\|\d+ steps\|fused ([0-9,]*)\|other kernels ([0-9,]*)\|fusions ([0-9,]*)\|[^"]*)")re");
  REQUIRE_MESSAGE(std::regex_search(text, key, entry), text);
  const std::string fused = key[2].str(), other = key[3].str(), fusions = key[4].str();
  CHECK(!fused.empty());
  CHECK(!other.empty());
  const Tensor input = batch1_input(first, 79);
  const Tensor want = cpu_output(path, input);
  const auto each = [](const std::string& list, const std::string& as) {
    return std::regex_replace(list, std::regex("(\\d+)"), "$1=" + as);
  };
  const std::vector<std::pair<std::string, std::string>> rewrites = {
      {"as their steps", each(fused, "steps")}, {"runner-ups", each(other, "0")}, {"fusions", each(fusions, "fused")}};
  for (const auto& [what, changes] : rewrites) {
    if (changes.empty()) continue;
    CAPTURE(what);
    nlohmann::json doc = nlohmann::json::parse(text);
    doc["entries"][key[1].str()]["kernel"] = "changed:" + changes;
    std::ofstream(cache) << doc.dump();
    const Model changed = Model::load(path, options);
    const std::string plan = changed.describe_plan(1);
    INFO(plan);
    CHECK(plan.find("changed in the whole plan, which runs faster so (cache") != std::string::npos);
    CHECK(relative_error(Context(changed).run({input})[0].data, want.data) < 1e-5);  // the planner's own bound
  }
}

// The reference runs first and checks the others. An oracle reference (a family's plain direct kernel) is
// chosen only when nothing else runs, however fast; a contender (a chain's separate steps) wins where it is
// the fastest. Here the reference is one copy and the other candidate the same copy 40 times over.
TEST_CASE("tuner: an oracle reference is never chosen over a runnable candidate; a contender is where fastest") {
  constexpr int64_t kFloats = 1 << 16;
  const auto copies = [](int n) {
    return [n](const float* const* in, float* const* out, Stream s) {
      for (int i = 0; i < n; ++i) {
        cudaMemcpyAsync(out[0], in[0], kFloats * sizeof(float), cudaMemcpyDeviceToDevice, s);
      }
    };
  };
  for (const bool contender : {false, true}) {
    CAPTURE(contender);
    Options options;
    options.device = Device::Gpu;
    options.tuning = true;
    options.tuning_cache = "none";
    const std::unique_ptr<plan::Tuner> tuner = plan::make_tuner(options, gpu::current_device());
    std::vector<plan::KernelCandidate> candidates(2);
    candidates[0].name = "slow_copies";
    candidates[0].launch = copies(40);
    candidates[1].name = "separate_steps";
    candidates[1].launch = copies(1);
    candidates[1].reference = true;
    candidates[1].contender = contender;
    plan::TuneShapes shapes;
    shapes.input_floats = {kFloats};
    shapes.output_floats = kFloats;
    const plan::Choice choice = tuner->choose(contender ? "test contender" : "test oracle", candidates, shapes);
    REQUIRE(choice.timings.size() == 2);
    CHECK(choice.timings[0].kernel == "separate_steps");  // fastest first
    CHECK(choice.index == (contender ? 1u : 0u));
  }
}
