// Writes a stand-in for the shipped classifier, for the package test: a model with its interface
// (input [N,1,28,28], output [N,10]) and a batch of images whose top classes are known.
//
//   write_embed_test_model MODEL.onnx IMAGES.pb CLASS...
//
// The model is Flatten -> Gemm -> Softmax. Class k's weights are +1 on image rows 2k+4 and 2k+5 (a
// horizontal band) and -0.1 elsewhere; image i lights the band of CLASS[i]. So the top class of image i is
// CLASS[i], with a margin no kernel's rounding can flip.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "cnnrt/cnnrt.hpp"
#include "tests/model_builder.hpp"

namespace {

constexpr int64_t kSide = 28;     // image height and width, pixels
constexpr int64_t kClasses = 10;

bool in_band(int64_t row, int64_t cls) { return row == 2 * cls + 4 || row == 2 * cls + 5; }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s MODEL.onnx IMAGES.pb CLASS...\n", argv[0]);
    return 2;
  }
  cnnrt::testing::ModelBuilder m;
  m.input("image", {-1, 1, kSide, kSide}).output("probabilities");
  std::vector<float> weights(static_cast<size_t>(kClasses * kSide * kSide));  // [classes, rows * cols]
  for (int64_t k = 0; k < kClasses; ++k) {
    for (int64_t p = 0; p < kSide * kSide; ++p) weights[k * kSide * kSide + p] = in_band(p / kSide, k) ? 1.0f : -0.1f;
  }
  m.initializer("w", {kClasses, kSide * kSide}, weights).initializer("b", {kClasses}, std::vector<float>(kClasses, 0));
  m.node("Flatten", {"image"}, {"flat"}, "flatten");
  auto& gemm = m.node("Gemm", {"flat", "w", "b"}, {"logits"}, "fc");
  cnnrt::testing::ModelBuilder::attr_int(gemm, "transB", 1);
  auto& softmax = m.node("Softmax", {"logits"}, {"probabilities"}, "softmax");
  cnnrt::testing::ModelBuilder::attr_int(softmax, "axis", 1);
  std::ofstream model_file(argv[1], std::ios::binary);
  model_file << m.bytes();
  if (!model_file.flush()) {
    std::fprintf(stderr, "cannot write %s\n", argv[1]);
    return 1;
  }

  cnnrt::Tensor images;
  const int64_t batch = argc - 3;
  images.shape = {batch, 1, kSide, kSide};
  images.data.assign(static_cast<size_t>(batch * kSide * kSide), 0.0f);
  for (int64_t i = 0; i < batch; ++i) {
    const int64_t cls = std::atoi(argv[3 + i]);
    for (int64_t p = 0; p < kSide * kSide; ++p) {
      if (in_band(p / kSide, cls)) images.data[i * kSide * kSide + p] = 1.0f;
    }
  }
  cnnrt::write_tensor_file(argv[2], images, "image");
  return 0;
}
