// Classifier outputs to answers: probabilities (softmax unless the model already emits them), top-k,
// class labels, and the confusion matrix `cnnrt eval` prints.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace cnnrt_cli {

// True when every score is >= 0 and they sum to 1 within `tolerance`: the model ends in a softmax.
bool looks_like_probabilities(const float* scores, size_t count, float tolerance = 1e-3f);
// exp(s - max) / sum, stable for large logits.
std::vector<float> softmax(const float* scores, size_t count);
// The scores as they are when they already are probabilities, else their softmax.
std::vector<float> to_probabilities(const float* scores, size_t count);

struct Prediction {
  int64_t index = 0;
  float probability = 0;
};
// The k highest, highest first; ties go to the lower index. k is clamped to the number of classes.
std::vector<Prediction> top_k(const std::vector<float>& probabilities, int64_t k);
int64_t argmax(const float* scores, size_t count);

// Class names: from a comma-separated list (the `labels` metadata) or a file with one name per line (or
// one comma-separated line). Names are trimmed.
std::vector<std::string> split_labels(const std::string& comma_separated);
std::vector<std::string> read_labels_file(const std::string& path);
// The labels for a model: the file when given, else the model's `labels` metadata, else none.
std::vector<std::string> model_labels(const std::map<std::string, std::string>& metadata,
                                      const std::string& labels_file);
// labels[index], or "class <index>" when there is no such label.
std::string label_of(const std::vector<std::string>& labels, int64_t index);

// counts[truth * classes + predicted].
struct ConfusionMatrix {
  explicit ConfusionMatrix(int64_t class_count) : classes(class_count), counts(size_t(class_count * class_count), 0) {}
  void add(int64_t truth, int64_t predicted) { ++counts[size_t(truth * classes + predicted)]; }
  int64_t at(int64_t truth, int64_t predicted) const { return counts[size_t(truth * classes + predicted)]; }
  int64_t total() const;
  int64_t correct() const;
  // Rows are true classes, columns predicted ones; a row per class with its recall.
  std::string format(const std::vector<std::string>& labels) const;

  int64_t classes;
  std::vector<int64_t> counts;
};

}  // namespace cnnrt_cli
