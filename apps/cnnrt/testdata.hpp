// The ONNX test-data layout: a folder with input_K.pb / output_K.pb (serialized TensorProtos), or a folder
// of test_data_set_* folders; and the element-wise comparison `cnnrt run` and the conformance tests use.
#pragma once

#include <string>
#include <vector>

#include "cnnrt/cnnrt.hpp"

namespace cnnrt_cli {

struct DataSet {
  std::string dir;
  std::vector<cnnrt::Tensor> inputs;    // in the model's input order (matched by name when the files say)
  std::vector<cnnrt::Tensor> expected;  // output_K.pb, in the model's output order; may be empty
};

// `dir` itself when it holds input_*.pb files, else its test_data_set_* subfolders, sorted.
// Throws Usage when there are none.
std::vector<std::string> find_data_set_dirs(const std::string& dir);
DataSet read_data_set(const std::string& dir, const cnnrt::Model& model);

struct Comparison {
  bool shapes_match = true;
  double max_abs = 0;      // max |got - want|
  double max_rel = 0;      // max |got - want| / max(|want|, atol)
  int64_t mismatches = 0;  // elements with |got - want| > atol + rtol * |want| (NaN only matches NaN)
  int64_t first_bad = -1;
  bool ok() const { return shapes_match && mismatches == 0; }
};
Comparison compare(const cnnrt::Tensor& got, const cnnrt::Tensor& want, double rtol, double atol);

}  // namespace cnnrt_cli
