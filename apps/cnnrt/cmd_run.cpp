// cnnrt run MODEL --test-data DIR: run a model on ONNX test data and compare with the expected outputs.
#include <fmt/format.h>

#include <filesystem>
#include <memory>

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
  EngineFlags engine;

  int run() const {
    const cnnrt::Model model = cnnrt::Model::load(model_path, engine.options());
    cnnrt::Context context(model);
    fmt::print("model: {} ({} backend)\n", model_path, cnnrt::to_string(model.device()));
    int mismatched = 0, compared = 0;
    const auto dirs = find_data_set_dirs(test_data);
    for (size_t d = 0; d < dirs.size(); ++d) {
      const DataSet set = read_data_set(dirs[d], model);
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
  CLI::App* sub = app.add_subcommand("run", "Run a model on ONNX test data and compare with expected outputs");
  sub->add_option("model", cmd->model_path, "ONNX model")->required();
  sub->add_option("--test-data", cmd->test_data, "Folder with input_K.pb/output_K.pb or test_data_set_* folders")
      ->required();
  sub->add_option("--rtol", cmd->rtol, "Relative tolerance (default 1e-4)");
  sub->add_option("--atol", cmd->atol, "Absolute tolerance (default 1e-5)");
  sub->add_option("--output-dir", cmd->output_dir, "Write the outputs here as output_K.pb");
  cmd->engine.add_to(*sub);
  return [cmd] { return cmd->run(); };
}

}  // namespace cnnrt_cli
