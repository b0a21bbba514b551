// cnnrt: classify images, evaluate classifiers, run, inspect and benchmark ONNX CNNs. Exit codes: 0 ok,
// 1 outputs differ from the expected ones, 2 usage, 3 unsupported model, 4 invalid model or input,
// 5 no usable GPU, 6 a limit was hit, 7 CUDA error, 8 internal error.
#include <cstdio>
#include <exception>

#include "common.hpp"

int main(int argc, char** argv) {
  cnnrt_cli::set_invocation(argc, argv);
  CLI::App app{"cnnrt: a small CNN inference engine (ONNX, CUDA)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("cnnrt ") + cnnrt::version());
  bool verbose = false;
  app.add_flag("-v,--verbose", verbose, "Log what the engine does (passes, kernel choices)");

  const std::pair<const char*, cnnrt_cli::Action (*)(CLI::App&)> commands[] = {
      {"infer", cnnrt_cli::add_infer_command},
      {"eval", cnnrt_cli::add_eval_command},
      {"run", cnnrt_cli::add_run_command},
      {"plan", cnnrt_cli::add_plan_command},
      {"bench", cnnrt_cli::add_bench_command},
      {"ops", cnnrt_cli::add_ops_command},
      {"serve", cnnrt_cli::add_serve_command},
  };
  std::vector<std::pair<CLI::App*, cnnrt_cli::Action>> actions;
  for (const auto& [name, add] : commands) {
    (void)name;
    actions.emplace_back(nullptr, add(app));
    actions.back().first = app.get_subcommands({}).back();
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  try {
    cnnrt::set_log_level(verbose ? cnnrt::LogLevel::Info : cnnrt::LogLevel::Warn);
    for (auto& [command, action] : actions) {
      if (command->parsed()) return action();
    }
    return 2;
  } catch (const cnnrt::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return cnnrt::exit_code(e.code());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: internal: %s\n", e.what());
    return cnnrt::exit_code(cnnrt::ErrorCode::Internal);
  }
}
