// cnnrt plan MODEL: the steps, kernels, shapes and memory plan the engine would run.
#include <fmt/format.h>

#include <memory>

#include "common.hpp"

namespace cnnrt_cli {

namespace {

struct PlanCommand {
  std::string model_path;
  int64_t batch = 0;
  bool explain = false;
  bool list_passes = false;
  ShapeFlags shapes;
  EngineFlags engine;

  int run() const {
    if (list_passes) {
      for (const auto& [name, description] : cnnrt::graph_passes()) fmt::print("{:<22} {}\n", name, description);
      return 0;
    }
    if (model_path.empty()) throw cnnrt::Error(cnnrt::ErrorCode::Usage, "plan: a model is required");
    const cnnrt::Model model = cnnrt::Model::load(model_path, engine.options());
    if (shapes.given()) {
      fmt::print("{}", model.describe_plan(shapes.resolve(model), explain));
    } else {
      fmt::print("{}", model.describe_plan(batch, explain));
    }
    return 0;
  }
};

}  // namespace

Action add_plan_command(CLI::App& app) {
  auto cmd = std::make_shared<PlanCommand>();
  CLI::App* sub = app.add_subcommand("plan", "Show the steps, kernels, shapes and memory plan for a model");
  sub->add_option("model", cmd->model_path, "ONNX model");
  CLI::Option* batch = sub->add_option("--batch", cmd->batch,
                                       "Batch size to plan for (default: as the model declares, 1 if symbolic)")
                           ->check(CLI::PositiveNumber);
  cmd->shapes.add_to(*sub)->excludes(batch);
  sub->add_flag("--explain", cmd->explain, "Show each measured kernel choice with its runners-up");
  sub->add_flag("--list-passes", cmd->list_passes, "List the graph passes (names for --disable-pass)");
  cmd->engine.add_to(*sub);
  return [cmd] { return cmd->run(); };
}

Action add_ops_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("ops", "List the ONNX ops cnnrt runs");
  (void)sub;
  return [] {
    for (const std::string& op : cnnrt::supported_ops()) fmt::print("{}\n", op);
    return 0;
  };
}

}  // namespace cnnrt_cli
