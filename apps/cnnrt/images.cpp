#include "images.hpp"

#include <fmt/format.h>
#include <glob.h>

// Debian's libstb ships the implementations; these are declarations only.
#include <stb_image.h>
#include <stb_image_resize.h>
#include <stb_image_write.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>

namespace cnnrt_cli {

namespace fs = std::filesystem;
using cnnrt::Error;
using cnnrt::ErrorCode;

namespace {

constexpr int64_t kMaxImageFileBytes = int64_t(1) << 30;

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

bool is_jpeg(const uint8_t* bytes, size_t size) { return size >= 2 && bytes[0] == 0xFF && bytes[1] == 0xD8; }

// stb_image decodes a JPEG cut short without complaint (the missing rows come out grey), so look for the
// end-of-image marker ourselves. Trailing data after the marker is allowed.
bool jpeg_has_end_marker(const uint8_t* bytes, size_t size) {
  for (size_t i = size; i >= 2; --i) {
    if (bytes[i - 2] == 0xFF && bytes[i - 1] == 0xD9) return true;
  }
  return false;
}

// A header stb_image refuses: name the common cases in words.
std::string header_problem(const char* reason) {
  const std::string r = reason ? reason : "unknown";
  if (r == "0-pixel image") return "zero-size image (the header declares 0 pixels)";
  if (r == "too large" || r == "Image too large to decode") {
    return fmt::format("the header declares an image beyond {}x{} pixels", kMaxImageSide, kMaxImageSide);
  }
  if (r == "unknown image type") return "not a supported image (PNG, JPEG, BMP, PGM/PPM, GIF, TGA, PSD, HDR)";
  return "unreadable image header (" + r + "): truncated or corrupt";
}

float parse_float(const std::string& text, const std::string& what, ErrorCode code) {
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  const float value = std::strtof(begin, &end);
  while (end && std::isspace(static_cast<unsigned char>(*end))) ++end;
  if (end == begin || *end != '\0' || errno == ERANGE || !std::isfinite(value)) {
    throw Error(code, fmt::format("{}: '{}' is not a number", what, text));
  }
  return value;
}

// "0.5" or "0.485,0.456,0.406": one value for all channels or one per channel, expanded to `channels`.
std::vector<float> parse_per_channel(const std::string& text, const std::string& what, int channels,
                                     ErrorCode code) {
  std::vector<float> values;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    values.push_back(parse_float(text.substr(start, comma - start), what, code));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (values.size() == 1) return std::vector<float>(static_cast<size_t>(channels), values[0]);
  if (values.size() != static_cast<size_t>(channels)) {
    throw Error(code, fmt::format("{}: '{}' has {} values, the model has {} channel{}", what, text, values.size(),
                                  channels, channels == 1 ? "" : "s"));
  }
  return values;
}

bool parse_bool(const std::string& text, const std::string& what) {
  const std::string t = lower(text);
  if (t == "1" || t == "true" || t == "yes") return true;
  if (t == "0" || t == "false" || t == "no" || t.empty()) return false;
  throw Error(ErrorCode::InvalidModel, fmt::format("{}: '{}' is not 0 or 1", what, text));
}

std::string describe_shape(const cnnrt::TensorDesc& desc) {
  std::vector<std::string> dims;
  for (size_t i = 0; i < desc.shape.size(); ++i) {
    if (desc.shape[i] >= 0) dims.push_back(std::to_string(desc.shape[i]));
    else if (i < desc.dim_names.size() && !desc.dim_names[i].empty()) dims.push_back(desc.dim_names[i]);
    else dims.push_back("?");
  }
  return dims.empty() ? "a scalar" : fmt::format("{}", fmt::join(dims, "x"));
}

// Interleaved pixels from src_channels to dst_channels (1 or 3, or the same as the source): luma for
// colour to gray, replication for gray to RGB, alpha dropped.
template <typename T>
void copy_channels(const T* src, int src_channels, float* dst, int dst_channels, size_t pixels) {
  const bool has_colour = src_channels >= 3;
  for (size_t i = 0; i < pixels; ++i, src += src_channels, dst += dst_channels) {
    if (dst_channels == src_channels) {
      for (int c = 0; c < dst_channels; ++c) dst[c] = static_cast<float>(src[c]);
    } else if (dst_channels == 1) {
      dst[0] = has_colour ? 0.299f * float(src[0]) + 0.587f * float(src[1]) + 0.114f * float(src[2]) : float(src[0]);
    } else {
      for (int c = 0; c < 3; ++c) dst[c] = static_cast<float>(src[has_colour ? c : 0]);
    }
  }
}

}  // namespace

Image decode_image(const uint8_t* bytes, size_t size, const std::string& name, int want_channels) {
  if (want_channels != 0 && want_channels != 1 && want_channels != 3) {
    throw Error(ErrorCode::Internal, fmt::format("decode_image: {} channels asked for", want_channels));
  }
  if (size == 0) throw Error(ErrorCode::InvalidInput, name + ": empty file (0 bytes)");
  if (size > static_cast<size_t>(std::numeric_limits<int>::max())) {
    throw Error(ErrorCode::InvalidInput, fmt::format("{}: {} bytes, too large for an image file", name, size));
  }
  const int length = static_cast<int>(size);
  int width = 0, height = 0, channels = 0;
  // The header alone first, so that an absurd declared size is refused before any allocation.
  if (!stbi_info_from_memory(bytes, length, &width, &height, &channels)) {
    // stbi_info tries every format and keeps the last one's complaint ("unknown image type"). The loader
    // stops at the format the signature names and fails on the same header checks (before allocating), so
    // its reason is the one to show.
    const char* reason = stbi_failure_reason();
    if (stbi_uc* decoded = stbi_load_from_memory(bytes, length, &width, &height, &channels, 0)) {
      stbi_image_free(decoded);
    } else {
      reason = stbi_failure_reason();
    }
    throw Error(ErrorCode::InvalidInput, name + ": " + header_problem(reason));
  }
  if (width <= 0 || height <= 0) {
    throw Error(ErrorCode::InvalidInput, fmt::format("{}: zero-size image ({}x{})", name, width, height));
  }
  if (width > kMaxImageSide || height > kMaxImageSide) {
    throw Error(ErrorCode::InvalidInput, fmt::format("{}: the header declares {}x{} pixels, beyond the {}x{} limit",
                                                     name, width, height, kMaxImageSide, kMaxImageSide));
  }
  if (is_jpeg(bytes, size) && !jpeg_has_end_marker(bytes, size)) {
    throw Error(ErrorCode::InvalidInput,
                fmt::format("{}: truncated JPEG ({}x{} declared, no end-of-image marker)", name, width, height));
  }
  std::unique_ptr<stbi_uc, void (*)(void*)> decoded(
      stbi_load_from_memory(bytes, length, &width, &height, &channels, 0), stbi_image_free);
  if (!decoded) {
    const char* reason = stbi_failure_reason();
    throw Error(ErrorCode::InvalidInput, fmt::format("{}: cannot decode the {}x{} image ({}): truncated or corrupt",
                                                     name, width, height, reason ? reason : "unknown"));
  }
  Image image;
  image.width = width;
  image.height = height;
  image.channels = want_channels == 0 ? channels : want_channels;
  image.pixels.resize(size_t(width) * size_t(height) * size_t(image.channels));
  copy_channels(decoded.get(), channels, image.pixels.data(), image.channels, size_t(width) * size_t(height));
  return image;
}

Image read_image(const std::string& path, int channels) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw Error(ErrorCode::InvalidInput, path + ": is a directory, not an image");
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw Error(ErrorCode::Io, fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  const std::streamoff size = in.tellg();
  if (size < 0) throw Error(ErrorCode::Io, path + ": cannot read");
  if (size > kMaxImageFileBytes) {
    throw Error(ErrorCode::InvalidInput,
                fmt::format("{}: {} bytes, more than the {} byte limit for an image file", path, size, kMaxImageFileBytes));
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  in.seekg(0);
  if (size > 0 && !in.read(reinterpret_cast<char*>(bytes.data()), size)) {
    throw Error(ErrorCode::Io, path + ": read failed");
  }
  return decode_image(bytes.data(), bytes.size(), path, channels);
}

Image convert_channels(const Image& image, int channels) {
  if (channels != 1 && channels != 3) {
    throw Error(ErrorCode::Internal, fmt::format("convert_channels: {} channels asked for", channels));
  }
  if (image.channels == channels) return image;
  Image out;
  out.width = image.width;
  out.height = image.height;
  out.channels = channels;
  out.pixels.resize(size_t(image.width) * image.height * channels);
  copy_channels(image.pixels.data(), image.channels, out.pixels.data(), channels, size_t(image.width) * image.height);
  return out;
}

ResizeFilter parse_resize_filter(const std::string& name) {
  if (name == "auto") return ResizeFilter::Auto;
  if (name == "area") return ResizeFilter::Area;
  if (name == "bilinear") return ResizeFilter::Bilinear;
  throw Error(ErrorCode::Usage, "--resize must be auto, area or bilinear, not '" + name + "'");
}

void add_resize_option(CLI::App& command, std::string& name) {
  command.add_option("--resize", name, "auto (area to shrink, bilinear to enlarge), area or bilinear")
      ->check(CLI::IsMember({"auto", "area", "bilinear"}));
}

Image resize_image(const Image& image, int width, int height, ResizeFilter filter) {
  if (image.width == width && image.height == height) return image;
  if (filter == ResizeFilter::Auto) {
    filter = int64_t(width) * height < int64_t(image.width) * image.height ? ResizeFilter::Area
                                                                            : ResizeFilter::Bilinear;
  }
  Image out;
  out.width = width;
  out.height = height;
  out.channels = image.channels;
  out.pixels.resize(size_t(width) * height * image.channels);
  const int ok = stbir_resize_float_generic(
      image.pixels.data(), image.width, image.height, 0, out.pixels.data(), width, height, 0, image.channels,
      STBIR_ALPHA_CHANNEL_NONE, 0, STBIR_EDGE_CLAMP,
      filter == ResizeFilter::Area ? STBIR_FILTER_BOX : STBIR_FILTER_TRIANGLE, STBIR_COLORSPACE_LINEAR, nullptr);
  if (!ok) {
    throw Error(ErrorCode::Internal, fmt::format("resizing {}x{} to {}x{} failed", image.width, image.height,
                                                 width, height));
  }
  return out;
}

void NormalizationFlags::add_to(CLI::App& command) {
  command.add_option("--scale", scale, "Multiply raw 0..255 pixels by this (default: the model's input_scale, else 1/255)");
  command.add_option("--mean", mean, "Subtract after scaling: one value or one per channel (default: the model's, else 0)");
  command.add_option("--std", stddev, "Divide by this last: one value or one per channel (default: the model's, else 1)");
  CLI::Option* inv = command.add_flag("--invert", invert, "Use 255 - pixel (dark digits on white paper for a model "
                                                          "trained on white on black)");
  CLI::Option* no_inv = command.add_flag("--no-invert", no_invert, "Do not invert, whatever the model says");
  inv->excludes(no_inv);
}

Normalization resolve_normalization(const std::map<std::string, std::string>& metadata,
                                    const NormalizationFlags& flags, int channels) {
  Normalization norm;
  norm.mean.assign(static_cast<size_t>(channels), 0.0f);
  norm.stddev.assign(static_cast<size_t>(channels), 1.0f);
  auto from_model = [&](const char* key) -> const std::string* {
    auto it = metadata.find(key);
    return it == metadata.end() ? nullptr : &it->second;
  };
  const ErrorCode model_error = ErrorCode::InvalidModel;
  if (const std::string* v = from_model("input_scale")) norm.scale = parse_float(*v, "metadata input_scale", model_error);
  if (const std::string* v = from_model("mean")) norm.mean = parse_per_channel(*v, "metadata mean", channels, model_error);
  if (const std::string* v = from_model("std")) norm.stddev = parse_per_channel(*v, "metadata std", channels, model_error);
  if (const std::string* v = from_model("invert")) norm.invert = parse_bool(*v, "metadata invert");

  const ErrorCode flag_error = ErrorCode::Usage;
  if (!flags.scale.empty()) norm.scale = parse_float(flags.scale, "--scale", flag_error);
  if (!flags.mean.empty()) norm.mean = parse_per_channel(flags.mean, "--mean", channels, flag_error);
  if (!flags.stddev.empty()) norm.stddev = parse_per_channel(flags.stddev, "--std", channels, flag_error);
  if (flags.invert) norm.invert = true;
  if (flags.no_invert) norm.invert = false;

  for (float s : norm.stddev) {
    if (s == 0.0f) throw Error(flags.stddev.empty() ? model_error : flag_error, "std must not be 0");
  }
  return norm;
}

void normalise_into(const Image& image, const Normalization& norm, float* chw) {
  const size_t plane = size_t(image.width) * image.height;
  for (int c = 0; c < image.channels; ++c) {
    const float mean = norm.mean[static_cast<size_t>(c) % norm.mean.size()];
    const float inv_std = 1.0f / norm.stddev[static_cast<size_t>(c) % norm.stddev.size()];
    float* dst = chw + c * plane;
    for (size_t i = 0; i < plane; ++i) {
      float p = image.pixels[i * image.channels + c];
      if (norm.invert) p = 255.0f - p;
      dst[i] = (p * norm.scale - mean) * inv_std;
    }
  }
}

ImageModelInput image_model_input(const cnnrt::Model& model) {
  const std::string need = "cnnrt needs one input of shape N x C x H x W with C 1 or 3";
  if (model.inputs().size() != 1) {
    throw Error(ErrorCode::Unsupported, fmt::format("'{}' is not an image model: it takes {} inputs ({})",
                                                    model.name(), model.inputs().size(), need));
  }
  const cnnrt::TensorDesc& in = model.inputs()[0];
  const bool rank4 = in.shape.size() == 4;
  if (!rank4 || (in.shape[1] != 1 && in.shape[1] != 3)) {
    throw Error(ErrorCode::Unsupported, fmt::format("'{}' is not an image model: input '{}' has shape {} ({})",
                                                    model.name(), in.name, describe_shape(in), need));
  }
  ImageModelInput info;
  info.name = in.name;
  info.batch = in.shape[0];
  info.channels = static_cast<int>(in.shape[1]);
  info.height = in.shape[2];
  info.width = in.shape[3];
  if (info.height > kMaxImageSide || info.width > kMaxImageSide) {
    throw Error(ErrorCode::Unsupported, fmt::format("'{}': input '{}' of shape {} is larger than {}x{} images",
                                                    model.name(), in.name, describe_shape(in), kMaxImageSide,
                                                    kMaxImageSide));
  }
  return info;
}

Image fit_to_model(const Image& image, const ImageModelInput& input, ResizeFilter filter) {
  Image fitted = convert_channels(image, input.channels);  // a no-op after read_image(path, input.channels)
  if (input.height > 0 && input.width > 0) {
    fitted = resize_image(fitted, static_cast<int>(input.width), static_cast<int>(input.height), filter);
  }
  return fitted;
}

cnnrt::Tensor make_batch(const std::vector<const Image*>& images, const Normalization& norm, int64_t batch) {
  if (images.empty() || batch < static_cast<int64_t>(images.size())) {
    throw Error(ErrorCode::Internal, fmt::format("make_batch: {} images for a batch of {}", images.size(), batch));
  }
  const Image& first = *images[0];
  const size_t per_image = size_t(first.channels) * first.height * first.width;
  cnnrt::Tensor tensor;
  tensor.shape = {batch, first.channels, first.height, first.width};
  tensor.data.assign(per_image * static_cast<size_t>(batch), 0.0f);
  for (size_t i = 0; i < images.size(); ++i) {
    const Image& image = *images[i];
    if (image.width != first.width || image.height != first.height || image.channels != first.channels) {
      throw Error(ErrorCode::Internal, "make_batch: images of different sizes in one batch");
    }
    normalise_into(image, norm, tensor.data.data() + i * per_image);
  }
  return tensor;
}

bool has_image_extension(const std::string& path) {
  static const char* const kExtensions[] = {".png", ".jpg", ".jpeg", ".bmp", ".pgm", ".ppm", ".pnm",
                                            ".gif", ".tga", ".psd", ".hdr", ".pic"};
  const std::string ext = lower(fs::path(path).extension().string());
  return std::any_of(std::begin(kExtensions), std::end(kExtensions), [&](const char* e) { return ext == e; });
}

std::vector<std::string> expand_image_arguments(const std::vector<std::string>& arguments) {
  std::vector<std::string> files;
  for (const std::string& arg : arguments) {
    std::error_code ec;
    if (fs::is_directory(arg, ec)) {
      std::vector<std::string> found;
      for (const auto& entry : fs::directory_iterator(arg, ec)) {
        if (entry.is_regular_file() && has_image_extension(entry.path().string())) {
          found.push_back(entry.path().string());
        }
      }
      if (ec) throw Error(ErrorCode::Io, fmt::format("{}: cannot list: {}", arg, ec.message()));
      if (found.empty()) throw Error(ErrorCode::InvalidInput, arg + ": a directory with no image files");
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else if (!fs::exists(arg, ec) && arg.find_first_of("*?[") != std::string::npos) {
      glob_t matches{};
      const int rc = ::glob(arg.c_str(), 0, nullptr, &matches);
      std::vector<std::string> found;
      if (rc == 0) {
        for (size_t i = 0; i < matches.gl_pathc; ++i) {
          if (!fs::is_directory(matches.gl_pathv[i], ec)) found.emplace_back(matches.gl_pathv[i]);
        }
      }
      globfree(&matches);
      if (found.empty()) throw Error(ErrorCode::InvalidInput, arg + ": no files match");
      files.insert(files.end(), found.begin(), found.end());  // glob sorts them
    } else {
      files.push_back(arg);  // a missing or unreadable file is reported when it is read, with the others
    }
  }
  return files;
}

std::vector<uint8_t> map_to_gray8(const float* values, size_t count) {
  float lo = std::numeric_limits<float>::infinity(), hi = -lo;
  for (size_t i = 0; i < count; ++i) {
    if (!std::isfinite(values[i])) continue;
    lo = std::min(lo, values[i]);
    hi = std::max(hi, values[i]);
  }
  std::vector<uint8_t> out(count, 0);
  if (!(hi > lo)) return out;
  const float to_255 = 255.0f / (hi - lo);
  for (size_t i = 0; i < count; ++i) {
    if (std::isfinite(values[i])) out[i] = static_cast<uint8_t>(std::lround((values[i] - lo) * to_255));
  }
  return out;
}

void write_png(const std::string& path, int width, int height, int channels, const uint8_t* pixels) {
  if (!stbi_write_png(path.c_str(), width, height, channels, pixels, width * channels)) {
    throw Error(ErrorCode::Io, path + ": cannot write PNG");
  }
}

}  // namespace cnnrt_cli
