// End to end: the built `cnnrt` tool's infer and eval commands on tiny models and images made here,
// checking stdout, stderr and the exit status, bad inputs included.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>
#include <stb_image.h>
#include <zlib.h>

#include <fstream>
#include <sstream>

#include "apps/cnnrt/idx.hpp"
#include "image_test_util.hpp"
#include "model_builder.hpp"

using cnnrt::testing::CliResult;
using cnnrt::testing::ModelBuilder;
using cnnrt::testing::run_cli;
using cnnrt::testing::ScratchDir;
using cnnrt::testing::uniform_png;
using cnnrt::testing::write_file;

namespace {

void add_metadata(ModelBuilder& m, const std::string& key, const std::string& value) {
  auto* prop = m.proto().add_metadata_props();
  prop->set_key(key);
  prop->set_value(value);
}

// x[N,1,4,4] -> Flatten -> Gemm -> y[N,3]. Logits: class 0 grows with brightness, class 1 with darkness,
// class 2 is always 0. With mean 0.5 and std 0.5 a white image gives x = 1 everywhere: logits 16, -16, 0.
// batch: -1 for a symbolic batch dimension.
ModelBuilder brightness_classifier(int64_t batch = -1) {
  ModelBuilder m;
  m.input("x", {batch, 1, 4, 4}).output("y");
  std::vector<float> w;
  for (int i = 0; i < 16; ++i) w.insert(w.end(), {1.0f, -1.0f, 0.0f});
  m.initializer("w", {16, 3}, w).initializer("b", {3}, {0, 0, 0});
  auto& flatten = m.node("Flatten", {"x"}, {"f"}, "flatten");
  ModelBuilder::attr_int(flatten, "axis", 1);
  m.node("Gemm", {"f", "w", "b"}, {"y"}, "fc");
  add_metadata(m, "labels", "bright,dark,flat");
  add_metadata(m, "mean", "0.5");
  add_metadata(m, "std", "0.5");
  return m;
}

// x[N,1,H,W] with symbolic H, W -> Conv 3x3 pad 1: map 0 is the image, map 1 its negative.
ModelBuilder identity_and_negative(bool with_task = true) {
  ModelBuilder m;
  m.input("x", {-1, 1, 1, 1}).output("y");
  auto* dims = m.proto().mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
  dims->mutable_dim(2)->set_dim_param("H");
  dims->mutable_dim(3)->set_dim_param("W");
  std::vector<float> w(18, 0.0f);
  w[4] = 1.0f;
  w[9 + 4] = -1.0f;
  m.initializer("w", {2, 1, 3, 3}, w);
  auto& conv = m.node("Conv", {"x", "w"}, {"y"}, "conv");
  ModelBuilder::attr_ints(conv, "pads", {1, 1, 1, 1});
  if (with_task) add_metadata(m, "task", "image-to-image");
  return m;
}

void save_model(const ModelBuilder& m, const std::string& path) {
  const std::string bytes = m.bytes();
  write_file(path, std::vector<uint8_t>(bytes.begin(), bytes.end()));
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

TEST_CASE("cnnrt infer classifies images with the model's labels and normalisation") {
  ScratchDir dir("cli_classify");
  save_model(brightness_classifier(), dir / "bright.onnx");
  write_file(dir.path() / "white.png", uniform_png(8, 8, 1, 255));  // shrunk to 4x4
  write_file(dir.path() / "black.png", uniform_png(4, 4, 3, 0));    // RGB to gray

  const CliResult r = run_cli(dir, {"infer", dir / "bright.onnx", dir / "white.png", dir / "black.png",
                                    "--device", "cpu", "--top-k", "2"});
  CHECK(r.status == 0);
  const std::vector<std::string> lines = lines_of(r.out);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] == dir / "white.png" + ": bright 100.0%, flat 0.0%");
  CHECK(lines[1] == dir / "black.png" + ": dark 100.0%, flat 0.0%");
  CHECK(r.err.find("2 images in") != std::string::npos);
  CHECK(r.err.find("images/s, mean latency") != std::string::npos);

  SUBCASE("--invert flips the pixels; --labels renames the classes") {
    const std::string names = "light\nshadow\neven\n";
    write_file(dir.path() / "names.txt", std::vector<uint8_t>(names.begin(), names.end()));
    const CliResult inv = run_cli(dir, {"infer", dir / "bright.onnx", dir / "white.png", "--device", "cpu",
                                        "--invert", "--labels", dir / "names.txt", "-k", "1"});
    CHECK(inv.status == 0);
    CHECK(inv.out == dir / "white.png" + ": shadow 100.0%\n");
  }
  SUBCASE("--json: one record per image") {
    const CliResult js = run_cli(dir, {"infer", dir / "bright.onnx", dir.path().string(), "--device", "cpu",
                                       "--json", "-", "--batch", "1"});
    CHECK(js.status == 0);
    const std::vector<std::string> records = lines_of(js.out);
    REQUIRE(records.size() == 2);  // the folder's images, sorted: black, white
    const nlohmann::json black = nlohmann::json::parse(records[0]);
    CHECK(black["file"] == dir / "black.png");
    CHECK(black["top"][0]["label"] == "dark");
    CHECK(black["top"][0]["index"] == 1);
    CHECK(black["top"].size() == 3);
    CHECK(nlohmann::json::parse(records[1])["top"][0]["label"] == "bright");
  }
}

TEST_CASE("cnnrt infer on a model with a fixed batch size pads the last batch") {
  ScratchDir dir("cli_fixed_batch");
  save_model(brightness_classifier(2), dir / "batch2.onnx");
  write_file(dir.path() / "a.png", uniform_png(4, 4, 1, 255));
  write_file(dir.path() / "b.png", uniform_png(4, 4, 1, 0));
  write_file(dir.path() / "c.png", uniform_png(4, 4, 1, 250));
  const CliResult r = run_cli(dir, {"infer", dir / "batch2.onnx", dir.path().string(), "--device", "cpu", "-k", "1",
                                    "--batch", "16"});
  CHECK(r.status == 0);
  CHECK(r.out == dir / "a.png" + ": bright 100.0%\n" + dir / "b.png" + ": dark 100.0%\n" + dir / "c.png" +
                     ": bright 100.0%\n");
  CHECK(r.err.find("3 images in") != std::string::npos);
  CHECK(r.err.find("(2 batches of up to 2") != std::string::npos);
}

TEST_CASE("cnnrt infer reports each bad image on one line, goes on, and exits with the bad-input code") {
  ScratchDir dir("cli_bad");
  save_model(brightness_classifier(), dir / "bright.onnx");
  const std::vector<uint8_t> png = uniform_png(16, 16, 1, 255);
  write_file(dir.path() / "good.png", png);
  write_file(dir.path() / "cut.png", std::vector<uint8_t>(png.begin(), png.begin() + long(png.size() / 2)));
  write_file(dir.path() / "empty.png", {});

  const CliResult r = run_cli(dir, {"infer", dir / "bright.onnx", dir / "cut.png", dir / "good.png",
                                    dir / "empty.png", dir / "missing.png", "--device", "cpu", "-k", "1"});
  CHECK(r.status == 4);
  CHECK(r.out == dir / "good.png" + ": bright 100.0%\n");
  const std::vector<std::string> err = lines_of(r.err);
  auto has_line = [&](const std::string& start, const std::string& part) {
    for (const std::string& line : err) {
      if (line.rfind(start, 0) == 0 && line.find(part) != std::string::npos) return true;
    }
    return false;
  };
  CHECK(has_line("error: " + dir / "cut.png" + ": ", "truncated"));
  CHECK(has_line("error: " + dir / "empty.png" + ": ", "empty file (0 bytes)"));
  CHECK(has_line("error: " + dir / "missing.png" + ": ", "cannot open"));
  CHECK(has_line("1 image in", "images/s"));
  CHECK(has_line("3 of 4 images failed", ""));

  SUBCASE("only bad images") {
    const CliResult only = run_cli(dir, {"infer", dir / "bright.onnx", dir / "empty.png", "--device", "cpu"});
    CHECK(only.status == 4);
    CHECK(only.out.empty());
  }
  SUBCASE("--json records the errors too") {
    const CliResult js = run_cli(dir, {"infer", dir / "bright.onnx", dir / "empty.png", dir / "good.png",
                                       "--device", "cpu", "--json", "-"});
    CHECK(js.status == 4);
    const std::vector<std::string> records = lines_of(js.out);
    REQUIRE(records.size() == 2);
    const nlohmann::json bad = nlohmann::json::parse(records[0]);
    CHECK(bad["file"] == dir / "empty.png");
    CHECK(bad["error"].get<std::string>().find("empty file") != std::string::npos);
    CHECK(nlohmann::json::parse(records[1])["top"][0]["label"] == "bright");
  }
}

TEST_CASE("cnnrt infer refuses a model that does not take images, with the unsupported code") {
  ScratchDir dir("cli_not_image");
  ModelBuilder m;
  m.input("x", {-1, 10}).output("y");
  m.node("Relu", {"x"}, {"y"});
  save_model(m, dir / "vector.onnx");
  write_file(dir.path() / "good.png", uniform_png(4, 4, 1, 10));
  const CliResult r = run_cli(dir, {"infer", dir / "vector.onnx", dir / "good.png", "--device", "cpu"});
  CHECK(r.status == 3);
  CHECK(r.out.empty());
  CHECK(r.err.find("is not an image model: input 'x' has shape Nx10") != std::string::npos);
}

TEST_CASE("cnnrt infer on an image-to-image model writes each output map as a PNG") {
  ScratchDir dir("cli_maps");
  save_model(identity_and_negative(), dir / "maps.onnx");
  std::vector<uint8_t> ramp(6 * 5);
  for (size_t i = 0; i < ramp.size(); ++i) ramp[i] = static_cast<uint8_t>(i * 8);
  write_file(dir.path() / "ramp.png", cnnrt::testing::png_bytes(6, 5, 1, ramp));
  write_file(dir.path() / "small.png", uniform_png(3, 2, 1, 50));

  const CliResult r = run_cli(dir, {"infer", dir / "maps.onnx", dir / "ramp.png", dir / "small.png", "--device",
                                    "cpu", "--save-outputs", dir / "out"});
  CHECK(r.status == 0);
  const std::vector<std::string> lines = lines_of(r.out);
  REQUIRE(lines.size() == 4);
  CHECK(lines[0].rfind(dir / "ramp.png" + ": output 'y' map 0 (6x5", 0) == 0);
  CHECK(lines[0].find("-> " + dir / "out/ramp_y_0.png") != std::string::npos);
  CHECK(lines[3].rfind(dir / "small.png" + ": output 'y' map 1 (3x2", 0) == 0);

  // Map 0 is the image itself (rescaled to 0..255), map 1 its negative: each image keeps its own size.
  int w = 0, h = 0, c = 0;
  stbi_uc* map0 = stbi_load((dir / "out/ramp_y_0.png").c_str(), &w, &h, &c, 1);
  REQUIRE(map0 != nullptr);
  CHECK(w == 6);
  CHECK(h == 5);
  CHECK(map0[0] == 0);
  CHECK(map0[29] == 255);
  stbi_image_free(map0);
  stbi_uc* map1 = stbi_load((dir / "out/ramp_y_1.png").c_str(), &w, &h, &c, 1);
  REQUIRE(map1 != nullptr);
  CHECK(map1[0] == 255);
  CHECK(map1[29] == 0);
  stbi_image_free(map1);
  stbi_uc* small = stbi_load((dir / "out/small_y_0.png").c_str(), &w, &h, &c, 1);
  REQUIRE(small != nullptr);
  CHECK(w == 3);
  CHECK(h == 2);
  stbi_image_free(small);

  SUBCASE("without a task in the metadata, N x C x H x W outputs are taken as maps") {
    save_model(identity_and_negative(false), dir / "maps_untagged.onnx");
    const CliResult plain = run_cli(dir, {"infer", dir / "maps_untagged.onnx", dir / "small.png", "--device", "cpu"});
    CHECK(plain.status == 0);
    CHECK(plain.out.find(dir / "small.png" + ": output 'y' map 1 (3x2") != std::string::npos);
    CHECK(plain.out.find("use --save-outputs DIR") != std::string::npos);
  }
}

TEST_CASE("cnnrt eval: accuracy, confusion matrix and throughput on IDX files") {
  ScratchDir dir("cli_eval");
  save_model(brightness_classifier(), dir / "bright.onnx");
  // Five 4x4 images: bright, dark, bright, dark, bright.
  std::vector<float> pixels;
  for (int i = 0; i < 5; ++i) pixels.insert(pixels.end(), 16, i % 2 == 0 ? 230.0f : 20.0f);
  const std::vector<uint8_t> images = cnnrt_cli::encode_idx(cnnrt_cli::IdxType::U8, {5, 4, 4}, pixels);
  write_file(dir.path() / "images-idx3-ubyte", images);
  // The last label is wrong on purpose: 4 of 5 right.
  write_file(dir.path() / "labels-idx1-ubyte", cnnrt_cli::encode_idx(cnnrt_cli::IdxType::U8, {5}, {0, 1, 0, 1, 2}));
  {
    gzFile gz = gzopen((dir / "images-idx3-ubyte.gz").c_str(), "wb");
    REQUIRE(gz != nullptr);
    gzwrite(gz, images.data(), static_cast<unsigned>(images.size()));
    gzclose(gz);
  }

  SUBCASE("gzipped images, raw labels") {
    const CliResult r = run_cli(dir, {"eval", dir / "bright.onnx", "--images", dir / "images-idx3-ubyte.gz",
                                      "--labels", dir / "labels-idx1-ubyte", "--device", "cpu", "--batch", "2"});
    CHECK(r.status == 0);
    CHECK(r.out.find("accuracy: 80.00% (4/5)\n") != std::string::npos);
    CHECK(r.out.find("confusion matrix") != std::string::npos);
    CHECK(r.out.find("bright    2   0   0  100.00%") != std::string::npos);
    CHECK(r.out.find("  flat    1   0   0    0.00%") != std::string::npos);
    CHECK(r.out.find("images/s") != std::string::npos);
  }
  SUBCASE("--limit and --json") {
    const CliResult r = run_cli(dir, {"eval", dir / "bright.onnx", "--images", dir / "images-idx3-ubyte",
                                      "--labels", dir / "labels-idx1-ubyte", "--device", "cpu", "--limit", "4",
                                      "--json", "-"});
    CHECK(r.status == 0);
    const nlohmann::json report = nlohmann::json::parse(r.out);
    CHECK(report["count"] == 4);
    CHECK(report["correct"] == 4);
    CHECK(report["accuracy"] == doctest::Approx(1.0));
    CHECK(report["confusion"][1][1] == 2);
    CHECK(report["classes"][2] == "flat");
  }
  SUBCASE("a truncated IDX file") {
    write_file(dir.path() / "cut-idx3-ubyte", std::vector<uint8_t>(images.begin(), images.end() - 10));
    const CliResult r = run_cli(dir, {"eval", dir / "bright.onnx", "--images", dir / "cut-idx3-ubyte", "--labels",
                                      dir / "labels-idx1-ubyte", "--device", "cpu"});
    CHECK(r.status == 4);
    CHECK(r.err.find("error: " + dir / "cut-idx3-ubyte" + ": truncated IDX data") != std::string::npos);
  }
  SUBCASE("counts that disagree") {
    write_file(dir.path() / "three-idx1-ubyte", cnnrt_cli::encode_idx(cnnrt_cli::IdxType::U8, {3}, {0, 1, 0}));
    const CliResult r = run_cli(dir, {"eval", dir / "bright.onnx", "--images", dir / "images-idx3-ubyte",
                                      "--labels", dir / "three-idx1-ubyte", "--device", "cpu"});
    CHECK(r.status == 4);
    CHECK(r.err.find("holds 5 images but") != std::string::npos);
  }
}
