// The shipped models and samples through the built `cnnrt` tool, as a user meets them: the README's main
// command, `infer` on every sample, `eval` on the whole Fashion-MNIST test set, and edges.onnx writing maps.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>
#include <stb_image.h>

#include <filesystem>
#include <regex>
#include <set>

#include "image_test_util.hpp"

using cnnrt::testing::CliResult;
using cnnrt::testing::run_cli;
using cnnrt::testing::ScratchDir;

namespace {

const std::string source_dir = CNNRT_SOURCE_DIR;
const std::string lenet = source_dir + "/models/fashion_lenet.onnx";
const char* fashion_images = "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz";
const char* fashion_labels = "/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz";

// The class names of samples/fashion_<index>_<slug>.png, in the model's label order.
const std::map<std::string, std::string> slug_labels = {
    {"t_shirt_top", "T-shirt/top"}, {"trouser", "Trouser"}, {"pullover", "Pullover"}, {"dress", "Dress"},
    {"coat", "Coat"},               {"sandal", "Sandal"},   {"shirt", "Shirt"},       {"sneaker", "Sneaker"},
    {"bag", "Bag"},                 {"ankle_boot", "Ankle boot"}};

}  // namespace

TEST_CASE("README main command: fashion_lenet classifies samples/fashion_0_ankle_boot.png as an ankle boot") {
  ScratchDir dir("readme_main");
  const CliResult r = run_cli(dir, {"infer", lenet, source_dir + "/samples/fashion_0_ankle_boot.png"});
  INFO("stderr: " << r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.rfind(source_dir + "/samples/fashion_0_ankle_boot.png: Ankle boot ", 0) == 0);
}

TEST_CASE("infer --json: every Fashion-MNIST sample gets its own class as top-1") {
  ScratchDir dir("samples_json");
  std::vector<std::string> args = {"infer", lenet, "--device", "cpu", "--json", "-", "--top-k", "3"};
  size_t samples = 0;
  for (const auto& entry : std::filesystem::directory_iterator(source_dir + "/samples")) {
    if (entry.path().filename().string().rfind("fashion_", 0) != 0 || entry.path().extension() != ".png") continue;
    args.push_back(entry.path().string());
    ++samples;
  }
  REQUIRE(samples == slug_labels.size());
  const CliResult r = run_cli(dir, args);
  INFO("stderr: " << r.err);
  REQUIRE(r.status == 0);
  std::istringstream lines(r.out);
  std::set<std::string> seen;
  const std::regex name(R"(fashion_\d+_([a-z_]+)\.png$)");
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json record = nlohmann::json::parse(line);
    const std::string file = record.at("file");
    std::smatch m;
    REQUIRE_MESSAGE(std::regex_search(file, m, name), file);
    const std::string expected = slug_labels.at(m[1]);
    REQUIRE(record.at("top").size() == 3);
    CHECK_MESSAGE(record.at("top")[0].at("label") == expected, file << " -> " << record.at("top")[0].dump());
    seen.insert(expected);
  }
  CHECK(seen.size() == slug_labels.size());
}

TEST_CASE("eval: fashion_lenet reaches >= 90% on the 10,000 Fashion-MNIST test images (CPU backend)") {
  ScratchDir dir("eval_full");
  const CliResult r = run_cli(dir, {"eval", lenet, "--images", fashion_images, "--labels", fashion_labels, "--device",
                                    "cpu", "--batch", "256"});
  INFO("stderr: " << r.err);
  REQUIRE(r.status == 0);
  std::smatch m;
  REQUIRE(std::regex_search(r.out, m, std::regex(R"(accuracy: ([0-9.]+)% \((\d+)/10000\))")));
  MESSAGE("fashion_lenet on the CPU: " << m[0]);
  CHECK(std::stod(m[1]) >= 90.0);
}

TEST_CASE("infer --save-outputs: edges.onnx writes its five maps of samples/camera.png at full size") {
  ScratchDir dir("edges_maps");
  const std::string out_dir = dir / "maps";
  const CliResult r = run_cli(dir, {"infer", source_dir + "/models/edges.onnx", source_dir + "/samples/camera.png",
                                    "--device", "cpu", "--save-outputs", out_dir});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.status == 0);
  int camera_w = 0, camera_h = 0, camera_c = 0;
  REQUIRE(stbi_info((source_dir + "/samples/camera.png").c_str(), &camera_w, &camera_h, &camera_c));
  std::vector<std::filesystem::path> maps;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(out_dir)) {
    if (entry.path().extension() == ".png") maps.push_back(entry.path());
  }
  REQUIRE(maps.size() == 5);
  for (const auto& path : maps) {
    int w = 0, h = 0, c = 0;
    stbi_uc* pixels = stbi_load(path.string().c_str(), &w, &h, &c, 1);
    REQUIRE_MESSAGE(pixels != nullptr, path.string());
    CHECK(w == camera_w);
    CHECK(h == camera_h);
    // A real map of a photo is not flat: it uses a good part of the 0..255 range.
    const auto [lo, hi] = std::minmax_element(pixels, pixels + w * h);
    CHECK_MESSAGE(*hi - *lo > 100, path.string());
    stbi_image_free(pixels);
    CHECK_MESSAGE(r.out.find(path.filename().string()) != std::string::npos, "stdout names " << path.string());
  }
}
