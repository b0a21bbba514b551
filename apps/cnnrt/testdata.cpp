#include "testdata.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>

namespace cnnrt_cli {

namespace fs = std::filesystem;

namespace {

// input_0.pb, input_1.pb, ... in numeric order (input_10 after input_9).
std::vector<std::string> numbered_files(const std::string& dir, const std::string& prefix) {
  std::vector<std::pair<int, std::string>> found;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0 || entry.path().extension() != ".pb") continue;
    const std::string number = name.substr(prefix.size(), name.size() - prefix.size() - 3);
    if (number.empty() || !std::all_of(number.begin(), number.end(), ::isdigit)) continue;
    found.emplace_back(std::stoi(number), entry.path().string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> paths;
  for (auto& f : found) paths.push_back(f.second);
  return paths;
}

std::vector<cnnrt::Tensor> read_in_model_order(const std::vector<std::string>& files,
                                               const std::vector<cnnrt::TensorDesc>& descs, const char* what) {
  if (files.size() != descs.size()) {
    throw cnnrt::Error(cnnrt::ErrorCode::InvalidInput,
                       "test data has " + std::to_string(files.size()) + " " + what + " files, the model has " +
                           std::to_string(descs.size()) + " " + what + "s");
  }
  std::vector<cnnrt::Tensor> tensors(descs.size());
  std::vector<bool> filled(descs.size(), false);
  for (size_t k = 0; k < files.size(); ++k) {
    std::string name;
    cnnrt::Tensor t = cnnrt::read_tensor_file(files[k], &name);
    size_t slot = k;  // position, unless the file names one of the model's tensors
    for (size_t i = 0; i < descs.size(); ++i) {
      if (!name.empty() && descs[i].name == name) slot = i;
    }
    if (filled[slot]) slot = k;
    tensors[slot] = std::move(t);
    filled[slot] = true;
  }
  return tensors;
}

}  // namespace

std::vector<std::string> find_data_set_dirs(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw cnnrt::Error(cnnrt::ErrorCode::Usage, "--test-data '" + dir + "' is not a directory");
  }
  if (!numbered_files(dir, "input_").empty()) return {dir};
  std::vector<std::string> sets;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_directory() && entry.path().filename().string().rfind("test_data_set_", 0) == 0) {
      sets.push_back(entry.path().string());
    }
  }
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) {
    throw cnnrt::Error(cnnrt::ErrorCode::Usage,
                       "'" + dir + "' has neither input_*.pb files nor test_data_set_* folders");
  }
  return sets;
}

DataSet read_data_set(const std::string& dir, const cnnrt::Model& model) {
  DataSet set;
  set.dir = dir;
  set.inputs = read_in_model_order(numbered_files(dir, "input_"), model.inputs(), "input");
  const auto outputs = numbered_files(dir, "output_");
  if (!outputs.empty()) set.expected = read_in_model_order(outputs, model.outputs(), "output");
  return set;
}

Comparison compare(const cnnrt::Tensor& got, const cnnrt::Tensor& want, double rtol, double atol) {
  Comparison c;
  // Shapes must agree up to leading ones (a scalar and a [1] tensor hold the same value).
  auto squeezed = [](std::vector<int64_t> s) {
    s.erase(std::remove(s.begin(), s.end(), 1), s.end());
    return s;
  };
  if (squeezed(got.shape) != squeezed(want.shape) || got.data.size() != want.data.size()) {
    c.shapes_match = false;
    return c;
  }
  for (size_t i = 0; i < got.data.size(); ++i) {
    const double g = got.data[i], w = want.data[i];
    bool bad;
    if (std::isnan(w) || std::isnan(g)) {
      bad = std::isnan(w) != std::isnan(g);
    } else if (std::isinf(w) || std::isinf(g)) {
      bad = g != w;
    } else {
      const double diff = std::fabs(g - w);
      c.max_abs = std::max(c.max_abs, diff);
      c.max_rel = std::max(c.max_rel, diff / std::max(std::fabs(w), atol));
      bad = diff > atol + rtol * std::fabs(w);
    }
    if (bad) {
      if (c.first_bad < 0) c.first_bad = static_cast<int64_t>(i);
      ++c.mismatches;
    }
  }
  return c;
}

}  // namespace cnnrt_cli
