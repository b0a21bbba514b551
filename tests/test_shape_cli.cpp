// End to end: `--shape` on the built `cnnrt` tool's plan, run, infer and bench commands, with a fully
// convolutional model whose height and width are symbolic. Bad shapes are refused with the exit code of their
// category (2 usage, 4 invalid input) and a message naming the input and the dimension.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "image_test_util.hpp"
#include "model_builder.hpp"

using cnnrt::testing::CliResult;
using cnnrt::testing::ModelBuilder;
using cnnrt::testing::run_cli;
using cnnrt::testing::ScratchDir;
using cnnrt::testing::write_file;

namespace {

std::string save_denoiser(const ScratchDir& dir) {
  const std::string path = dir / "denoiser.onnx";
  const std::string bytes = cnnrt::testing::fully_convolutional_denoiser().bytes();
  write_file(path, std::vector<uint8_t>(bytes.begin(), bytes.end()));
  return path;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("cnnrt plan --shape binds symbolic H and W; without it the error says how") {
  ScratchDir dir("shape_plan");
  const std::string model = save_denoiser(dir);
  CliResult r = run_cli(dir, {"plan", model, "--shape", "image=1x1x64x48", "--device", "cpu"});
  CHECK(r.status == 0);
  CHECK(has(r.out, "input  image: 1x1x64x48"));
  CHECK(has(r.out, "output denoised: 1x1x64x48"));
  r = run_cli(dir, {"plan", model, "--shape", "3x1x7x1000", "--device", "cpu"});  // one input: the name may go
  CHECK(r.status == 0);
  CHECK(has(r.out, "input  image: 3x1x7x1000"));

  r = run_cli(dir, {"plan", model, "--device", "cpu"});
  CHECK(r.status == 2);
  CHECK(has(r.err, "dimension 2 ('H') is symbolic"));
  CHECK(has(r.err, "--shape image="));
}

TEST_CASE("cnnrt --shape refusals name the input and the dimension, with the usage or invalid-input code") {
  ScratchDir dir("shape_errors");
  const std::string model = save_denoiser(dir);
  struct Case {
    std::vector<std::string> shape_args;
    int status;
    std::string message;
  };
  const Case cases[] = {
      {{"--shape", "image=1x2x8x8"}, 4, "input 'image' dimension 1 is fixed at 1, got 2"},
      {{"--shape", "image=1x1x0x8"}, 4, "input 'image' dimension 2 ('H') must be at least 1, got 0"},
      {{"--shape", "image=1x1x8"}, 4, "input 'image' has rank 4 (N x 1 x H x W), got shape 1x1x8 of rank 3"},
      {{"--shape", "photo=1x1x8x8"}, 2, "has no input 'photo' (its inputs: 'image')"},
      {{"--shape", "image=1x1xAx8"}, 2, "--shape 'image=1x1xAx8': 'A' is not a dimension"},
      {{"--shape", "image=1x1x8x8", "--shape", "image=1x1x9x9"}, 2, "--shape gives input 'image' twice"},
      {{"--shape", "image=1x1x8x8", "--batch", "2"}, 2, "excludes"},
  };
  for (const char* command : {"plan", "run", "bench"}) {
    for (const Case& c : cases) {
      std::vector<std::string> args = {command, model};
      args.insert(args.end(), c.shape_args.begin(), c.shape_args.end());
      if (std::string(command) != "bench") args.insert(args.end(), {"--device", "cpu"});
      if (std::string(command) == "run" && c.shape_args.back() == "2") continue;  // run has no --batch
      CAPTURE(command);
      CAPTURE(c.message);
      const CliResult r = run_cli(dir, args);
      CHECK(r.status == c.status);
      CHECK(has(r.err, c.message));
    }
  }
}

TEST_CASE("cnnrt run --shape runs once on random inputs; with --test-data the data must have that shape") {
  ScratchDir dir("shape_run");
  const std::string model = save_denoiser(dir);
  CliResult r = run_cli(dir, {"run", model, "--shape", "image=2x1x16x12", "--device", "cpu", "--output-dir",
                              dir / "out"});
  CHECK(r.status == 0);
  CHECK(has(r.out, "input 'image' [2x1x16x12]: uniform random in [-1, 1)"));
  CHECK(has(r.out, "output 'denoised' [2x1x16x12]: min "));

  // The written output is test data for the same shape (as input it has the right shape too).
  const std::string data = dir / "data";
  std::filesystem::create_directories(data);
  std::filesystem::copy_file(dir / "out/output_0.pb", data + "/input_0.pb");
  r = run_cli(dir, {"run", model, "--test-data", data, "--shape", "image=2x1x16x12", "--device", "cpu"});
  CHECK(r.status == 0);
  CHECK(has(r.out, "ran, no expected outputs to compare"));
  r = run_cli(dir, {"run", model, "--test-data", data, "--shape", "image=2x1x16x10", "--device", "cpu"});
  CHECK(r.status == 4);
  CHECK(has(r.err, "input 'image' has shape 2x1x16x12, but --shape gives 2x1x16x10"));

  r = run_cli(dir, {"run", model, "--device", "cpu"});
  CHECK(r.status == 2);
  CHECK(has(r.err, "give --test-data DIR, or --shape"));
}

TEST_CASE("cnnrt infer --shape resizes images to the given H and W") {
  ScratchDir dir("shape_infer");
  const std::string model = save_denoiser(dir);
  write_file(dir / "gray.png", cnnrt::testing::uniform_png(5, 3, 1, 120));
  const CliResult r = run_cli(dir, {"infer", model, dir / "gray.png", "--shape", "image=1x1x8x10", "--device", "cpu"});
  CHECK(r.status == 0);
  CHECK(has(r.out, "output 'denoised' map 0 (10x8"));
  const CliResult wrong = run_cli(dir, {"infer", model, dir / "gray.png", "--shape", "image=1x3x8x10", "--device",
                                        "cpu"});
  CHECK(wrong.status == 4);
  CHECK(has(wrong.err, "infer takes N x 1 x H x W"));
}
