// cnnrt eval MODEL --images IDX --labels IDX: accuracy of a classifier on a labelled IDX data set
// (MNIST, Fashion-MNIST), with its confusion matrix and throughput.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>

#include "classify.hpp"
#include "common.hpp"
#include "idx.hpp"
#include "images.hpp"
#include "progress.hpp"

namespace cnnrt_cli {

namespace {

using cnnrt::Error;
using cnnrt::ErrorCode;

// The images of an IDX array: [N, H, W] (gray) or [N, C, H, W] with C 1 or 3; values are raw pixels.
struct IdxImages {
  int64_t count = 0;
  int channels = 1;
  int height = 0;
  int width = 0;

  static IdxImages of(const IdxArray& array, const std::string& path) {
    IdxImages s;
    const auto& d = array.dims;
    const bool ok = (d.size() == 3 || (d.size() == 4 && (d[1] == 1 || d[1] == 3)));
    if (!ok) {
      throw Error(ErrorCode::InvalidInput, fmt::format("{}: IDX dimensions {} are not images (N x H x W, or N x C x H "
                                                       "x W with C 1 or 3)",
                                                       path, fmt::join(d, "x")));
    }
    s.count = d[0];
    s.channels = d.size() == 4 ? static_cast<int>(d[1]) : 1;
    s.height = static_cast<int>(d[d.size() - 2]);
    s.width = static_cast<int>(d[d.size() - 1]);
    if (s.height < 1 || s.width < 1 || s.height > kMaxImageSide || s.width > kMaxImageSide) {
      throw Error(ErrorCode::InvalidInput, fmt::format("{}: images of {}x{} pixels", path, s.width, s.height));
    }
    return s;
  }

  // Image i, planar CHW in the file, as an interleaved Image.
  Image image(const IdxArray& array, int64_t i) const {
    Image image;
    image.width = width;
    image.height = height;
    image.channels = channels;
    const size_t plane = size_t(width) * height;
    image.pixels.resize(plane * channels);
    const float* src = array.values.data() + size_t(i) * plane * channels;
    for (int c = 0; c < channels; ++c) {
      for (size_t p = 0; p < plane; ++p) image.pixels[p * channels + c] = src[c * plane + p];
    }
    return image;
  }
};

struct EvalCommand {
  std::string model_path;
  std::string images_path;
  std::string labels_path;
  int64_t batch = 64;
  int64_t limit = 0;
  std::string json_path;
  std::string resize = "auto";
  NormalizationFlags norm_flags;
  EngineFlags engine;

  int run() const {
    if (batch < 1) throw Error(ErrorCode::Usage, "--batch must be at least 1");
    if (limit < 0) throw Error(ErrorCode::Usage, "--limit must not be negative");
    const ResizeFilter filter = parse_resize_filter(resize);
    JsonSink json_out(json_path);
    const cnnrt::Model model = cnnrt::Model::load(model_path, engine.options());
    const ImageModelInput input = image_model_input(model);
    const Normalization norm = resolve_normalization(model.metadata(), norm_flags, input.channels);
    const std::vector<std::string> class_names = model_labels(model.metadata(), "");

    const IdxArray images = read_idx(images_path);
    const IdxArray truth = read_idx(labels_path);
    const IdxImages shape = IdxImages::of(images, images_path);
    if (truth.dims.size() != 1) {
      throw Error(ErrorCode::InvalidInput, fmt::format("{}: IDX dimensions {} are not a list of labels (rank 1)",
                                                       labels_path, fmt::join(truth.dims, "x")));
    }
    if (truth.dims[0] != shape.count) {
      throw Error(ErrorCode::InvalidInput, fmt::format("{} holds {} images but {} holds {} labels", images_path,
                                                       shape.count, labels_path, truth.dims[0]));
    }
    const int64_t count = limit > 0 ? std::min(limit, shape.count) : shape.count;
    if (count == 0) throw Error(ErrorCode::InvalidInput, images_path + ": no images");

    const int64_t batch_size = input.batch > 0 ? input.batch : batch;
    cnnrt::Context context(model);
    std::unique_ptr<ConfusionMatrix> confusion;
    ProgressBar progress("eval", count);
    const auto start = std::chrono::steady_clock::now();
    for (int64_t first = 0; first < count; first += batch_size) {
      const int64_t n = std::min(batch_size, count - first);
      std::vector<Image> fitted;
      for (int64_t i = first; i < first + n; ++i) fitted.push_back(fit_to_model(shape.image(images, i), input, filter));
      std::vector<const Image*> pointers;
      for (const Image& image : fitted) pointers.push_back(&image);
      const std::vector<cnnrt::Tensor> outputs = context.run({make_batch(pointers, norm, batch_size)});
      const size_t classes = outputs[0].data.size() / static_cast<size_t>(batch_size);
      if (!confusion) {
        confusion = std::make_unique<ConfusionMatrix>(static_cast<int64_t>(classes));
        if (!class_names.empty() && class_names.size() != classes) {
          std::fprintf(stderr, "warning: the model's labels name %zu classes, its output has %zu\n",
                       class_names.size(), classes);
        }
      }
      for (int64_t i = 0; i < n; ++i) {
        const float label = truth.values[size_t(first + i)];
        if (!(label >= 0) || label != std::floor(label) || label >= static_cast<float>(classes)) {
          throw Error(ErrorCode::InvalidInput, fmt::format("{}: label {} of image {} is not a class of a model with {} "
                                                           "outputs (0 to {})",
                                                           labels_path, label, first + i, classes, classes - 1));
        }
        confusion->add(static_cast<int64_t>(label), argmax(outputs[0].data.data() + size_t(i) * classes, classes));
      }
      progress.update(first + n);
    }
    progress.finish();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double rate = seconds > 0 ? double(count) / seconds : 0.0;
    const double accuracy = 100.0 * double(confusion->correct()) / double(count);

    if (json_out) {
      nlohmann::ordered_json matrix = nlohmann::ordered_json::array();
      for (int64_t t = 0; t < confusion->classes; ++t) {
        nlohmann::ordered_json row = nlohmann::ordered_json::array();
        for (int64_t p = 0; p < confusion->classes; ++p) row.push_back(confusion->at(t, p));
        matrix.push_back(row);
      }
      nlohmann::ordered_json labels = nlohmann::ordered_json::array();
      for (int64_t c = 0; c < confusion->classes; ++c) labels.push_back(label_of(class_names, c));
      const nlohmann::ordered_json report = {{"model", model_path},     {"images", images_path},
                                     {"labels", labels_path},   {"device", cnnrt::to_string(model.device())},
                                     {"count", count},          {"correct", confusion->correct()},
                                     {"accuracy", accuracy / 100.0}, {"classes", labels},
                                     {"confusion", matrix},     {"seconds", seconds},
                                     {"images_per_second", rate}, {"batch", batch_size}};
      json_out.write(report.dump());
    }
    fmt::print("model: {} ({} backend)\n", model_path, cnnrt::to_string(model.device()));
    fmt::print("data: {} ({} images {}x{}{}), labels {}\n", images_path, count, shape.width, shape.height,
               shape.channels == 3 ? " RGB" : "", labels_path);
    fmt::print("accuracy: {:.2f}% ({}/{})\n", accuracy, confusion->correct(), count);
    fmt::print("{}", confusion->format(class_names));
    fmt::print("{} images in {:.3f} s: {:.1f} images/s (batches of {})\n", count, seconds, rate, batch_size);
    json_out.close();
    return 0;
  }
};

}  // namespace

Action add_eval_command(CLI::App& app) {
  auto cmd = std::make_shared<EvalCommand>();
  CLI::App* sub = app.add_subcommand("eval", "Accuracy of a classifier on labelled IDX images (MNIST format)");
  sub->add_option("model", cmd->model_path, "ONNX classifier taking N x C x H x W images")->required();
  sub->add_option("--images", cmd->images_path, "IDX images, N x H x W (gzipped or not)")->required();
  sub->add_option("--labels", cmd->labels_path, "IDX labels, N class indices (gzipped or not)")->required();
  sub->add_option("--batch", cmd->batch, "Images per run (default 64; a model with a fixed batch uses its own)");
  sub->add_option("--limit", cmd->limit, "Evaluate only the first N images (default: all)");
  add_json_option(*sub, cmd->json_path, "the report (accuracy, confusion matrix, throughput)");
  add_resize_option(*sub, cmd->resize);
  cmd->norm_flags.add_to(*sub);
  cmd->engine.add_to(*sub);
  return [cmd] { return cmd->run(); };
}

}  // namespace cnnrt_cli
