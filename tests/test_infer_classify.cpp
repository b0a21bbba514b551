// Classifier outputs: softmax, the probabilities check, top-k, labels, the confusion matrix, and the
// progress bar's line.
#include <doctest/doctest.h>

#include <cmath>

#include "apps/cnnrt/classify.hpp"
#include "apps/cnnrt/progress.hpp"
#include "cnnrt/cnnrt.hpp"
#include "image_test_util.hpp"

using namespace cnnrt_cli;

TEST_CASE("softmax") {
  const std::vector<float> logits = {0.0f, std::log(3.0f)};
  const std::vector<float> p = softmax(logits.data(), logits.size());
  CHECK(p[0] == doctest::Approx(0.25));
  CHECK(p[1] == doctest::Approx(0.75));
  // Large logits do not overflow.
  const std::vector<float> big = {1000.0f, 1000.0f, -1000.0f};
  const std::vector<float> q = softmax(big.data(), big.size());
  CHECK(q[0] == doctest::Approx(0.5));
  CHECK(q[2] == doctest::Approx(0.0));
}

TEST_CASE("probabilities are kept, logits go through softmax") {
  const std::vector<float> probs = {0.1f, 0.7f, 0.2f};
  CHECK(looks_like_probabilities(probs.data(), probs.size()));
  CHECK(to_probabilities(probs.data(), probs.size()) == probs);

  const std::vector<float> negative = {-0.5f, 1.0f, 0.5f};  // sums to 1 but is not a distribution
  CHECK_FALSE(looks_like_probabilities(negative.data(), negative.size()));
  const std::vector<float> logits = {2.0f, 1.0f, 0.5f};
  CHECK_FALSE(looks_like_probabilities(logits.data(), logits.size()));
  const std::vector<float> converted = to_probabilities(logits.data(), logits.size());
  CHECK(converted[0] + converted[1] + converted[2] == doctest::Approx(1));
  CHECK(converted[0] > converted[1]);
  const std::vector<float> nan = {NAN, 1.0f};
  CHECK_FALSE(looks_like_probabilities(nan.data(), nan.size()));
}

TEST_CASE("top-k: highest first, ties to the lower index, k clamped") {
  const std::vector<float> p = {0.1f, 0.4f, 0.1f, 0.4f};
  const std::vector<Prediction> best = top_k(p, 3);
  REQUIRE(best.size() == 3);
  CHECK(best[0].index == 1);
  CHECK(best[1].index == 3);
  CHECK(best[2].index == 0);
  CHECK(best[0].probability == doctest::Approx(0.4));
  CHECK(top_k(p, 10).size() == 4);
  CHECK(argmax(p.data(), p.size()) == 1);
}

TEST_CASE("labels from metadata or a file") {
  CHECK(split_labels("T-shirt/top, Trouser ,Pullover") == std::vector<std::string>{"T-shirt/top", "Trouser", "Pullover"});
  CHECK(split_labels("").empty());
  CHECK(label_of({"a", "b"}, 1) == "b");
  CHECK(label_of({"a", "b"}, 2) == "class 2");
  CHECK(model_labels({{"labels", "x,y"}}, "") == std::vector<std::string>{"x", "y"});
  CHECK(model_labels({}, "").empty());

  cnnrt::testing::ScratchDir dir("labels");
  const std::string lines = "cat\ndog\r\n\nbird\n";
  cnnrt::testing::write_file(dir.path() / "labels.txt", std::vector<uint8_t>(lines.begin(), lines.end()));
  CHECK(model_labels({{"labels", "x,y"}}, dir / "labels.txt") == std::vector<std::string>{"cat", "dog", "bird"});
  const std::string one_line = "red, green,blue\n";
  cnnrt::testing::write_file(dir.path() / "one.txt", std::vector<uint8_t>(one_line.begin(), one_line.end()));
  CHECK(read_labels_file(dir / "one.txt") == std::vector<std::string>{"red", "green", "blue"});
  CHECK_THROWS_AS(read_labels_file(dir / "missing.txt"), cnnrt::Error);
}

TEST_CASE("confusion matrix") {
  ConfusionMatrix m(3);
  m.add(0, 0);
  m.add(0, 0);
  m.add(1, 2);
  m.add(2, 2);
  CHECK(m.total() == 4);
  CHECK(m.correct() == 3);
  CHECK(m.at(1, 2) == 1);
  const std::string text = m.format({"zero", "one"});
  CHECK(text.find("rows: true class") != std::string::npos);
  CHECK(text.find("   zero    2   0   0  100.00%") != std::string::npos);
  CHECK(text.find("    one    0   0   1    0.00%") != std::string::npos);
  CHECK(text.find("class 2    0   0   1  100.00%") != std::string::npos);
}

TEST_CASE("progress bar line") {
  CHECK(ProgressBar::render("eval", 50, 100, 2.0, 10) == "eval [#####.....] 50/100 25/s");
  CHECK(ProgressBar::render("eval", 100, 100, 1.0, 4) == "eval [####] 100/100 100/s");
}
