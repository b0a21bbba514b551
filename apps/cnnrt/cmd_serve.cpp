// cnnrt serve MODEL.onnx [MODEL.onnx ...]: the models behind the Open Inference Protocol (KServe v2) over HTTP,
// with dynamic batching and model instances on one or more GPUs (apps/cnnrt/serve/, docs/serving.md).
#include <memory>

#include "common.hpp"
#include "serve/server.hpp"

namespace cnnrt_cli {

namespace {

struct ServeCommand {
  cnnrt_serve::ServeConfig config;
  int64_t max_queue_delay_us = 500;
  EngineFlags engine;

  int run() {
    config.engine = engine.options();
    config.max_queue_delay = std::chrono::microseconds(max_queue_delay_us);
    return cnnrt_serve::serve(config);
  }
};

}  // namespace

Action add_serve_command(CLI::App& app) {
  auto cmd = std::make_shared<ServeCommand>();
  cnnrt_serve::ServeConfig& c = cmd->config;
  CLI::App* sub = app.add_subcommand(
      "serve", "Serve models over HTTP with the Open Inference Protocol (KServe v2), batching concurrent requests");
  sub->add_option("models", c.model_paths, "ONNX models")->required();
  sub->add_option("--name", c.names, "Name of each model in the URLs, in order (default: the file's stem)");
  sub->add_option("--host", c.host, "Address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)");
  sub->add_option("--port", c.port, "TCP port (default 8000; 0: any free port, printed)");
  sub->add_option("--gpus", c.gpus, "GPUs to spread instances over, e.g. 0,1 (one model copy per GPU)")
      ->delimiter(',');
  sub->add_option("--instances", c.instances, "Model instances per GPU, or on the CPU (default: 2 per GPU, 1 on the CPU)");
  sub->add_option("--max-batch", c.max_batch, "Most rows merged into one run (default 64; 1: no batching)");
  sub->add_option("--max-queue-delay-us", cmd->max_queue_delay_us,
                  "How long the oldest request waits for more to merge with, in microseconds (default 500)");
  sub->add_option("--max-queue", c.max_queue, "Requests waiting per model before new ones get 503 (default 1024)");
  sub->add_option("--max-body-bytes", c.max_body_bytes, "Largest request body accepted (default 64 MiB)");
  sub->add_option("--batch-sizes", c.batch_sizes,
                  "Batch sizes planned at start, a batch padded up to the next: auto (powers of two on the GPU, "
                  "exact on the CPU), exact, or a list such as 1,8,64");
  sub->add_option("--http-threads", c.http_threads,
                  "HTTP worker threads: connections served at once (default 256)");
  cmd->engine.add_to(*sub);
  return [cmd] { return cmd->run(); };
}

}  // namespace cnnrt_cli
