// cnnrt infer's preprocessing: decoding and its errors, luma, resizing, normalisation from metadata and
// flags, image-model detection, output maps to 8-bit.
#include <doctest/doctest.h>

#include <cmath>
#include <map>

#include "apps/cnnrt/images.hpp"
#include "image_test_util.hpp"
#include "model_builder.hpp"

using namespace cnnrt_cli;
using cnnrt::testing::png_bytes;
using cnnrt::testing::uniform_png;

namespace {

Image make_image(int width, int height, int channels, std::vector<float> pixels) {
  Image image;
  image.width = width;
  image.height = height;
  image.channels = channels;
  image.pixels = std::move(pixels);
  return image;
}

cnnrt::Error decode_error(const std::vector<uint8_t>& bytes) {
  try {
    decode_image(bytes.data(), bytes.size(), "pic.png");
  } catch (const cnnrt::Error& e) {
    return e;
  }
  FAIL("the image decoded, but it should have been refused");
  return cnnrt::Error(cnnrt::ErrorCode::Internal, "unreachable");
}

// Rewrites the width and height in a PNG's IHDR chunk (stb_image does not check chunk CRCs).
std::vector<uint8_t> with_declared_size(std::vector<uint8_t> png, uint32_t width, uint32_t height) {
  for (int i = 0; i < 4; ++i) {
    png[16 + i] = static_cast<uint8_t>(width >> (24 - 8 * i));
    png[20 + i] = static_cast<uint8_t>(height >> (24 - 8 * i));
  }
  return png;
}

cnnrt::Model load(const cnnrt::testing::ModelBuilder& builder) {
  const std::string bytes = builder.bytes();
  cnnrt::Options options;
  options.device = cnnrt::Device::Cpu;
  return cnnrt::Model::load_from_memory(bytes.data(), bytes.size(), options, "test.onnx");
}

}  // namespace

TEST_CASE("a PNG decodes to its pixels, channels as stored") {
  const std::vector<uint8_t> rgb = {255, 0, 0, 0, 255, 0, 0, 0, 255, 10, 20, 30};
  const std::vector<uint8_t> png = png_bytes(2, 2, 3, rgb);
  const Image image = decode_image(png.data(), png.size(), "rgb.png");
  CHECK(image.width == 2);
  CHECK(image.height == 2);
  REQUIRE(image.channels == 3);
  for (size_t i = 0; i < rgb.size(); ++i) CHECK(image.pixels[i] == doctest::Approx(rgb[i]));

  // Converted while decoding: the same numbers as convert_channels().
  const Image gray = decode_image(png.data(), png.size(), "rgb.png", 1);
  REQUIRE(gray.channels == 1);
  CHECK(gray.pixels == convert_channels(image, 1).pixels);
  CHECK(gray.pixels[3] == doctest::Approx(0.299 * 10 + 0.587 * 20 + 0.114 * 30));
  const Image rgb_again = decode_image(png.data(), png.size(), "rgb.png", 3);
  CHECK(rgb_again.pixels == image.pixels);
}

TEST_CASE("broken images are refused with a message naming the file and the problem") {
  const std::vector<uint8_t> good = uniform_png(16, 16, 1, 200);
  SUBCASE("empty file") {
    const cnnrt::Error e = decode_error({});
    CHECK(e.code() == cnnrt::ErrorCode::InvalidInput);
    CHECK(std::string(e.what()) == "pic.png: empty file (0 bytes)");
  }
  SUBCASE("truncated") {
    const std::vector<uint8_t> cut(good.begin(), good.begin() + static_cast<long>(good.size() / 2));
    const std::string message = decode_error(cut).what();
    CHECK(message.find("pic.png") == 0);
    CHECK(message.find("truncated") != std::string::npos);
  }
  SUBCASE("not an image") {
    const std::string text = "hello, world";
    const std::string message = decode_error(std::vector<uint8_t>(text.begin(), text.end())).what();
    CHECK(message.find("pic.png: not a supported image") == 0);
  }
  SUBCASE("zero size") {
    const std::string message = decode_error(with_declared_size(good, 0, 16)).what();
    CHECK(message.find("pic.png: zero-size image") == 0);
  }
  SUBCASE("absurd declared size, refused from the header") {
    const std::string message = decode_error(with_declared_size(good, 100000, 100000)).what();
    CHECK(message.find("pic.png") == 0);
    CHECK(message.find("16384x16384") != std::string::npos);
  }
  SUBCASE("JPEG without its end marker") {
    std::vector<uint8_t> jpeg;
    auto append = [](void* context, void* data, int size) {
      auto* bytes = static_cast<std::vector<uint8_t>*>(context);
      bytes->insert(bytes->end(), static_cast<uint8_t*>(data), static_cast<uint8_t*>(data) + size);
    };
    std::vector<uint8_t> pixels(32 * 32, 0);
    for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i * 7);
    stbi_write_jpg_to_func(append, &jpeg, 32, 32, 1, pixels.data(), 90);
    CHECK_NOTHROW(decode_image(jpeg.data(), jpeg.size(), "pic.jpg"));
    jpeg.resize(jpeg.size() * 2 / 3);
    const std::string message = decode_error(jpeg).what();
    CHECK(message.find("truncated JPEG") != std::string::npos);
  }
}

TEST_CASE("colour becomes gray with luma weights; gray becomes RGB by replication") {
  const Image rgb = make_image(3, 1, 3, {255, 0, 0, 0, 255, 0, 10, 20, 30});
  const Image gray = convert_channels(rgb, 1);
  REQUIRE(gray.channels == 1);
  CHECK(gray.pixels[0] == doctest::Approx(0.299 * 255));
  CHECK(gray.pixels[1] == doctest::Approx(0.587 * 255));
  CHECK(gray.pixels[2] == doctest::Approx(0.299 * 10 + 0.587 * 20 + 0.114 * 30));

  const Image rgba = make_image(1, 1, 4, {0, 0, 255, 17});
  CHECK(convert_channels(rgba, 1).pixels[0] == doctest::Approx(0.114 * 255));  // alpha ignored

  const Image back = convert_channels(make_image(2, 1, 1, {5, 250}), 3);
  CHECK(back.pixels == std::vector<float>{5, 5, 5, 250, 250, 250});
}

TEST_CASE("area resizing averages the pixels each output covers; bilinear keeps a flat image flat") {
  std::vector<float> pixels(16);
  for (int i = 0; i < 16; ++i) pixels[size_t(i)] = static_cast<float>(i);  // p(y, x) = 4y + x
  const Image small = resize_image(make_image(4, 4, 1, pixels), 2, 2, ResizeFilter::Area);
  REQUIRE(small.pixels.size() == 4);
  CHECK(small.pixels[0] == doctest::Approx(2.5).epsilon(1e-4));   // mean of 0 1 4 5
  CHECK(small.pixels[1] == doctest::Approx(4.5).epsilon(1e-4));   // 2 3 6 7
  CHECK(small.pixels[2] == doctest::Approx(10.5).epsilon(1e-4));  // 8 9 12 13
  CHECK(small.pixels[3] == doctest::Approx(12.5).epsilon(1e-4));  // 10 11 14 15

  const Image big = resize_image(make_image(2, 2, 1, {7, 7, 7, 7}), 5, 3, ResizeFilter::Bilinear);
  CHECK(big.width == 5);
  CHECK(big.height == 3);
  for (float p : big.pixels) CHECK(p == doctest::Approx(7));

  // Auto: area to shrink. A 28x28 checkerboard of 0/255 shrinks to mid-grey.
  std::vector<float> board(28 * 28);
  for (int y = 0; y < 28; ++y)
    for (int x = 0; x < 28; ++x) board[size_t(y * 28 + x)] = ((x + y) % 2) ? 255.0f : 0.0f;
  const Image half = resize_image(make_image(28, 28, 1, board), 14, 14);
  for (float p : half.pixels) CHECK(p == doctest::Approx(127.5).epsilon(1e-3));
  CHECK(parse_resize_filter("bilinear") == ResizeFilter::Bilinear);
  CHECK_THROWS_AS(parse_resize_filter("cubic"), cnnrt::Error);
}

TEST_CASE("normalisation follows the metadata, flags override it") {
  const Image image = make_image(2, 1, 1, {0, 255});
  std::vector<float> x(2);

  SUBCASE("defaults: scale 1/255, mean 0, std 1") {
    normalise_into(image, resolve_normalization({}, {}, 1), x.data());
    CHECK(x[0] == doctest::Approx(0));
    CHECK(x[1] == doctest::Approx(1));
  }
  SUBCASE("mean and std from the metadata") {
    const std::map<std::string, std::string> meta = {{"mean", "0.5"}, {"std", "0.5"}};
    normalise_into(image, resolve_normalization(meta, {}, 1), x.data());
    CHECK(x[0] == doctest::Approx(-1));
    CHECK(x[1] == doctest::Approx(1));
  }
  SUBCASE("input_scale and invert from the metadata") {
    const std::map<std::string, std::string> meta = {{"input_scale", "1"}, {"invert", "1"}, {"mean", "100"}};
    normalise_into(image, resolve_normalization(meta, {}, 1), x.data());
    CHECK(x[0] == doctest::Approx(155));  // (255 - 0) * 1 - 100
    CHECK(x[1] == doctest::Approx(-100));
  }
  SUBCASE("flags win over the metadata") {
    const std::map<std::string, std::string> meta = {{"invert", "1"}, {"mean", "0.5"}};
    NormalizationFlags flags;
    flags.no_invert = true;
    flags.mean = "0";
    flags.stddev = "2";
    normalise_into(image, resolve_normalization(meta, flags, 1), x.data());
    CHECK(x[0] == doctest::Approx(0));
    CHECK(x[1] == doctest::Approx(0.5));
  }
  SUBCASE("per-channel mean and std, planar output") {
    const Image rgb = make_image(1, 1, 3, {255, 255, 255});
    std::vector<float> chw(3);
    const std::map<std::string, std::string> meta = {{"mean", "0.5,0.25,0"}, {"std", "0.5, 0.25, 1"}};
    normalise_into(rgb, resolve_normalization(meta, {}, 3), chw.data());
    CHECK(chw[0] == doctest::Approx(1));
    CHECK(chw[1] == doctest::Approx(3));
    CHECK(chw[2] == doctest::Approx(1));
  }
  SUBCASE("bad values name their source") {
    CHECK_THROWS_WITH_AS(resolve_normalization({{"mean", "abc"}}, {}, 1), "metadata mean: 'abc' is not a number",
                         cnnrt::Error);
    CHECK_THROWS_WITH_AS(resolve_normalization({{"mean", "1,2"}}, {}, 3),
                         "metadata mean: '1,2' has 2 values, the model has 3 channels", cnnrt::Error);
    NormalizationFlags flags;
    flags.stddev = "0";
    try {
      resolve_normalization({}, flags, 1);
      FAIL("std 0 accepted");
    } catch (const cnnrt::Error& e) {
      CHECK(e.code() == cnnrt::ErrorCode::Usage);
    }
  }
}

TEST_CASE("image models are recognised by their one N x C x H x W input, C 1 or 3") {
  SUBCASE("fixed size") {
    const ImageModelInput in = image_model_input(load(cnnrt::testing::tiny_conv_model()));
    CHECK(in.channels == 1);
    CHECK(in.height == 5);
    CHECK(in.width == 5);
    CHECK(in.batch == -1);
  }
  SUBCASE("not an image") {
    cnnrt::testing::ModelBuilder m;
    m.input("x", {-1, 10}).output("y");
    m.node("Relu", {"x"}, {"y"});
    try {
      image_model_input(load(m));
      FAIL("a [N, 10] input taken for an image");
    } catch (const cnnrt::Error& e) {
      CHECK(e.code() == cnnrt::ErrorCode::Unsupported);
      CHECK(std::string(e.what()).find("input 'x' has shape Nx10") != std::string::npos);
    }
  }
  SUBCASE("two channels") {
    cnnrt::testing::ModelBuilder m;
    m.input("x", {1, 2, 4, 4}).output("y");
    m.node("Relu", {"x"}, {"y"});
    CHECK_THROWS_AS(image_model_input(load(m)), cnnrt::Error);
  }
}

TEST_CASE("fitting an image to the model and batching it with padding") {
  ImageModelInput in;
  in.channels = 1;
  in.height = 2;
  in.width = 2;
  const Image fitted = fit_to_model(make_image(4, 4, 3, std::vector<float>(48, 255)), in, ResizeFilter::Auto);
  CHECK(fitted.channels == 1);
  CHECK(fitted.width == 2);
  const cnnrt::Tensor batch = make_batch({&fitted}, Normalization{}, 3);
  CHECK(batch.shape == std::vector<int64_t>{3, 1, 2, 2});
  CHECK(batch.data[0] == doctest::Approx(1));
  CHECK(batch.data[4] == 0);  // padding
}

TEST_CASE("output maps scale to 0..255") {
  const std::vector<float> values = {-1, 0, 1};
  CHECK(map_to_gray8(values.data(), values.size()) == std::vector<uint8_t>{0, 128, 255});
  const std::vector<float> flat = {3, 3};
  CHECK(map_to_gray8(flat.data(), flat.size()) == std::vector<uint8_t>{0, 0});
}

TEST_CASE("image arguments: files stay, folders give their images sorted, patterns expand") {
  cnnrt::testing::ScratchDir dir("expand");
  const std::vector<uint8_t> png = uniform_png(2, 2, 1, 9);
  std::filesystem::create_directories(dir.path() / "imgs");
  cnnrt::testing::write_file(dir.path() / "imgs" / "b.png", png);
  cnnrt::testing::write_file(dir.path() / "imgs" / "a.PNG", png);
  cnnrt::testing::write_file(dir.path() / "imgs" / "notes.txt", {1, 2});
  std::filesystem::create_directories(dir.path() / "empty");

  CHECK(expand_image_arguments({dir / "imgs"}) ==
        std::vector<std::string>{dir / "imgs/a.PNG", dir / "imgs/b.png"});
  CHECK(expand_image_arguments({dir / "imgs/*.png"}) == std::vector<std::string>{dir / "imgs/b.png"});
  CHECK(expand_image_arguments({dir / "missing.png"}) == std::vector<std::string>{dir / "missing.png"});
  CHECK_THROWS_AS(expand_image_arguments({dir / "empty"}), cnnrt::Error);
  CHECK_THROWS_AS(expand_image_arguments({dir / "imgs/*.gif"}), cnnrt::Error);
}
