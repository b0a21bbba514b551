// cnnrt run MODEL --test-data DIR: run a model on ONNX test data and compare with the expected outputs.
// cnnrt run MODEL --shape NAME=1x1x64x64: run it once on random inputs of those shapes and describe the outputs.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <random>

#include "common.hpp"
#include "testdata.hpp"

namespace cnnrt_cli {

namespace {

struct RunCommand {
  std::string model_path;
  std::string test_data;
  std::string output_dir;
  double rtol = 1e-4;
  double atol = 1e-5;
  ShapeFlags shapes;
  EngineFlags engine;

  int run() const {
    if (test_data.empty() && !shapes.given()) {
      throw cnnrt::Error(cnnrt::ErrorCode::Usage, "run: give --test-data DIR, or --shape to run on random inputs");
    }
    const cnnrt::Model model = cnnrt::Model::load(model_path, engine.options());
    cnnrt::Context context(model);
    fmt::print("model: {} ({} backend)\n", model_path, cnnrt::to_string(model.device()));
    const std::vector<cnnrt::Shape> input_shapes = shapes.given() ? shapes.resolve(model) : std::vector<cnnrt::Shape>{};
    if (test_data.empty()) return run_random(model, context, input_shapes);
    int mismatched = 0, compared = 0;
    const auto dirs = find_data_set_dirs(test_data);
    for (size_t d = 0; d < dirs.size(); ++d) {
      const DataSet set = read_data_set(dirs[d], model);
      if (!input_shapes.empty()) check_data_shapes(set, model, input_shapes);
      const std::vector<cnnrt::Tensor> outputs = context.run(set.inputs);
      const std::string set_name = std::filesystem::path(set.dir).filename().string();
      if (!output_dir.empty()) write_outputs(outputs, model, dirs.size() > 1 ? set_name : "");
      if (set.expected.empty()) {
        fmt::print("{}: ran, no expected outputs to compare\n", set_name);
        continue;
      }
      bool set_ok = true;
      for (size_t i = 0; i < outputs.size(); ++i) {
        const Comparison c = compare(outputs[i], set.expected[i], rtol, atol);
        ++compared;
        set_ok = set_ok && c.ok();
        const std::string name = model.outputs()[i].name;
        if (!c.shapes_match) {
          fmt::print("{}: output '{}': shape {} but expected {}  MISMATCH\n", set_name, name,
                     fmt::join(outputs[i].shape, "x"), fmt::join(set.expected[i].shape, "x"));
        } else {
          fmt::print("{}: output '{}' [{}]: max abs err {:.3g}, max rel err {:.3g}  {}\n", set_name, name,
                     fmt::join(outputs[i].shape, "x"), c.max_abs, c.max_rel,
                     c.ok() ? "ok" : fmt::format("MISMATCH ({} elements beyond rtol {} atol {}, first at {})",
                                                 c.mismatches, rtol, atol, c.first_bad));
        }
      }
      mismatched += set_ok ? 0 : 1;
    }
    fmt::print("{} data set{}, {} output{} compared: {}\n", dirs.size(), dirs.size() == 1 ? "" : "s", compared,
               compared == 1 ? "" : "s", mismatched == 0 ? "all match" : fmt::format("{} mismatched", mismatched));
    return mismatched == 0 ? 0 : 1;
  }

  // --shape with --test-data: the data must have the shapes asked for.
  static void check_data_shapes(const DataSet& set, const cnnrt::Model& model, const std::vector<cnnrt::Shape>& want) {
    for (size_t i = 0; i < set.inputs.size() && i < want.size(); ++i) {
      if (set.inputs[i].shape != want[i]) {
        throw cnnrt::Error(cnnrt::ErrorCode::InvalidInput,
                           fmt::format("{}: input '{}' has shape {}, but --shape gives {}", set.dir,
                                       model.inputs()[i].name, shape_text(set.inputs[i].shape), shape_text(want[i])));
      }
    }
  }

  // One run on uniform random inputs in [-1, 1) (seeded, never zeros), outputs described and optionally written.
  int run_random(const cnnrt::Model& model, cnnrt::Context& context,
                 const std::vector<cnnrt::Shape>& input_shapes) const {
    // The engine checks the shapes (rank, fixed dims, sizes) before anything is allocated.
    model.output_shapes(input_shapes);
    std::vector<cnnrt::Tensor> inputs;
    std::mt19937 rng(1234);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    for (const cnnrt::Shape& shape : input_shapes) {
      cnnrt::Tensor t;
      t.shape = shape;
      size_t count = 1;
      for (int64_t d : shape) count *= static_cast<size_t>(d);
      t.data.resize(count);
      for (float& v : t.data) v = uniform(rng);
      inputs.push_back(std::move(t));
    }
    const std::vector<cnnrt::Tensor> outputs = context.run(inputs);
    for (size_t i = 0; i < inputs.size(); ++i) {
      fmt::print("input '{}' [{}]: uniform random in [-1, 1)\n", model.inputs()[i].name, shape_text(inputs[i].shape));
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      const std::vector<float>& v = outputs[i].data;
      double sum = 0;
      for (float x : v) sum += x;
      const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
      fmt::print("output '{}' [{}]: min {:.4g}, max {:.4g}, mean {:.4g}\n", model.outputs()[i].name,
                 shape_text(outputs[i].shape), v.empty() ? 0.0f : *lo, v.empty() ? 0.0f : *hi,
                 v.empty() ? 0.0 : sum / double(v.size()));
    }
    if (!output_dir.empty()) write_outputs(outputs, model, "");
    return 0;
  }

  void write_outputs(const std::vector<cnnrt::Tensor>& outputs, const cnnrt::Model& model,
                     const std::string& subdir) const {
    const std::filesystem::path dir = std::filesystem::path(output_dir) / subdir;
    std::filesystem::create_directories(dir);
    for (size_t i = 0; i < outputs.size(); ++i) {
      cnnrt::write_tensor_file((dir / fmt::format("output_{}.pb", i)).string(), outputs[i], model.outputs()[i].name);
    }
  }
};

}  // namespace

Action add_run_command(CLI::App& app) {
  auto cmd = std::make_shared<RunCommand>();
  CLI::App* sub = app.add_subcommand("run", "Run a model on ONNX test data and compare with expected outputs, or "
                                            "once on random inputs of the shapes given");
  sub->add_option("model", cmd->model_path, "ONNX model")->required();
  sub->add_option("--test-data", cmd->test_data,
                  "Folder with input_K.pb/output_K.pb or test_data_set_* folders (without it, --shape runs the model "
                  "once on random inputs)");
  cmd->shapes.add_to(*sub);
  sub->add_option("--rtol", cmd->rtol, "Relative tolerance (default 1e-4)");
  sub->add_option("--atol", cmd->atol, "Absolute tolerance (default 1e-5)");
  sub->add_option("--output-dir", cmd->output_dir, "Write the outputs here as output_K.pb");
  cmd->engine.add_to(*sub);
  return [cmd] { return cmd->run(); };
}

}  // namespace cnnrt_cli
