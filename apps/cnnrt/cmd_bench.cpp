// cnnrt bench: our kernels beside cuDNN on identical data, per layer (suites, --conv) or per model step,
// and whole-model latency and throughput. Tables on stdout, --json FILE (docs/bench-json.md), --plot FILE.png.
// Measures GPU kernels only: --device cpu is refused.
#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cnnrt/bench.hpp"
#include "common.hpp"

namespace cnnrt_cli {

namespace {

using nlohmann::json;
namespace bench = cnnrt::bench;

json to_json(const bench::Environment& e) {
  return {{"gpu", e.gpu},          {"sm_count", e.sm_count}, {"sm_clock_mhz", e.sm_clock_mhz},
          {"memory_clock_mhz", e.memory_clock_mhz},          {"driver", e.driver},
          {"cuda_runtime", e.cuda_runtime},                  {"cudnn", e.cudnn},
          {"cnnrt", e.engine},     {"cnnrt_commit", cnnrt::build_commit()},
          {"precision", "fp32"},
          {"floor_memory_bytes_per_s", bench::kMemoryBytesPerSecond},
          {"floor_fp32_flops_per_s", bench::kFp32FlopsPerSecond}};
}

json to_json(const bench::Comparison& c) {
  json j = {{"label", c.label},
            {"nodes", c.nodes},
            {"output_shape", c.output_shape},
            {"kernel", c.kernel},
            {"ours_us", c.ours_us},
            {"flops", c.flops},
            {"min_bytes", c.min_bytes},
            {"floor_us", c.floor_us},
            {"floor_share", c.floor_share()}};
  if (!c.cudnn_algo.empty()) {
    j["cudnn_algo"] = c.cudnn_algo;
    j["cudnn_us"] = c.cudnn_us > 0 ? json(c.cudnn_us) : json(nullptr);
    j["speedup"] = c.cudnn_us > 0 ? json(c.speedup()) : json(nullptr);
    if (c.alone_us > 0) j["alone_us"] = c.alone_us;
    j["rel_error"] = c.rel_error;
    j["cudnn_rel_error"] = c.cudnn_us > 0 ? json(c.cudnn_rel_error) : json(nullptr);
    j["mismatch"] = c.mismatch;
  }
  return j;
}

json to_json(const bench::Timing& t) {
  return {{"samples", t.samples}, {"min_us", t.min_us}, {"median_us", t.median_us}, {"mean_us", t.mean_us},
          {"p90_us", t.p90_us},   {"p99_us", t.p99_us}, {"max_us", t.max_us},       {"unstable", t.unstable}};
}

void print_header(const bench::Environment& e, bool launch_overlap) {
  fmt::print("GPU {} ({} SMs, {} MHz SM, {} MHz memory), driver {}, CUDA {}, cuDNN {}, cnnrt {}, FP32, {}\n", e.gpu,
             e.sm_count, e.sm_clock_mhz, e.memory_clock_mhz, e.driver, e.cuda_runtime, e.cudnn, e.engine,
             launch_overlap ? "our launches overlapped (PDL)" : "plain launches (--no-launch-overlap)");
  fmt::print("floor = max(bytes once / {:.1f} TB/s, FLOPs / {:.1f} TFLOP/s); speedup = cuDNN time / our time\n\n",
             bench::kMemoryBytesPerSecond / 1e12, bench::kFp32FlopsPerSecond / 1e12);
}

std::string cudnn_cell(const bench::Comparison& c) {
  if (c.cudnn_algo.empty()) return "";
  if (c.cudnn_us <= 0) return c.cudnn_algo;
  return fmt::format("{:>10.2f}  {:<30}", c.cudnn_us, c.cudnn_algo);
}

void print_comparison_row(const bench::Comparison& c, size_t label_width) {
  std::string speed = c.cudnn_us > 0 ? fmt::format("{:6.2f}x", c.speedup()) : "      -";
  if (c.mismatch) speed += fmt::format(" MISMATCH (ours {:.1e} from exact)", c.rel_error);
  // (A model step's speedup compares it alone, back to back as cuDNN is timed: printed last.)
  const std::string alone = c.alone_us > 0 ? fmt::format("  alone {:.2f}", c.alone_us) : "";
  fmt::print("{:<{}}  {:<36} {:>10.2f}  {:<42} {}  {:>9.2f}  {:>5.0f}%{}\n", c.label, label_width, c.kernel, c.ours_us,
             cudnn_cell(c), speed, c.floor_us, 100.0 * c.floor_share(), alone);
}

void print_comparison_head(size_t label_width, const char* first) {
  fmt::print("{:<{}}  {:<36} {:>10}  {:>10}  {:<30} {:>7}  {:>9}  {:>6}\n", first, label_width, "our kernel", "ours us",
             "cuDNN us", "cuDNN algorithm", "speedup", "floor us", "floor");
}

struct BenchCommand {
  std::string model_path;
  std::vector<std::string> suites;
  std::vector<std::string> convs;
  int64_t batch = 1;
  int iterations = 1000;
  double duration_s = 0;
  double warmup_ms = 200;
  bool include_transfers = false;
  std::string json_path;
  std::string plot_path;
  ShapeFlags shapes;
  EngineFlags engine;

  int run() const {
    if (model_path.empty() && suites.empty() && convs.empty()) {
      throw cnnrt::Error(cnnrt::ErrorCode::Usage, "bench: give a model, --suite NAME or --conv N,C,H,W,F,K");
    }
    if (engine.device == "cpu") {
      throw cnnrt::Error(cnnrt::ErrorCode::Usage, "bench: cnnrt bench times GPU kernels; --device cpu is not possible");
    }
    if (shapes.given() && model_path.empty()) {
      throw cnnrt::Error(cnnrt::ErrorCode::Usage, "bench: --shape needs a model");
    }
    // Checked before the GPU is touched: a wrong shape is refused the same way everywhere.
    const std::vector<cnnrt::Shape> model_shapes = shapes.given() ? input_shapes() : std::vector<cnnrt::Shape>{};
    JsonSink json_out(json_path);
    bench::BenchOptions options;
    options.engine = engine.options();
    options.warmup_ms = warmup_ms;
    const bench::Environment env = bench::environment();
    print_header(env, !engine.no_launch_overlap);
    json doc = {{"schema", "cnnrt-bench/1"},
                {"environment", to_json(env)},
                {"command", command_line_},
                {"launch_overlap", !engine.no_launch_overlap}};
    bool mismatch = false;

    std::vector<bench::LayerSpec> layers;
    for (const std::string& s : suites) {
      for (auto& l : bench::suite(s)) layers.push_back(std::move(l));
    }
    for (const std::string& c : convs) layers.push_back(bench::parse_conv(c));
    if (!layers.empty()) mismatch |= run_layers(layers, options, &doc);
    if (!model_path.empty()) mismatch |= run_model(options, model_shapes, &doc);

    json_out.write(doc.dump(2));
    json_out.close();
    if (!plot_path.empty()) plot(doc);
    if (mismatch) fmt::print(stderr, "error: our output is more than 1e-5 from the exact answer on at least one layer (see MISMATCH)\n");
    return mismatch ? 1 : 0;
  }

  bool run_layers(const std::vector<bench::LayerSpec>& layers, const bench::BenchOptions& options, json* doc) const {
    size_t width = 10;
    for (const auto& l : layers) width = std::max(width, l.name.size());
    print_comparison_head(width, "layer");
    json rows = json::array();
    double log_sum = 0, min_speedup = INFINITY;
    int compared = 0;
    bool mismatch = false;
    for (const auto& layer : layers) {
      const bench::Comparison c = bench::bench_conv_layer(layer, options);
      print_comparison_row(c, width);
      std::fflush(stdout);
      rows.push_back(to_json(c));
      if (c.cudnn_us > 0) {
        log_sum += std::log(c.speedup());
        min_speedup = std::min(min_speedup, c.speedup());
        ++compared;
      }
      mismatch |= c.mismatch;  // ours is judged against the FP64 answer with or without a cuDNN column
    }
    json summary = {{"layers", layers.size()}, {"compared", compared}};
    if (compared > 0) {
      const double geo = std::exp(log_sum / compared);
      summary["geomean_speedup"] = geo;
      summary["min_speedup"] = min_speedup;
      fmt::print("\n{} layers; against cuDNN: geometric-mean speedup {:.2f}x, lowest {:.2f}x\n", layers.size(), geo,
                 min_speedup);
    }
    (*doc)["layers"] = rows;
    (*doc)["layers_summary"] = summary;
    return mismatch;
  }

  // The --shape flags as one shape per input: the names come from the model (read on the CPU, which also
  // checks the shapes against it, so a wrong one is refused before the GPU is touched).
  std::vector<cnnrt::Shape> input_shapes() const {
    cnnrt::Options cpu = engine.options();
    cpu.device = cnnrt::Device::Cpu;
    const cnnrt::Model model = cnnrt::Model::load(model_path, cpu);
    std::vector<cnnrt::Shape> resolved = shapes.resolve(model);
    model.output_shapes(resolved);
    return resolved;
  }

  // `model_shapes`: one per input (--shape), or empty for --batch.
  bool run_model(const bench::BenchOptions& options, const std::vector<cnnrt::Shape>& model_shapes, json* doc) const {
    const bench::ModelReport r =
        model_shapes.empty()
            ? bench::bench_model(model_path, batch, options, iterations, duration_s, include_transfers)
            : bench::bench_model(model_path, model_shapes, options, iterations, duration_s, include_transfers);
    std::vector<std::string> shape_texts;
    for (const cnnrt::Shape& s : r.input_shapes) shape_texts.push_back(shape_text(s));
    fmt::print("model {} batch {}, input{} {} ({})\n", r.model, r.batch, r.input_shapes.size() == 1 ? "" : "s",
               fmt::join(shape_texts, ", "), r.cuda_graph ? "CUDA graph replay" : "no CUDA graph");
    const auto& l = r.latency;
    fmt::print("latency{} over {} runs: min {:.2f} us, median {:.2f} us, mean {:.2f} us, p90 {:.2f} us, p99 {:.2f} us, "
               "max {:.2f} us\n",
               r.included_transfers ? " (host to host: Context::run on host data)" : " (GPU compute)", l.samples,
               l.min_us, l.median_us, l.mean_us, l.p90_us, l.p99_us, l.max_us);
    if (l.unstable) fmt::print("warning: high run-to-run spread (p90 {:.0f}% above the median)\n", 100 * (l.p90_us / l.median_us - 1));
    fmt::print("throughput: {:.0f} images/s ({:.2f} us per batch of {} back to back)\n", r.throughput, r.per_run_us,
               r.batch);
    fmt::print("transfers: host-to-device {:.2f} us, device-to-host {:.2f} us (pinned memory)\n\n", r.h2d_us, r.d2h_us);
    size_t width = 10;
    for (const auto& s : r.steps) width = std::max(width, s.timing.label.size());
    print_comparison_head(width, "step");
    bool mismatch = false;
    json steps = json::array();
    for (const auto& s : r.steps) {
      print_comparison_row(s.timing, width);
      json j = to_json(s.timing);
      j["share"] = s.share;
      steps.push_back(j);
      mismatch |= s.is_conv && s.timing.mismatch;
    }
    fmt::print("{:<{}}  {:<36} {:>10.2f}\n", "total (sum of steps)", width, "", r.steps_ours_us);
    if (r.conv_cudnn_us > 0) {
      fmt::print("convolution steps cuDNN can run, each alone: ours {:.2f} us, cuDNN {:.2f} us, speedup {:.2f}x\n",
                 r.conv_ours_us, r.conv_cudnn_us, r.conv_cudnn_us / r.conv_ours_us);
    }
    (*doc)["model"] = {{"path", r.model},
                       {"batch", r.batch},
                       {"input_shapes", r.input_shapes},
                       {"cuda_graph", r.cuda_graph},
                       {"included_transfers", r.included_transfers},
                       {"latency", to_json(r.latency)},
                       {"throughput_images_per_s", r.throughput},
                       {"per_run_us", r.per_run_us},
                       {"h2d_us", r.h2d_us},
                       {"d2h_us", r.d2h_us},
                       {"steps", steps},
                       {"steps_total_us", r.steps_ours_us},
                       {"conv_ours_us", r.conv_ours_us},
                       {"conv_cudnn_us", r.conv_cudnn_us}};
    return mismatch;
  }

  // Draws the bars with scripts/plot_bench.py (Debian's python3-matplotlib) from the JSON.
  void plot(const json& doc) const {
    std::string json_file = json_path;
    if (json_file.empty() || json_file == "-") {
      json_file = plot_path + ".json";
      std::ofstream(json_file) << doc.dump() << "\n";
    }
    const std::string script = find_plot_script();
    const std::string cmd = fmt::format("/usr/bin/python3 '{}' '{}' '{}'", script, json_file, plot_path);
    if (std::system(cmd.c_str()) != 0) {
      throw cnnrt::Error(cnnrt::ErrorCode::Io, "plotting failed (" + cmd + "); it needs python3-matplotlib "
                                               "(scripts/install-deps.sh --dev)");
    }
    fmt::print(stderr, "wrote {}\n", plot_path);
  }

  static std::string find_plot_script() {
    namespace fs = std::filesystem;
    if (const char* env = std::getenv("CNNRT_PLOT_SCRIPT"); env && *env) return env;
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec).parent_path();
    for (const fs::path& candidate : {exe / "../share/cnnrt/plot_bench.py", exe / "../../../scripts/plot_bench.py",
                                      fs::path(CNNRT_SOURCE_DIR) / "scripts/plot_bench.py"}) {
      if (fs::exists(candidate, ec)) return fs::weakly_canonical(candidate, ec).string();
    }
    throw cnnrt::Error(cnnrt::ErrorCode::Io, "cannot find plot_bench.py (set CNNRT_PLOT_SCRIPT)");
  }

  std::string command_line_;
};

}  // namespace

Action add_bench_command(CLI::App& app) {
  auto cmd = std::make_shared<BenchCommand>();
  CLI::App* sub = app.add_subcommand("bench", "Time a model or conv layers beside cuDNN (GPU only)");
  sub->add_option("model", cmd->model_path, "ONNX model (per-step table, latency, throughput)");
  sub->add_option("--suite", cmd->suites, "Layer suite: special, general, small (repeatable; docs/performance.md)")
      ->check(CLI::IsMember({"special", "general", "small"}));
  sub->add_option("--conv", cmd->convs, "A conv layer N,C,H,W,F,K[,stride,pad] (repeatable)");
  CLI::Option* batch = sub->add_option("--batch", cmd->batch, "Batch size for the model (default 1)")
                           ->check(CLI::PositiveNumber);
  cmd->shapes.add_to(*sub)->excludes(batch);
  auto* iters = sub->add_option("--iterations", cmd->iterations, "Single runs for the latency statistics (default 1000)")
                    ->check(CLI::PositiveNumber);
  sub->add_option("--duration", cmd->duration_s, "Or: seconds of single runs")->excludes(iters)->check(CLI::PositiveNumber);
  sub->add_option("--warmup-ms", cmd->warmup_ms, "Warm-up before timing (default 200)");
  sub->add_flag("--include-transfers", cmd->include_transfers,
                "Latency host to host: Context::run on host buffers (copies in, the steps and copies out as one CUDA "
                "graph), on the host clock");
  add_json_option(*sub, cmd->json_path, "every figure (docs/bench-json.md)");
  sub->add_option("--plot", cmd->plot_path, "Draw per-layer bars, ours vs cuDNN, as a PNG");
  cmd->engine.add_to(*sub);
  return [cmd] {
    cmd->command_line_ = invocation();
    return cmd->run();
  };
}

}  // namespace cnnrt_cli
