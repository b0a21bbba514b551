// The HTTP side of `cnnrt serve` (cpp-httplib): routes of the v2 protocol, limits, metrics, signals.
//
// Threads: httplib accepts on the thread that calls listen and hands each connection to a pool of
// `http_threads` workers; a worker parses a request, queues it with the model's DynamicBatcher and waits for
// its result. Each model instance is a thread of its own (batcher.cpp). A signal thread waits for SIGTERM and
// SIGINT, which every other thread blocks.
#include "serve/server.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <httplib.h>
#include <pthread.h>
#include <sys/socket.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <thread>

#include "serve/batcher.hpp"
#include "serve/metrics.hpp"
#include "serve/protocol.hpp"

namespace cnnrt_serve {

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

[[noreturn]] void usage(const std::string& message) { throw cnnrt::Error(cnnrt::ErrorCode::Usage, message); }

// httplib's server with the accept backlog raised: the library listens with a backlog of 5, and Linux drops
// the connections beyond it when many clients connect at once (each retries after a second).
class HttpServer : public httplib::Server {
 public:
  void raise_backlog(int backlog) { ::listen(svr_sock_, backlog); }
};

struct ServedModel {
  std::string name;
  std::string path;
  std::unique_ptr<ModelMetrics> metrics;
  std::unique_ptr<DynamicBatcher> batcher;
};

std::string model_name(const ServeConfig& config, size_t index) {
  const std::string name = index < config.names.size()
                               ? config.names[index]
                               : std::filesystem::path(config.model_paths[index]).stem().string();
  const bool ok = !name.empty() && name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                          "0123456789_.-") == std::string::npos;
  if (!ok) {
    usage(fmt::format("model name '{}' (of {}) must be letters, digits, '_', '.' and '-' only, as it is part of the "
                      "URL; give another with --name", name, config.model_paths[index]));
  }
  return name;
}

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(json_text(body), "application/json");
}

void send_error(httplib::Response& res, int status, const std::string& message) {
  res.status = status;
  res.set_content(error_body(message), "application/json");
}

std::string served_names(const std::vector<std::unique_ptr<ServedModel>>& models) {
  std::vector<std::string> names;
  for (const auto& m : models) names.push_back("'" + m->name + "'");
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

std::vector<int64_t> resolve_batch_sizes(const std::string& spec, int64_t max_batch, cnnrt::Device device) {
  std::vector<int64_t> sizes;
  if (spec == "exact") return sizes;
  if (spec == "auto") {
    if (device != cnnrt::Device::Gpu) return sizes;
    for (int64_t b = 1; b < max_batch; b *= 2) sizes.push_back(b);
    sizes.push_back(max_batch);
    return sizes;
  }
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t comma = std::min(spec.find(',', start), spec.size());
    const std::string item = spec.substr(start, comma - start);
    if (item.empty() || item.size() > 9 || item.find_first_not_of("0123456789") != std::string::npos ||
        std::stoll(item) < 1) {
      usage(fmt::format("--batch-sizes '{}': '{}' is not a batch size (give auto, exact, or sizes such as 1,8,64)",
                        spec, item));
    }
    sizes.push_back(std::stoll(item));
    start = comma + 1;
  }
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  if (sizes.back() < max_batch) {
    usage(fmt::format("--batch-sizes '{}': the largest, {}, is below --max-batch {}; a full batch would have no "
                      "planned size to run at", spec, sizes.back(), max_batch));
  }
  return sizes;
}

int serve(const ServeConfig& config) {
  if (config.model_paths.empty()) usage("cnnrt serve needs at least one model");
  if (config.names.size() > config.model_paths.size()) {
    usage(fmt::format("{} --name for {} model{}", config.names.size(), config.model_paths.size(),
                      config.model_paths.size() == 1 ? "" : "s"));
  }
  if (config.max_batch < 1) usage("--max-batch must be at least 1");
  if (config.instances < 0) usage("--instances must be at least 1 (or 0: 2 per GPU, 1 on the CPU)");
  if (config.http_threads < 1) usage("--http-threads must be at least 1");
  if (config.max_queue < 1) usage("--max-queue must be at least 1");
  if (config.max_queue_delay.count() < 0) usage("--max-queue-delay-us must not be negative");
  if (config.port < 0 || config.port > 65535) usage(fmt::format("--port {} is not a TCP port", config.port));
  cnnrt::Options engine = config.engine;
  if (!config.gpus.empty()) {
    if (engine.device == cnnrt::Device::Cpu) usage("--gpus names GPUs, but --device is cpu");
    engine.device = cnnrt::Device::Gpu;  // GPUs named: a GPU is required, never the CPU fallback
    if (std::set<int>(config.gpus.begin(), config.gpus.end()).size() != config.gpus.size()) {
      usage(fmt::format("--gpus {} names a GPU twice (use --instances for more instances per GPU)",
                        fmt::join(config.gpus, ",")));
    }
  }
  std::set<std::string> taken;
  for (size_t i = 0; i < config.model_paths.size(); ++i) {
    if (!taken.insert(model_name(config, i)).second) {
      usage(fmt::format("two models are called '{}'; give one another name with --name", model_name(config, i)));
    }
  }

  // SIGTERM and SIGINT go to the signal thread only: blocked here, before any thread (CUDA's included) starts,
  // so that every thread inherits the mask. A client that hangs up must not kill the server with SIGPIPE.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  struct BlockedSignals {
    sigset_t previous;
    explicit BlockedSignals(const sigset_t& set) { pthread_sigmask(SIG_BLOCK, &set, &previous); }
    ~BlockedSignals() { pthread_sigmask(SIG_SETMASK, &previous, nullptr); }
  } blocked(stop_signals);
  std::signal(SIGPIPE, SIG_IGN);

  std::vector<std::unique_ptr<ServedModel>> models;
  for (size_t i = 0; i < config.model_paths.size(); ++i) {
    auto served = std::make_unique<ServedModel>();
    served->name = model_name(config, i);
    served->path = config.model_paths[i];
    // One copy of the model per GPU (its weights live there), each with `instances` contexts and threads.
    const std::vector<int> gpus = config.gpus.empty() ? std::vector<int>{-1} : config.gpus;
    std::vector<InstanceSpec> instances;
    for (int gpu : gpus) {
      cnnrt::Options options = engine;
      options.gpu_index = gpu;
      const cnnrt::Model model = cnnrt::Model::load(served->path, options);
      const int count = config.instances > 0 ? config.instances : model.device() == cnnrt::Device::Gpu ? 2 : 1;
      for (int k = 0; k < count; ++k) {
        const std::string device = model.device() == cnnrt::Device::Gpu
                                       ? (gpu >= 0 ? fmt::format("gpu{}", gpu) : std::string("gpu"))
                                       : std::string("cpu");
        instances.push_back({model, fmt::format("{}/{}", device, k)});
      }
    }
    const cnnrt::Model first = instances.front().model;  // (a handle: the instances move into the batcher)
    ModelSpec spec = describe_model(served->name, first, config.max_batch);
    BatchingOptions batching;
    batching.max_batch = spec.max_batch;
    batching.max_queue_delay = config.max_queue_delay;
    batching.max_queue = config.max_queue;
    batching.batch_sizes = resolve_batch_sizes(config.batch_sizes, spec.max_batch, first.device());
    const std::string sizes_text = batching.batch_sizes.empty()
                                       ? std::string("each batch at its own size")
                                       : fmt::format("batches padded to {}", fmt::join(batching.batch_sizes, ","));
    served->metrics = std::make_unique<ModelMetrics>(spec.max_batch);
    const size_t instance_count = instances.size();
    served->batcher = std::make_unique<DynamicBatcher>(spec, std::move(instances), batching, *served->metrics);
    const std::string where =
        first.device() != cnnrt::Device::Gpu ? std::string("the CPU")
        : config.gpus.empty()                ? std::string("the GPU")
                                             : fmt::format("GPU {}", fmt::join(config.gpus, ","));
    say(stdout, fmt::format("cnnrt serve: model '{}' ({}): {} instance{} on {}, max batch {}{}, {}, queue delay {} "
                            "us\n", served->name, served->path, instance_count, instance_count == 1 ? "" : "s", where,
                            spec.max_batch, spec.batchable ? "" : " (fixed shapes: requests run one at a time)",
                            sizes_text, config.max_queue_delay.count()));
    models.push_back(std::move(served));
  }
  std::map<std::string, ServedModel*> by_name;
  for (const auto& m : models) by_name[m->name] = m.get();

  HttpServer http;
  HttpCounters http_counters;
  std::atomic<bool> draining{false};
  const size_t pool_threads = static_cast<size_t>(config.http_threads);
  http.new_task_queue = [pool_threads] { return new httplib::ThreadPool(pool_threads); };
  http.set_tcp_nodelay(true);
  // SO_REUSEADDR only: httplib's default also sets SO_REUSEPORT, which would let a second server bind the same
  // port and silently take half of the connections.
  http.set_socket_options([](socket_t sock) {  // (httplib declares socket_t globally)
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  http.set_keep_alive_max_count(1000);
  http.set_payload_max_length(config.max_body_bytes);
  http.set_logger([&](const httplib::Request&, const httplib::Response& res) { http_counters.count(res.status); });

  const auto find_model = [&](const httplib::Request& req, httplib::Response& res) -> ServedModel* {
    const std::string name = req.matches[1];
    const auto it = by_name.find(name);
    if (it == by_name.end()) {
      send_error(res, 404, fmt::format("unknown model '{}' (this server serves {})", name, served_names(models)));
      return nullptr;
    }
    if (req.matches.size() > 2 && req.matches[2].matched && req.matches[2] != "1") {
      send_error(res, 404, fmt::format("model '{}' has no version '{}' (it has version 1)", name,
                                       req.matches[2].str()));
      return nullptr;
    }
    return it->second;
  };
  const std::string model_path = R"(/v2/models/([^/]+)(?:/versions/([^/]+))?)";

  http.Get("/v2/health/live", [](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, {{"live", true}});
  });
  http.Get("/v2/health/ready", [&](const httplib::Request&, httplib::Response& res) {
    const bool ready = !draining;
    send_json(res, ready ? 200 : 503, {{"ready", ready}});
  });
  http.Get("/v2", [](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, {{"name", "cnnrt"}, {"version", cnnrt::version()}, {"extensions", {"binary_tensor_data"}}});
  });
  http.Get(model_path, [&](const httplib::Request& req, httplib::Response& res) {
    if (ServedModel* m = find_model(req, res)) send_json(res, 200, model_metadata(m->batcher->spec()));
  });
  http.Get(model_path + "/ready", [&](const httplib::Request& req, httplib::Response& res) {
    if (ServedModel* m = find_model(req, res)) {
      const bool ready = !draining;
      send_json(res, ready ? 200 : 503, {{"name", m->name}, {"ready", ready}});
    }
  });
  // The body is read here rather than by httplib, which would refuse a form-encoded body (curl -d's default
  // Content-Type) over 8 KiB and take a chunked body without a limit.
  const size_t max_body = config.max_body_bytes;
  http.Post(model_path + "/infer", [&, max_body](const httplib::Request& req, httplib::Response& res,
                                                 const httplib::ContentReader& read_body) {
    const Clock::time_point start = Clock::now();
    std::string body;
    bool over_limit = false;
    bool read;
    if (req.is_multipart_form_data()) {
      read = read_body([](const httplib::MultipartFormData&) { return true; }, [](const char*, size_t) { return true; });
      if (read) {
        send_error(res, 415, "a multipart/form-data body is not an inference request: send the request's JSON, "
                             "followed by binary tensor data if any (Inference-Header-Content-Length)");
        return;
      }
    } else {
      if (req.has_header("Content-Length")) {
        body.reserve(std::min<size_t>(max_body, req.get_header_value<uint64_t>("Content-Length")));
      }
      read = read_body([&](const char* data, size_t size) {
        if (body.size() + size > max_body) {
          over_limit = true;
          return false;
        }
        body.append(data, size);
        return true;
      });
    }
    if (!read) {
      if (over_limit || res.status == 413) {
        send_error(res, 413, fmt::format("the request body is over this server's limit of {} bytes "
                                         "(--max-body-bytes)", max_body));
      } else {
        send_error(res, 400, "the request body could not be read (cut off, or a malformed chunked encoding)");
      }
      return;
    }
    ServedModel* m = find_model(req, res);
    if (!m) return;
    try {
      std::optional<size_t> json_length;
      if (req.has_header("Inference-Header-Content-Length")) {
        json_length = parse_header_length(req.get_header_value("Inference-Header-Content-Length"));
      }
      InferRequest request = parse_infer_request(m->batcher->spec(), body, json_length);
      InferRequest answer_as;  // what the response needs once the batcher has the request
      answer_as.id = request.id;
      answer_as.outputs = request.outputs;
      InferResult result = m->batcher->submit(std::move(request)).get();
      if (result.status != 200) {
        send_error(res, result.status, result.error);
        m->metrics->failure.add();
      } else {
        EncodedResponse encoded = encode_infer_response(m->batcher->spec(), answer_as, result.outputs);
        if (encoded.json_length) res.set_header("Inference-Header-Content-Length", std::to_string(*encoded.json_length));
        res.status = 200;
        res.set_content(std::move(encoded.body), encoded.content_type.c_str());
        m->metrics->success.add();
      }
    } catch (const ProtocolError& e) {
      if (e.status() == 503) res.set_header("Retry-After", "1");
      send_error(res, e.status(), e.what());
      m->metrics->failure.add();
    }
    m->metrics->request_seconds.observe(std::chrono::duration<double>(Clock::now() - start).count());
  });
  http.Get("/metrics", [&](const httplib::Request&, httplib::Response& res) {
    std::vector<std::pair<std::string, const ModelMetrics*>> list;
    for (const auto& m : models) list.emplace_back(m->name, m->metrics.get());
    res.set_content(render_metrics(list, http_counters), "text/plain; version=0.0.4");
  });

  // httplib would read a chunked body to any other path without a limit: refuse it before reading.
  http.set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
    const bool infer = req.path.size() >= 6 && req.path.compare(req.path.size() - 6, 6, "/infer") == 0;
    if (!infer && req.get_header_value("Transfer-Encoding").find("chunked") != std::string::npos) {
      send_error(res, 411, fmt::format("no chunked request body for {} {}: send Content-Length", req.method,
                                       req.path));
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  http.set_error_handler([max_body](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404) {
      send_error(res, 404, fmt::format("no endpoint {} {} (GET /v2, /v2/health/live, /v2/health/ready, /metrics, "
                                       "/v2/models/NAME, /v2/models/NAME/ready; POST /v2/models/NAME/infer)",
                                       req.method, req.path));
    } else if (res.status == 413) {
      send_error(res, 413, fmt::format("the request body ({} bytes) is over this server's limit of {} bytes "
                                       "(--max-body-bytes)", req.get_header_value("Content-Length"), max_body));
    } else {
      send_error(res, res.status, fmt::format("HTTP {}: the request could not be read", res.status));
    }
  });
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    say(stderr, fmt::format("cnnrt serve: internal error: {}\n", what));
    send_error(res, 500, fmt::format("internal error: {}", what));
  });

  int port = config.port;
  if (port == 0) {
    port = http.bind_to_any_port(config.host);
    if (port < 0) throw cnnrt::Error(cnnrt::ErrorCode::Io, fmt::format("cannot listen on {} (any port)", config.host));
  } else if (!http.bind_to_port(config.host, port)) {
    throw cnnrt::Error(cnnrt::ErrorCode::Io, fmt::format("cannot listen on {}:{}: {}", config.host, port,
                                                         std::strerror(errno)));
  }
  http.raise_backlog(SOMAXCONN);
  say(stdout, fmt::format("cnnrt serve: listening on http://{}:{}\n", config.host, port));

  std::atomic<bool> finished{false};
  std::thread signal_thread([&] {
    int received = 0;
    while (!finished) {
      timespec timeout{0, 200 * 1000 * 1000};
      const int sig = sigtimedwait(&stop_signals, nullptr, &timeout);
      if (sig < 0) continue;  // the timeout, or EINTR
      if (++received > 1) {
        say(stderr, fmt::format("cnnrt serve: {} again: exiting without finishing the requests in flight\n",
                                strsignal(sig)));
        std::_Exit(1);
      }
      say(stdout, fmt::format("cnnrt serve: {}: no new connections; finishing the requests in flight\n",
                              strsignal(sig)));
      draining = true;
      for (const auto& m : models) m->batcher->drain();
      // stop() does nothing before the accept loop runs: wait for it (or for the end, had listening failed).
      while (!http.is_running() && !finished) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      http.stop();
    }
  });
  const bool listened = http.listen_after_bind();  // returns once stopped and every connection is done
  for (const auto& m : models) m->batcher->stop();
  finished = true;
  signal_thread.join();

  uint64_t served = 0, failed = 0;
  for (const auto& m : models) {
    served += m->metrics->success.value();
    failed += m->metrics->failure.value();
  }
  say(stdout, fmt::format("cnnrt serve: stopped: {} inference request{} answered, {} refused or failed\n", served,
                          served == 1 ? "" : "s", failed));
  if (!listened && !draining) {
    throw cnnrt::Error(cnnrt::ErrorCode::Io, fmt::format("listening on {}:{} failed", config.host, port));
  }
  return 0;
}

}  // namespace cnnrt_serve
