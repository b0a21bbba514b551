// cnnrt: classify images, evaluate classifiers, run, inspect and benchmark ONNX CNNs. Exit codes: 0 ok,
// 1 outputs differ from the expected ones, 2 usage, 3 unsupported model, 4 invalid model or input,
// 5 no usable GPU, 6 a limit was hit, 7 CUDA error, 8 internal error. docs/cli.md documents every command.
#include <cstdio>
#include <exception>

#include "common.hpp"

int main(int argc, char** argv) {
  cnnrt_cli::set_invocation(argc, argv);
  CLI::App app{"cnnrt: a small CNN inference engine (ONNX, CUDA)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("cnnrt ") + cnnrt::version() + " (commit " + cnnrt::build_commit() +
                                        ")");
  app.footer(
      "Global options (-v and the engine options) may come before or after the command's name.\n"
      "Exit codes: 0 ok, 1 outputs differ from the expected ones (run, bench), 2 usage, 3 unsupported model,\n"
      "4 invalid model or input, 5 no usable GPU, 6 a limit was exceeded, 7 device error, 8 internal error.\n"
      "cnnrt COMMAND --help describes a command; docs/cli.md describes them all.");
  cnnrt_cli::GlobalFlags global;
  global.add_to_tool(app);

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
    global.add_to_command(*actions.back().first);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  try {
    cnnrt::set_log_level(global.verbose ? cnnrt::LogLevel::Debug : cnnrt::LogLevel::Warn);
    for (auto& [command, action] : actions) {
      if (!command->parsed()) continue;
      global.apply_to(app, *command);
      return action();
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
