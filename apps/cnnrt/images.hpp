// Images in, model inputs out: decoding (stb_image), channel conversion, resizing (stb_image_resize),
// normalisation as the model's metadata_props say, and writing output maps back as PNG.
//
// Pixel values stay in 0..255 (as floats) until normalise_into(), which applies
//   p' = invert ? 255 - p : p;   x = (p' * scale - mean[c]) / stddev[c]
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cnnrt/cnnrt.hpp"

namespace cnnrt_cli {

// Images declaring a side longer than this are refused before their pixels are decoded.
constexpr int kMaxImageSide = 16384;  // pixels

// A decoded image: interleaved (HWC) pixel values in 0..255.
struct Image {
  int width = 0;
  int height = 0;
  int channels = 0;  // 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA
  std::vector<float> pixels;

  float at(int y, int x, int c) const { return pixels[(size_t(y) * width + x) * channels + c]; }
};

// Decodes PNG, JPEG, BMP, PGM/PPM, GIF (first frame), TGA, PSD, HDR. `name` is used in error messages.
// Throws cnnrt::Error (InvalidInput) naming the file: empty, not an image, truncated or corrupt, zero
// size, or a declared size beyond kMaxImageSide (checked from the header, before decoding).
// channels: 0 keeps the file's; 1 or 3 converts as convert_channels() does, while copying (a large photo
// then never exists as 4-channel floats).
Image decode_image(const uint8_t* bytes, size_t size, const std::string& name, int channels = 0);
// Reads the file and decodes it; an unreadable file is an Io error naming it.
Image read_image(const std::string& path, int channels = 0);

// Gray to RGB by replication; RGB to gray with luma weights 0.299 R + 0.587 G + 0.114 B. Alpha is
// dropped (not composited).
Image convert_channels(const Image& image, int channels);

enum class ResizeFilter {
  Auto,      // Area when shrinking, Bilinear when enlarging
  Area,      // box filter: each output pixel is the mean of the input pixels it covers
  Bilinear,  // triangle filter
};
ResizeFilter parse_resize_filter(const std::string& name);
// The --resize option of infer and eval, stored in `name` (parse it with parse_resize_filter).
void add_resize_option(CLI::App& command, std::string& name);
Image resize_image(const Image& image, int width, int height, ResizeFilter filter = ResizeFilter::Auto);

// How raw pixels become model inputs. mean and stddev hold one value, or one per channel.
struct Normalization {
  float scale = 1.0f / 255.0f;
  std::vector<float> mean{0.0f};
  std::vector<float> stddev{1.0f};
  bool invert = false;
};

// Values given on the command line; each one set replaces the model's.
struct NormalizationFlags {
  std::string scale;  // "" = the model's
  std::string mean;
  std::string stddev;
  bool invert = false;
  bool no_invert = false;

  void add_to(CLI::App& command);
};

// Reads input_scale, mean, std and invert from metadata_props, then applies the flags. Throws
// InvalidModel naming the key for a value that does not parse, Usage for a bad flag.
Normalization resolve_normalization(const std::map<std::string, std::string>& metadata,
                                    const NormalizationFlags& flags, int channels);

// Writes image (already converted and resized to the model's C, H, W) as planar CHW floats.
void normalise_into(const Image& image, const Normalization& norm, float* chw);

// What a model needs to be fed images: one input of shape [N, C, H, W] with C 1 or 3.
struct ImageModelInput {
  std::string name;
  int64_t batch = -1;  // -1: symbolic (any batch size)
  int channels = 1;
  int64_t height = -1;  // -1: symbolic (each image keeps its own size)
  int64_t width = -1;
};
// Throws Unsupported naming the model and the input shape when the model does not take an image.
ImageModelInput image_model_input(const cnnrt::Model& model);

// The image with the model's channel count and, where the model fixes them, its height and width.
Image fit_to_model(const Image& image, const ImageModelInput& input, ResizeFilter filter);
// A batch tensor [batch, C, H, W] from images already fitted to the model (all of one size). Rows past
// images.size() (padding for a model with a fixed batch size) are zero.
cnnrt::Tensor make_batch(const std::vector<const Image*>& images, const Normalization& norm, int64_t batch);

// Command-line image arguments to files: a file stays, a directory gives its image files (sorted, not
// recursive), a pattern with * ? [ is expanded by glob. A directory or pattern with no images, or a
// missing path, is an error naming it.
std::vector<std::string> expand_image_arguments(const std::vector<std::string>& arguments);
bool has_image_extension(const std::string& path);

// One output map scaled so that its minimum is 0 and its maximum 255 (a constant map becomes 0).
std::vector<uint8_t> map_to_gray8(const float* values, size_t count);
// Writes an 8-bit PNG; throws Io naming the path on failure.
void write_png(const std::string& path, int width, int height, int channels, const uint8_t* pixels);

}  // namespace cnnrt_cli
