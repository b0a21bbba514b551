// cnnrt infer MODEL IMAGE_OR_DIR...: classify images (top-k labels) or, for image-to-image models, write
// the output maps as PNG. Results go to stdout (text or one JSON record per image), errors and the timing
// summary to stderr. A bad image is reported on one line and skipped; the exit status then says so.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>

#include "classify.hpp"
#include "common.hpp"
#include "images.hpp"
#include "progress.hpp"

namespace cnnrt_cli {

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::ordered_json;  // keys in the order written: "file" first

enum class Task { Auto, Classification, ImageToImage };

Task task_from_metadata(const std::map<std::string, std::string>& metadata) {
  const auto it = metadata.find("task");
  if (it == metadata.end() || it->second.empty()) return Task::Auto;
  if (it->second == "classification") return Task::Classification;
  if (it->second == "image-to-image") return Task::ImageToImage;
  throw cnnrt::Error(cnnrt::ErrorCode::Unsupported, fmt::format("the model's task '{}' is not supported "
                                                                "(classification or image-to-image)",
                                                                it->second));
}

// An output of shape [N, C, H, W] with H, W > 1 is a stack of image maps.
bool is_image_output(const std::vector<int64_t>& shape) {
  return shape.size() == 4 && shape[2] > 1 && shape[3] > 1;
}

std::string file_safe(const std::string& name) {
  std::string s = name;
  for (char& ch : s) {
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '.') ch = '_';
  }
  return s.empty() ? "output" : s;
}

// One image on its way through: read and fitted, or failed with a message.
struct Entry {
  std::string path;
  Clock::time_point start;
  std::optional<Image> image;
  std::string error;
  cnnrt::ErrorCode error_code = cnnrt::ErrorCode::InvalidInput;
};

struct InferCommand {
  std::string model_path;
  std::vector<std::string> inputs;
  int64_t top_count = 5;
  std::string labels_file;
  int64_t batch = 16;
  bool json_output = false;
  std::string save_outputs;
  std::string resize = "auto";
  NormalizationFlags norm_flags;
  ShapeFlags shapes;
  EngineFlags engine;

  // Set up by run().
  std::unique_ptr<cnnrt::Model> model;
  std::unique_ptr<cnnrt::Context> context;
  ImageModelInput input;
  Normalization norm;
  std::vector<std::string> labels;
  Task task = Task::Auto;
  ResizeFilter filter = ResizeFilter::Auto;
  int64_t batch_size = 1;
  std::map<std::string, int> saved_names;
  bool warned_label_count = false;

  // Totals for the summary and the exit status.
  int64_t succeeded = 0;
  int64_t failed = 0;
  std::optional<cnnrt::ErrorCode> first_error;
  double latency_sum_s = 0;
  int64_t batches = 0;

  int run() {
    if (batch < 1) throw cnnrt::Error(cnnrt::ErrorCode::Usage, "--batch must be at least 1");
    if (top_count < 1) throw cnnrt::Error(cnnrt::ErrorCode::Usage, "--top-k must be at least 1");
    filter = parse_resize_filter(resize);
    model = std::make_unique<cnnrt::Model>(cnnrt::Model::load(model_path, engine.options()));
    input = image_model_input(*model);
    if (shapes.given()) apply_shape(shapes.resolve(*model).at(0));
    norm = resolve_normalization(model->metadata(), norm_flags, input.channels);
    labels = model_labels(model->metadata(), labels_file);
    task = task_from_metadata(model->metadata());
    // A model with a fixed batch size gets exactly that many images per run (padded with zeros).
    batch_size = input.batch > 0 ? input.batch : batch;
    const std::vector<std::string> files = expand_image_arguments(inputs);
    if (!save_outputs.empty()) std::filesystem::create_directories(save_outputs);
    context = std::make_unique<cnnrt::Context>(*model);

    ProgressBar progress("infer", static_cast<int64_t>(files.size()));
    const Clock::time_point start = Clock::now();
    std::vector<Entry> pending;
    int64_t done = 0;
    auto flush = [&] {
      progress.finish();
      done += static_cast<int64_t>(pending.size());
      run_batch(pending);
      pending.clear();
      progress.update(done);
    };
    for (const std::string& path : files) {
      Entry entry = read_entry(path);
      // Images of a model with symbolic H, W keep their size, and one batch holds one size.
      if (entry.image && !pending_fits(pending, *entry.image)) flush();
      pending.push_back(std::move(entry));
      if (static_cast<int64_t>(pending.size()) >= batch_size) flush();
    }
    if (!pending.empty()) flush();
    progress.finish();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    print_summary(seconds, static_cast<int64_t>(files.size()));
    return first_error ? cnnrt::exit_code(*first_error) : 0;
  }

  // --shape N x C x H x W: images resized to H x W, N of them a run (the engine checks it against the model).
  void apply_shape(const cnnrt::Shape& shape) {
    if (shape.size() != 4 || shape[1] != input.channels) {
      throw cnnrt::Error(cnnrt::ErrorCode::InvalidInput,
                         fmt::format("--shape {} for input '{}': infer takes N x {} x H x W", shape_text(shape),
                                     input.name, input.channels));
    }
    if (shape[2] > kMaxImageSide || shape[3] > kMaxImageSide) {
      throw cnnrt::Error(cnnrt::ErrorCode::Unsupported, fmt::format("--shape {}: images are at most {}x{}",
                                                                    shape_text(shape), kMaxImageSide, kMaxImageSide));
    }
    model->output_shapes({shape});  // rank, fixed dims and sizes >= 1, named, before any image is read
    input.batch = shape[0];
    input.height = shape[2];
    input.width = shape[3];
  }

  Entry read_entry(const std::string& path) const {
    Entry entry;
    entry.path = path;
    entry.start = Clock::now();
    try {
      entry.image = fit_to_model(read_image(path, input.channels), input, filter);
    } catch (const cnnrt::Error& e) {
      entry.error = e.what();
      entry.error_code = e.code();
    }
    return entry;
  }

  // Whether `image` may join the pending batch (same size as the images already in it).
  static bool pending_fits(const std::vector<Entry>& pending, const Image& image) {
    for (const Entry& e : pending) {
      if (e.image) return e.image->width == image.width && e.image->height == image.height;
    }
    return true;
  }

  void fail(const Entry& entry, const std::string& message, cnnrt::ErrorCode code) {
    ++failed;
    if (!first_error) first_error = code;
    std::fprintf(stderr, "error: %s\n", message.c_str());
    if (json_output) {
      fmt::print("{}\n", json{{"file", entry.path}, {"error", message}, {"code", cnnrt::to_string(code)}}.dump());
    }
  }

  void run_batch(const std::vector<Entry>& entries) {
    std::vector<const Image*> images;
    for (const Entry& e : entries) {
      if (e.image) images.push_back(&*e.image);
    }
    std::vector<cnnrt::Tensor> outputs;
    std::string batch_error;
    cnnrt::ErrorCode batch_code = cnnrt::ErrorCode::InvalidInput;
    if (!images.empty()) {
      try {
        outputs = context->run({make_batch(images, norm, batch_size)});
        ++batches;
      } catch (const cnnrt::Error& e) {
        // The model refuses this input (e.g. an image too small for its windows): report it per image and go
        // on. Device and internal errors end the run.
        if (e.code() != cnnrt::ErrorCode::InvalidInput && e.code() != cnnrt::ErrorCode::Unsupported &&
            e.code() != cnnrt::ErrorCode::LimitExceeded) {
          throw;
        }
        batch_error = e.what();
        batch_code = e.code();
      }
    }
    const Clock::time_point end = Clock::now();
    int64_t row = 0;
    for (const Entry& e : entries) {
      if (!e.image) {
        fail(e, e.error, e.error_code);
        continue;
      }
      if (!batch_error.empty()) {
        fail(e, fmt::format("{}: {}x{} image: {}", e.path, e.image->width, e.image->height, batch_error), batch_code);
        continue;
      }
      try {
        report(e, outputs, row);
      } catch (const cnnrt::Error& err) {
        if (err.code() != cnnrt::ErrorCode::Io) throw;
        fail(e, err.what(), err.code());
        ++row;
        continue;
      }
      ++row;
      ++succeeded;
      latency_sum_s += std::chrono::duration<double>(end - e.start).count();
    }
  }

  void report(const Entry& entry, const std::vector<cnnrt::Tensor>& outputs, int64_t row) {
    const bool maps = task == Task::ImageToImage || (task == Task::Auto && is_image_output(outputs[0].shape));
    if (maps) report_maps(entry, outputs, row);
    else report_classes(entry, outputs[0], row);
  }

  void report_classes(const Entry& entry, const cnnrt::Tensor& output, int64_t row) {
    const size_t per_row = output.data.size() / static_cast<size_t>(batch_size);
    if (!labels.empty() && labels.size() != per_row && !warned_label_count) {
      warned_label_count = true;
      std::fprintf(stderr, "warning: %zu labels for a model with %zu classes\n", labels.size(), per_row);
    }
    const std::vector<float> probabilities = to_probabilities(output.data.data() + size_t(row) * per_row, per_row);
    const std::vector<Prediction> best = top_k(probabilities, top_count);
    if (json_output) {
      json top = json::array();
      for (const Prediction& p : best) {
        top.push_back({{"index", p.index}, {"label", label_of(labels, p.index)}, {"probability", p.probability}});
      }
      fmt::print("{}\n", json{{"file", entry.path}, {"top", top}}.dump());
      return;
    }
    std::vector<std::string> parts;
    for (const Prediction& p : best) {
      parts.push_back(fmt::format("{} {:.1f}%", label_of(labels, p.index), 100.0 * p.probability));
    }
    fmt::print("{}: {}\n", entry.path, fmt::join(parts, ", "));
  }

  void report_maps(const Entry& entry, const std::vector<cnnrt::Tensor>& outputs, int64_t row) {
    json records = json::array();
    std::vector<std::string> lines;
    const std::string stem = std::filesystem::path(entry.path).stem().string();
    for (size_t o = 0; o < outputs.size(); ++o) {
      const cnnrt::Tensor& out = outputs[o];
      const std::string& name = model->outputs()[o].name;
      // [N, C, H, W], or [N, H, W] as one channel.
      if (out.shape.size() != 4 && out.shape.size() != 3) continue;
      const int64_t channels = out.shape.size() == 4 ? out.shape[1] : 1;
      const int64_t height = out.shape[out.shape.size() - 2];
      const int64_t width = out.shape[out.shape.size() - 1];
      const size_t plane = size_t(height * width);
      for (int64_t c = 0; c < channels; ++c) {
        const float* values = out.data.data() + (size_t(row * channels + c)) * plane;
        const auto [lo, hi] = std::minmax_element(values, values + plane);
        json record = {{"output", name}, {"channel", c}, {"height", height}, {"width", width},
                       {"min", *lo}, {"max", *hi}};
        std::string where;
        if (!save_outputs.empty()) {
          std::string file = fmt::format("{}_{}_{}", stem, file_safe(name), c);
          const int seen = saved_names[file]++;
          if (seen > 0) file += fmt::format("-{}", seen + 1);
          const std::string png = (std::filesystem::path(save_outputs) / (file + ".png")).string();
          write_png(png, static_cast<int>(width), static_cast<int>(height), 1, map_to_gray8(values, plane).data());
          record["png"] = png;
          where = " -> " + png;
        }
        records.push_back(record);
        lines.push_back(fmt::format("{}: output '{}' map {} ({}x{}, min {:.4g}, max {:.4g}){}", entry.path, name, c,
                                    width, height, *lo, *hi, where));
      }
    }
    if (json_output) {
      fmt::print("{}\n", json{{"file", entry.path}, {"outputs", records}}.dump());
    } else {
      for (const std::string& line : lines) fmt::print("{}\n", line);
      if (save_outputs.empty() && !lines.empty()) {
        fmt::print("{}: (use --save-outputs DIR to write the maps as PNG)\n", entry.path);
      }
    }
  }

  void print_summary(double seconds, int64_t total) const {
    const double rate = seconds > 0 ? double(succeeded) / seconds : 0.0;
    const double latency_ms = succeeded > 0 ? 1e3 * latency_sum_s / double(succeeded) : 0.0;
    std::fprintf(stderr, "%s\n",
                 fmt::format("{} image{} in {:.3f} s: {:.1f} images/s, mean latency {:.2f} ms ({} batch{} of up to "
                             "{}, {} backend)",
                             succeeded, succeeded == 1 ? "" : "s", seconds, rate, latency_ms, batches,
                             batches == 1 ? "" : "es", batch_size, cnnrt::to_string(model->device()))
                     .c_str());
    if (failed > 0) std::fprintf(stderr, "%s\n", fmt::format("{} of {} images failed", failed, total).c_str());
  }
};

}  // namespace

Action add_infer_command(CLI::App& app) {
  auto cmd = std::make_shared<InferCommand>();
  CLI::App* sub = app.add_subcommand("infer", "Classify images, or run an image-to-image model and save its maps");
  sub->add_option("model", cmd->model_path, "ONNX model taking N x C x H x W images (C 1 or 3)")->required();
  sub->add_option("images", cmd->inputs, "Image files, directories (their images) or glob patterns")
      ->required()
      ->expected(1, -1);
  sub->add_option("--top-k,-k", cmd->top_count, "How many classes to show per image (default 5)");
  sub->add_option("--labels", cmd->labels_file, "Class names, one per line (default: the model's `labels`)");
  CLI::Option* batch = sub->add_option("--batch", cmd->batch,
                                       "Images per run (default 16; a model with a fixed batch uses its own)");
  cmd->shapes.add_to(*sub)->excludes(batch);
  sub->add_flag("--json", cmd->json_output, "One JSON record per image on stdout");
  sub->add_option("--save-outputs", cmd->save_outputs, "Image-to-image models: write each output map as a PNG here");
  add_resize_option(*sub, cmd->resize);
  cmd->norm_flags.add_to(*sub);
  cmd->engine.add_to(*sub);
  return [cmd] { return cmd->run(); };
}

}  // namespace cnnrt_cli
