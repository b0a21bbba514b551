// Pieces every cnnrt subcommand shares: engine options from flags, device names, error reporting.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "cnnrt/cnnrt.hpp"

namespace cnnrt_cli {

// Flags that shape how a model is loaded: --device, --no-cuda-graph, --no-launch-overlap, --no-tuning,
// --tuning-cache, --disable-pass, --force-kernel, --max-*-bytes. Each command that loads a model adds them;
// they may also come before the command's name (GlobalFlags below).
struct EngineFlags {
  std::string device = "auto";
  bool no_cuda_graph = false;
  bool no_launch_overlap = false;  // process-wide (cnnrt::set_launch_overlap): applied by options()
  bool no_tuning = false;
  std::string tuning_cache;
  std::vector<std::string> disabled_passes;
  std::string force_kernel;
  int64_t max_weight_bytes = cnnrt::Limits{}.max_weight_bytes;
  int64_t max_activation_bytes = cnnrt::Limits{}.max_activation_bytes;

  // Registers the flags on `command`, bound to this object, and remembers which command they belong to.
  void add_to(CLI::App& command);
  cnnrt::Options options() const;
};

// The flags every command takes, before or after its name: `cnnrt -v plan m.onnx` and `cnnrt plan -v m.onnx`
// are the same. -v is every command's; the engine flags are those of the commands that load a model. main()
// registers these on the tool and -v on each command (the commands add their own EngineFlags), and after
// parsing hands what came before the name to the chosen command.
struct GlobalFlags {
  bool verbose = false;
  EngineFlags engine;  // as given before the command's name

  void add_to_tool(CLI::App& tool);
  void add_to_command(CLI::App& command);
  // Engine flags given before the command's name go to its EngineFlags unless the command was given the same
  // flag itself (--disable-pass: both lists); a Usage error if the command loads no model.
  void apply_to(const CLI::App& tool, const CLI::App& command) const;
};

// --json PATH, on every command that has it: the command's report as JSON, written to the file PATH, or with
// `-` to standard output, which then carries the JSON alone (the text that would have gone there goes to
// standard error).
CLI::Option* add_json_option(CLI::App& command, std::string& path, const std::string& what);

// Where --json writes. Opened before the command's work starts, so an unwritable path fails at once; a file
// appears (or replaces the old one) only when close() succeeds.
class JsonSink {
 public:
  explicit JsonSink(const std::string& path);  // "": no JSON
  JsonSink(const JsonSink&) = delete;
  JsonSink& operator=(const JsonSink&) = delete;
  ~JsonSink();
  explicit operator bool() const { return file_ != nullptr; }
  bool to_stdout() const { return path_ == "-"; }
  // One JSON text, then a newline (a report, or one record of a JSON Lines stream).
  void write(const std::string& json_text);
  // Flushes and closes; an Io error naming the file if anything failed to be written. Says "wrote PATH" on
  // standard error for a file.
  void close();

 private:
  std::string partial_path() const;

  std::string path_;
  std::FILE* file_ = nullptr;
};

// --shape NAME=1x1x512x512 (repeatable; --shape 1x1x512x512 for a model with one input): explicit input shapes,
// which bind the model's symbolic dimensions (a fully convolutional net's height and width).
struct ShapeFlags {
  std::vector<std::string> specs;

  // Adds --shape to `command` and returns the option (for excludes()).
  CLI::Option* add_to(CLI::App& command);
  bool given() const { return !specs.empty(); }
  // One shape per model input, in the model's order: the given ones, and the declared shape of an input that
  // has no symbolic dimension. Usage errors name the problem: a malformed shape, an unknown or repeated
  // input name, an unnamed shape for a model of several inputs, an input with symbolic dimensions left out.
  // The engine checks the shapes themselves (rank, fixed dimensions, sizes >= 1) when they are used.
  std::vector<cnnrt::Shape> resolve(const cnnrt::Model& model) const;
};

// "1x1x512x512" -> {1, 1, 512, 512}; Usage error naming `spec` when a part is not an integer.
cnnrt::Shape parse_shape(const std::string& text, const std::string& spec);
std::string shape_text(const cnnrt::Shape& shape);  // "1x1x512x512"

cnnrt::Device parse_device(const std::string& name);

// The command line this process was started with (for reports that say how they were produced).
const std::string& invocation();
void set_invocation(int argc, char** argv);

// A subcommand: registers its flags on `app` and returns the action to run when it is chosen.
using Action = std::function<int()>;
Action add_run_command(CLI::App& app);
Action add_plan_command(CLI::App& app);
Action add_ops_command(CLI::App& app);
Action add_bench_command(CLI::App& app);
Action add_infer_command(CLI::App& app);
Action add_eval_command(CLI::App& app);
Action add_serve_command(CLI::App& app);

}  // namespace cnnrt_cli
