#include "serve/protocol.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <type_traits>

namespace cnnrt_serve {

namespace {

using nlohmann::json;

[[noreturn]] void bad_request(const std::string& message) { throw ProtocolError(400, message); }

std::string shape_text(const std::vector<int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ",")); }

// The protocol's datatypes that convert to float32 without changing a value.
enum class DataType { U8, U16, U32, U64, I8, I16, I32, I64, F16, BF16, F32, F64 };

struct DataTypeInfo {
  const char* name;
  DataType type;
  size_t bytes;
  bool json;  // may be sent as JSON numbers (FP16 and BF16 have no JSON form: binary only)
};

constexpr DataTypeInfo kDataTypes[] = {
    {"UINT8", DataType::U8, 1, true},  {"UINT16", DataType::U16, 2, true}, {"UINT32", DataType::U32, 4, true},
    {"UINT64", DataType::U64, 8, true}, {"INT8", DataType::I8, 1, true},   {"INT16", DataType::I16, 2, true},
    {"INT32", DataType::I32, 4, true},  {"INT64", DataType::I64, 8, true}, {"FP16", DataType::F16, 2, false},
    {"BF16", DataType::BF16, 2, false}, {"FP32", DataType::F32, 4, true},  {"FP64", DataType::F64, 8, true},
};

const DataTypeInfo& datatype_of(const std::string& input, const json& value) {
  if (!value.is_string()) bad_request(fmt::format("input '{}': 'datatype' must be a string such as \"FP32\"", input));
  const std::string name = value.get<std::string>();
  for (const DataTypeInfo& t : kDataTypes) {
    if (name == t.name) return t;
  }
  if (name == "BOOL" || name == "BYTES") {
    bad_request(fmt::format("input '{}': datatype {} cannot be converted to the model's FP32 input; send FP32 (or an "
                            "integer or FP16/FP64 type whose values float32 holds exactly)", input, name));
  }
  bad_request(fmt::format("input '{}': unknown datatype \"{}\" (the protocol's are BOOL, UINT8-64, INT8-64, FP16, "
                          "BF16, FP32, FP64, BYTES)", input, name));
}

// float32 holds `v` exactly (an integer, or a double that is a float).
template <class T>
bool to_float_exact(T v, float* out) {
  const float f = static_cast<float>(v);
  if constexpr (std::is_integral_v<T>) {
    // long double holds every 64-bit integer and every float exactly, so the comparison is exact.
    if (static_cast<long double>(f) != static_cast<long double>(v)) return false;
  } else {
    if (!std::isnan(v) && static_cast<double>(f) != v) return false;
  }
  *out = f;
  return true;
}

float half_to_float(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1u, exponent = (h >> 10) & 0x1Fu, mantissa = h & 0x3FFu;
  float magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);  // zero or subnormal
  } else if (exponent == 31) {
    magnitude = mantissa ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  } else {
    magnitude = std::ldexp(static_cast<float>(mantissa | 0x400u), static_cast<int>(exponent) - 25);
  }
  return sign ? -magnitude : magnitude;
}

template <class T>
T load_le(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));  // the host is little-endian, as the protocol's binary data is
  return v;
}

// One element of a JSON `data` array as float32, or a 400 naming it.
float json_element(const json& v, const DataTypeInfo& type, const std::string& input, size_t index) {
  const auto refuse = [&](const std::string& why) -> float {
    bad_request(fmt::format("input '{}': element {} ({}) {}", input, index, json_text(v), why));
  };
  if (!v.is_number()) return refuse(fmt::format("is not a number ({} data)", type.name));
  float f = 0;
  switch (type.type) {
    case DataType::F32: {
      f = static_cast<float>(v.get<double>());
      if (std::isinf(f)) refuse("is beyond the range of FP32");
      return f;
    }
    case DataType::F64:
      if (!to_float_exact(v.get<double>(), &f)) refuse("is not exactly a float32; send FP32 to have it rounded");
      return f;
    default:
      break;
  }
  if (!v.is_number_integer()) refuse(fmt::format("is not an integer ({} data)", type.name));
  // The integer's range for its datatype, then exactness in float32.
  int64_t lo = 0;
  uint64_t hi = 0;
  switch (type.type) {
    case DataType::U8: hi = 0xFF; break;
    case DataType::U16: hi = 0xFFFF; break;
    case DataType::U32: hi = 0xFFFFFFFFu; break;
    case DataType::U64: hi = std::numeric_limits<uint64_t>::max(); break;
    case DataType::I8: lo = -128, hi = 127; break;
    case DataType::I16: lo = -32768, hi = 32767; break;
    case DataType::I32: lo = std::numeric_limits<int32_t>::min(), hi = std::numeric_limits<int32_t>::max(); break;
    default: lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max(); break;
  }
  bool exact;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > hi) refuse(fmt::format("is beyond the range of {}", type.name));
    exact = to_float_exact(u, &f);
  } else {
    const int64_t i = v.get<int64_t>();
    if (i < lo || (i > 0 && static_cast<uint64_t>(i) > hi)) refuse(fmt::format("is beyond the range of {}", type.name));
    exact = to_float_exact(i, &f);
  }
  if (!exact) refuse("is not exactly representable as float32 (the model's input type)");
  return f;
}

// JSON `data`, flat (numel numbers) or nested as the shape says, into `out`.
void read_json_data(const json& data, const std::vector<int64_t>& shape, const DataTypeInfo& type,
                    const std::string& input, size_t numel, std::vector<float>& out) {
  if (!type.json) {
    bad_request(fmt::format("input '{}': {} data has no JSON form; send it as binary data (binary_data_size)", input,
                            type.name));
  }
  if (!data.is_array()) bad_request(fmt::format("input '{}': 'data' must be an array", input));
  out.reserve(numel);
  const bool nested = !data.empty() && data.front().is_array();
  if (!nested) {
    if (data.size() != numel) {
      bad_request(fmt::format("input '{}': 'data' holds {} values, but shape {} needs {}", input, data.size(),
                              shape_text(shape), numel));
    }
    for (const json& v : data) out.push_back(json_element(v, type, input, out.size()));
    return;
  }
  // Nested: each level an array of the next dimension's size, numbers at the innermost.
  std::vector<size_t> path;
  const auto walk = [&](const auto& self, const json& level, size_t dim) -> void {
    const bool innermost = dim + 1 == shape.size();
    if (dim >= shape.size() || !level.is_array() || level.size() != static_cast<size_t>(shape[dim])) {
      bad_request(fmt::format("input '{}': nested 'data' does not match shape {} at [{}] (expected {})", input,
                              shape_text(shape), fmt::join(path, "]["),
                              dim < shape.size() ? fmt::format("an array of {}", shape[dim]) : "a number"));
    }
    for (size_t i = 0; i < level.size(); ++i) {
      path.push_back(i);
      if (innermost) {
        if (level[i].is_array()) {
          bad_request(fmt::format("input '{}': nested 'data' is deeper than shape {} at [{}]", input,
                                  shape_text(shape), fmt::join(path, "][")));
        }
        out.push_back(json_element(level[i], type, input, out.size()));
      } else {
        self(self, level[i], dim + 1);
      }
      path.pop_back();
    }
  };
  walk(walk, data, 0);
}

template <class T>
void decode_integers(const unsigned char* p, size_t count, const std::string& input, const char* type,
                     std::vector<float>& out) {
  for (size_t i = 0; i < count; ++i) {
    const T v = load_le<T>(p + i * sizeof(T));
    float f;
    if (!to_float_exact(v, &f)) {
      bad_request(fmt::format("input '{}': element {} ({}) of the {} binary data is not exactly representable as "
                              "float32 (the model's input type)", input, i, +v, type));
    }
    out[i] = f;
  }
}

void read_binary_data(const unsigned char* p, size_t count, const DataTypeInfo& type, const std::string& input,
                      std::vector<float>& out) {
  out.resize(count);
  switch (type.type) {
    case DataType::F32: std::memcpy(out.data(), p, count * sizeof(float)); return;
    case DataType::F16:
      for (size_t i = 0; i < count; ++i) out[i] = half_to_float(load_le<uint16_t>(p + 2 * i));
      return;
    case DataType::BF16:
      for (size_t i = 0; i < count; ++i) {
        const uint32_t bits = uint32_t{load_le<uint16_t>(p + 2 * i)} << 16;  // bfloat16 is float32's top half
        std::memcpy(&out[i], &bits, sizeof(float));
      }
      return;
    case DataType::F64:
      for (size_t i = 0; i < count; ++i) {
        const double v = load_le<double>(p + 8 * i);
        if (!to_float_exact(v, &out[i])) {
          bad_request(fmt::format("input '{}': element {} ({}) of the FP64 binary data is not exactly a float32; send "
                                  "FP32", input, i, v));
        }
      }
      return;
    case DataType::U8: decode_integers<uint8_t>(p, count, input, type.name, out); return;
    case DataType::U16: decode_integers<uint16_t>(p, count, input, type.name, out); return;
    case DataType::U32: decode_integers<uint32_t>(p, count, input, type.name, out); return;
    case DataType::U64: decode_integers<uint64_t>(p, count, input, type.name, out); return;
    case DataType::I8: decode_integers<int8_t>(p, count, input, type.name, out); return;
    case DataType::I16: decode_integers<int16_t>(p, count, input, type.name, out); return;
    case DataType::I32: decode_integers<int32_t>(p, count, input, type.name, out); return;
    case DataType::I64: decode_integers<int64_t>(p, count, input, type.name, out); return;
  }
}

// The request's shape for `spec`: rank and every fixed dimension as the model declares, the batch within limits.
void check_shape(const ModelSpec& model, const TensorSpec& spec, const std::vector<int64_t>& shape) {
  const auto refuse = [&](const std::string& why) {
    bad_request(fmt::format("input '{}' has shape {}, but {} (the model's shape is {})", spec.name, shape_text(shape),
                            why, shape_text(spec.shape)));
  };
  if (shape.size() != spec.shape.size()) refuse(fmt::format("the model takes rank {}", spec.shape.size()));
  for (size_t d = 0; d < shape.size(); ++d) {
    if (d == 0 && model.batchable) continue;
    if (shape[d] != spec.shape[d]) refuse(fmt::format("dimension {} must be {}", d, spec.shape[d]));
  }
  if (!model.batchable) return;
  if (shape[0] < 1) refuse("dimension 0 (the batch) must be at least 1");
  if (shape[0] > model.max_batch) {
    refuse(fmt::format("its {} rows are more than this server runs at once ({}, --max-batch)", shape[0],
                       model.max_batch));
  }
}

std::vector<int64_t> shape_of(const std::string& input, const json& value) {
  if (!value.is_array()) bad_request(fmt::format("input '{}': 'shape' must be an array of integers", input));
  std::vector<int64_t> shape;
  for (const json& d : value) {
    if (!d.is_number_integer() || (d.is_number_unsigned() ? d.get<uint64_t>() > (1ull << 40) : d.get<int64_t>() < 0)) {
      bad_request(fmt::format("input '{}': 'shape' has {}, not a dimension size (an integer >= 0)", input, json_text(d)));
    }
    shape.push_back(d.get<int64_t>());
  }
  return shape;
}

// A parameter that must be a boolean when present.
bool bool_parameter(const json& parameters, const char* key, const std::string& where) {
  const auto it = parameters.find(key);
  if (it == parameters.end()) return false;
  if (!it->is_boolean()) bad_request(fmt::format("{}: parameter '{}' must be true or false", where, key));
  return it->get<bool>();
}

const json* parameters_of(const json& object, const std::string& where) {
  const auto it = object.find("parameters");
  if (it == object.end() || it->is_null()) return nullptr;
  if (!it->is_object()) bad_request(fmt::format("{}: 'parameters' must be an object", where));
  return &*it;
}

std::string required_string(const json& object, const char* key, const std::string& where) {
  const auto it = object.find(key);
  if (it == object.end()) bad_request(fmt::format("{} has no '{}'", where, key));
  if (!it->is_string()) bad_request(fmt::format("{}: '{}' must be a string", where, key));
  return it->get<std::string>();
}

std::string names_of(const std::vector<TensorSpec>& tensors) {
  std::vector<std::string> names;
  for (const TensorSpec& t : tensors) names.push_back("'" + t.name + "'");
  return fmt::format("{}", fmt::join(names, ", "));
}

void append_float(std::string& out, float v) {
  if (std::isfinite(v)) {
    fmt::format_to(std::back_inserter(out), "{}", v);  // the shortest text that reads back as this float
  } else {
    out += "null";
  }
}

}  // namespace

int http_status_for(cnnrt::ErrorCode code) {
  switch (code) {
    case cnnrt::ErrorCode::Usage:
    case cnnrt::ErrorCode::InvalidInput:
    case cnnrt::ErrorCode::Unsupported: return 400;
    case cnnrt::ErrorCode::LimitExceeded: return 413;
    case cnnrt::ErrorCode::DeviceUnavailable: return 503;
    default: return 500;
  }
}

size_t parse_header_length(const std::string& value) {
  if (value.empty() || value.size() > 18 || value.find_first_not_of("0123456789") != std::string::npos) {
    bad_request(fmt::format("Inference-Header-Content-Length is \"{}\", not a byte count", value));
  }
  return static_cast<size_t>(std::stoull(value));
}

InferRequest parse_infer_request(const ModelSpec& model, std::string_view body, std::optional<size_t> json_length) {
  if (json_length && *json_length > body.size()) {
    bad_request(fmt::format("Inference-Header-Content-Length is {} bytes, but the body has only {}", *json_length,
                            body.size()));
  }
  const std::string_view json_text = json_length ? body.substr(0, *json_length) : body;
  std::string_view binary = json_length ? body.substr(*json_length) : std::string_view();

  // A zero byte ends nlohmann's input early; in JSON text it can only be binary data sent without the header.
  if (const size_t zero = json_text.find('\0'); zero != std::string_view::npos) {
    bad_request(fmt::format("malformed JSON in the request: a zero byte at offset {} (binary tensor data needs the "
                            "Inference-Header-Content-Length header)", zero));
  }
  json root;
  try {
    root = json::parse(json_text.begin(), json_text.end());
  } catch (const json::parse_error& e) {
    bad_request(fmt::format("malformed JSON in the request{}: {}",
                            json_length ? " header (Inference-Header-Content-Length)" : "", e.what()));
  }
  if (!root.is_object()) bad_request("the request must be a JSON object with 'inputs'");

  InferRequest request;
  if (const auto it = root.find("id"); it != root.end()) {
    if (!it->is_string()) bad_request("'id' must be a string");
    request.id = it->get<std::string>();
  }
  bool all_binary = false;
  if (const json* parameters = parameters_of(root, "the request")) {
    all_binary = bool_parameter(*parameters, "binary_data_output", "the request");
    if (parameters->contains("classification")) bad_request("the classification extension is not supported");
  }

  const auto inputs = root.find("inputs");
  if (inputs == root.end() || !inputs->is_array()) bad_request("the request has no 'inputs' array");
  request.inputs.resize(model.inputs.size());
  request.shapes.resize(model.inputs.size());
  std::vector<bool> seen(model.inputs.size(), false);
  std::optional<int64_t> rows;
  std::string rows_from;
  for (const json& input : *inputs) {
    if (!input.is_object()) bad_request("each of 'inputs' must be an object with name, shape, datatype and data");
    const std::string name = required_string(input, "name", "an input");
    size_t index = 0;
    while (index < model.inputs.size() && model.inputs[index].name != name) ++index;
    if (index == model.inputs.size()) {
      bad_request(fmt::format("model '{}' has no input '{}' (its inputs: {})", model.name, name, names_of(model.inputs)));
    }
    if (seen[index]) bad_request(fmt::format("input '{}' is given twice", name));
    seen[index] = true;
    const TensorSpec& spec = model.inputs[index];

    if (!input.contains("shape")) bad_request(fmt::format("input '{}' has no 'shape'", name));
    if (!input.contains("datatype")) bad_request(fmt::format("input '{}' has no 'datatype'", name));
    const std::vector<int64_t> shape = shape_of(name, input["shape"]);
    const DataTypeInfo& type = datatype_of(name, input["datatype"]);
    check_shape(model, spec, shape);
    if (model.batchable) {
      if (rows && *rows != shape[0]) {
        bad_request(fmt::format("inputs '{}' and '{}' have {} and {} rows; every input of a request needs the same "
                                "dimension 0", rows_from, name, *rows, shape[0]));
      }
      rows = shape[0];
      rows_from = name;
    }
    size_t numel = 1;
    for (int64_t d : shape) numel *= static_cast<size_t>(d);  // bounded: checked against the model above

    std::optional<int64_t> binary_size;
    if (const json* parameters = parameters_of(input, fmt::format("input '{}'", name))) {
      if (const auto it = parameters->find("binary_data_size"); it != parameters->end()) {
        if (!it->is_number_integer() || (!it->is_number_unsigned() && it->get<int64_t>() < 0)) {
          bad_request(fmt::format("input '{}': binary_data_size must be a byte count", name));
        }
        binary_size = it->get<int64_t>();
      }
    }
    const bool has_data = input.contains("data");
    if (binary_size && has_data) bad_request(fmt::format("input '{}' has both 'data' and binary_data_size", name));
    if (!binary_size && !has_data) bad_request(fmt::format("input '{}' has neither 'data' nor binary_data_size", name));
    if (has_data) {
      read_json_data(input["data"], shape, type, name, numel, request.inputs[index]);
    } else {
      if (!json_length) {
        bad_request(fmt::format("input '{}' has binary_data_size, but the request has no "
                                "Inference-Header-Content-Length header to say where its binary data starts", name));
      }
      const size_t expected = numel * type.bytes;
      if (static_cast<uint64_t>(*binary_size) != expected) {
        bad_request(fmt::format("input '{}': binary_data_size is {} bytes, but {} {} needs {}", name, *binary_size,
                                type.name, shape_text(shape), expected));
      }
      if (binary.size() < expected) {
        bad_request(fmt::format("input '{}': its {} bytes of binary data are not all there (the body has {} left)",
                                name, expected, binary.size()));
      }
      read_binary_data(reinterpret_cast<const unsigned char*>(binary.data()), numel, type, name,
                       request.inputs[index]);
      binary.remove_prefix(expected);
    }
    request.shapes[index] = shape;
  }
  for (size_t i = 0; i < model.inputs.size(); ++i) {
    if (!seen[i]) bad_request(fmt::format("input '{}' is missing (model '{}' takes {})", model.inputs[i].name,
                                          model.name, names_of(model.inputs)));
  }
  if (!binary.empty()) {
    bad_request(fmt::format("{} bytes of binary data follow the last binary input (binary_data_size and "
                            "Inference-Header-Content-Length do not add up to the body)", binary.size()));
  }
  request.rows = rows.value_or(1);

  const auto outputs = root.find("outputs");
  if (outputs == root.end() || outputs->is_null()) {
    for (size_t i = 0; i < model.outputs.size(); ++i) request.outputs.push_back({static_cast<int>(i), all_binary});
    return request;
  }
  if (!outputs->is_array()) bad_request("'outputs' must be an array");
  std::vector<bool> listed(model.outputs.size(), false);
  for (const json& output : *outputs) {
    if (!output.is_object()) bad_request("each of 'outputs' must be an object with a name");
    const std::string name = required_string(output, "name", "an output");
    size_t index = 0;
    while (index < model.outputs.size() && model.outputs[index].name != name) ++index;
    if (index == model.outputs.size()) {
      bad_request(fmt::format("model '{}' has no output '{}' (its outputs: {})", model.name, name,
                              names_of(model.outputs)));
    }
    if (listed[index]) bad_request(fmt::format("output '{}' is asked for twice", name));
    listed[index] = true;
    bool binary_out = all_binary;
    if (const json* parameters = parameters_of(output, fmt::format("output '{}'", name))) {
      if (parameters->contains("classification")) bad_request("the classification extension is not supported");
      if (parameters->contains("binary_data")) {
        binary_out = bool_parameter(*parameters, "binary_data", fmt::format("output '{}'", name));
      }
    }
    request.outputs.push_back({static_cast<int>(index), binary_out});
  }
  return request;
}

EncodedResponse encode_infer_response(const ModelSpec& model, const InferRequest& request,
                                      const std::vector<cnnrt::Tensor>& outputs) {
  EncodedResponse response;
  std::string& text = response.body;
  std::string binary;
  text.reserve(256);
  text += "{\"model_name\":";
  text += json_text(model.name);
  text += ",\"model_version\":\"1\"";
  if (request.id) {
    text += ",\"id\":";
    text += json_text(*request.id);
  }
  text += ",\"outputs\":[";
  for (size_t k = 0; k < request.outputs.size(); ++k) {
    const InferRequest::Output& want = request.outputs[k];
    const cnnrt::Tensor& t = outputs.at(static_cast<size_t>(want.index));
    if (k > 0) text += ',';
    text += "{\"name\":";
    text += json_text(model.outputs[static_cast<size_t>(want.index)].name);
    text += ",\"datatype\":\"FP32\",\"shape\":";
    text += shape_text(t.shape);
    if (want.binary) {
      const size_t bytes = t.data.size() * sizeof(float);
      fmt::format_to(std::back_inserter(text), ",\"parameters\":{{\"binary_data_size\":{}}}}}", bytes);
      binary.append(reinterpret_cast<const char*>(t.data.data()), bytes);
    } else {
      text.reserve(text.size() + t.data.size() * 12);
      text += ",\"data\":[";
      for (size_t i = 0; i < t.data.size(); ++i) {
        if (i > 0) text += ',';
        append_float(text, t.data[i]);
      }
      text += "]}";
    }
  }
  text += "]}";
  bool any_binary = false;
  for (const InferRequest::Output& o : request.outputs) any_binary = any_binary || o.binary;
  if (any_binary) {
    response.json_length = text.size();
    text += binary;
    response.content_type = "application/octet-stream";
  } else {
    response.content_type = "application/json";
  }
  return response;
}

nlohmann::json model_metadata(const ModelSpec& model) {
  const auto tensors = [](const std::vector<TensorSpec>& specs) {
    json list = json::array();
    for (const TensorSpec& t : specs) list.push_back({{"name", t.name}, {"datatype", "FP32"}, {"shape", t.shape}});
    return list;
  };
  return {{"name", model.name},
          {"versions", {"1"}},
          {"platform", "onnx_cnnrt"},
          {"inputs", tensors(model.inputs)},
          {"outputs", tensors(model.outputs)}};
}

std::string json_text(const json& value) {
  // A message may quote the bytes of a malformed request: invalid UTF-8 becomes U+FFFD instead of an exception.
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

void say(std::FILE* stream, const std::string& text) noexcept {
  std::fputs(text.c_str(), stream);
  std::fflush(stream);
}

std::string error_body(const std::string& message) { return json_text(json{{"error", message}}); }

}  // namespace cnnrt_serve
