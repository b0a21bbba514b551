#include "classify.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <numeric>

#include "cnnrt/cnnrt.hpp"

namespace cnnrt_cli {

namespace {

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

}  // namespace

bool looks_like_probabilities(const float* scores, size_t count, float tolerance) {
  double sum = 0;
  for (size_t i = 0; i < count; ++i) {
    if (!(scores[i] >= 0.0f)) return false;  // also refuses NaN
    sum += scores[i];
  }
  return count > 0 && std::abs(sum - 1.0) <= tolerance;
}

std::vector<float> softmax(const float* scores, size_t count) {
  std::vector<float> out(count);
  if (count == 0) return out;
  const float max = *std::max_element(scores, scores + count);
  double sum = 0;
  for (size_t i = 0; i < count; ++i) {
    out[i] = std::exp(scores[i] - max);
    sum += out[i];
  }
  for (float& v : out) v = static_cast<float>(v / sum);
  return out;
}

std::vector<float> to_probabilities(const float* scores, size_t count) {
  if (looks_like_probabilities(scores, count)) return std::vector<float>(scores, scores + count);
  return softmax(scores, count);
}

std::vector<Prediction> top_k(const std::vector<float>& probabilities, int64_t k) {
  std::vector<int64_t> order(probabilities.size());
  std::iota(order.begin(), order.end(), 0);
  k = std::clamp<int64_t>(k, 0, static_cast<int64_t>(order.size()));
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
    return probabilities[size_t(a)] > probabilities[size_t(b)] ||
           (probabilities[size_t(a)] == probabilities[size_t(b)] && a < b);
  });
  std::vector<Prediction> best;
  for (int64_t i = 0; i < k; ++i) best.push_back({order[size_t(i)], probabilities[size_t(order[size_t(i)])]});
  return best;
}

int64_t argmax(const float* scores, size_t count) {
  return static_cast<int64_t>(std::max_element(scores, scores + count) - scores);
}

std::vector<std::string> split_labels(const std::string& comma_separated) {
  std::vector<std::string> labels;
  if (trim(comma_separated).empty()) return labels;
  size_t start = 0;
  while (true) {
    const size_t comma = comma_separated.find(',', start);
    labels.push_back(trim(comma_separated.substr(start, comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return labels;
}

std::vector<std::string> read_labels_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    throw cnnrt::Error(cnnrt::ErrorCode::Io, fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  }
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!trim(line).empty()) lines.push_back(trim(line));
  }
  if (lines.size() == 1 && lines[0].find(',') != std::string::npos) return split_labels(lines[0]);
  if (lines.empty()) throw cnnrt::Error(cnnrt::ErrorCode::InvalidInput, path + ": no labels in the file");
  return lines;
}

std::vector<std::string> model_labels(const std::map<std::string, std::string>& metadata,
                                      const std::string& labels_file) {
  if (!labels_file.empty()) return read_labels_file(labels_file);
  const auto it = metadata.find("labels");
  return it == metadata.end() ? std::vector<std::string>{} : split_labels(it->second);
}

std::string label_of(const std::vector<std::string>& labels, int64_t index) {
  if (index >= 0 && static_cast<size_t>(index) < labels.size() && !labels[size_t(index)].empty()) {
    return labels[size_t(index)];
  }
  return fmt::format("class {}", index);
}

int64_t ConfusionMatrix::total() const { return std::accumulate(counts.begin(), counts.end(), int64_t(0)); }

int64_t ConfusionMatrix::correct() const {
  int64_t n = 0;
  for (int64_t c = 0; c < classes; ++c) n += at(c, c);
  return n;
}

std::string ConfusionMatrix::format(const std::vector<std::string>& labels) const {
  size_t name_width = 5;  // "class"
  for (int64_t c = 0; c < classes; ++c) name_width = std::max(name_width, label_of(labels, c).size());
  size_t cell = 3;
  for (int64_t n : counts) cell = std::max(cell, std::to_string(n).size());
  std::string out = fmt::format("confusion matrix (rows: true class, columns: predicted class)\n{:>{}} ", "", name_width);
  for (int64_t c = 0; c < classes; ++c) out += fmt::format(" {:>{}}", c, cell);
  out += "  recall\n";
  for (int64_t t = 0; t < classes; ++t) {
    out += fmt::format("{:>{}} ", label_of(labels, t), name_width);
    int64_t row = 0;
    for (int64_t p = 0; p < classes; ++p) {
      out += fmt::format(" {:>{}}", at(t, p), cell);
      row += at(t, p);
    }
    out += row > 0 ? fmt::format("  {:6.2f}%\n", 100.0 * double(at(t, t)) / double(row)) : "       -\n";
  }
  return out;
}

}  // namespace cnnrt_cli
