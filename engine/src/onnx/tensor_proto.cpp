#include "onnx/tensor_proto.hpp"

#include <onnx/onnx_pb.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/error.hpp"

namespace cnnrt::onnx_io {

namespace fs = std::filesystem;
using ir::DType;
using ir::HostTensor;
using ir::Shape;

namespace {

// Bytes per element as ONNX stores the type in raw_data; 0 for types we cannot read at all.
int64_t stored_element_bytes(DType dtype) {
  switch (dtype) {
    case DType::Float32:
    case DType::Int32:
    case DType::UInt32: return 4;
    case DType::Int64:
    case DType::UInt64:
    case DType::Float64: return 8;
    case DType::Int16:
    case DType::UInt16:
    case DType::Float16:
    case DType::BFloat16: return 2;
    case DType::Int8:
    case DType::UInt8:
    case DType::Bool: return 1;
    default: return 0;
  }
}

bool widens_to_int64(DType dtype) {
  switch (dtype) {
    case DType::Int64:
    case DType::Int32:
    case DType::Int16:
    case DType::Int8:
    case DType::UInt32:
    case DType::UInt16:
    case DType::UInt8:
    case DType::Bool: return true;
    default: return false;
  }
}

// Little-endian load of one stored element as int64 (x86-64 and AArch64 are little-endian).
int64_t load_integer(const char* p, DType dtype) {
  switch (dtype) {
    case DType::Int64: { int64_t v; std::memcpy(&v, p, 8); return v; }
    case DType::Int32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case DType::UInt32: { uint32_t v; std::memcpy(&v, p, 4); return v; }
    case DType::Int16: { int16_t v; std::memcpy(&v, p, 2); return v; }
    case DType::UInt16: { uint16_t v; std::memcpy(&v, p, 2); return v; }
    case DType::Int8: return static_cast<int8_t>(*p);
    case DType::UInt8: return static_cast<uint8_t>(*p);
    case DType::Bool: return *p != 0 ? 1 : 0;
    default: return 0;
  }
}

Shape checked_dims(const onnx::TensorProto& proto, const std::string& what) {
  Shape dims(proto.dims().begin(), proto.dims().end());
  for (int64_t d : dims) {
    CNNRT_CHECK(d >= 0, ErrorCode::InvalidModel, "{} has a negative dimension {} (dims {})", what, d,
                fmt::join(dims, "x"));
  }
  try {
    ir::numel(dims);
  } catch (const Error&) {
    fail(ErrorCode::InvalidModel, "{} has dims {} whose element count overflows int64", what, fmt::join(dims, "x"));
  }
  return dims;
}

// Resolves an external-data location inside the model's folder; rejects absolute paths and "..".
std::string external_path(const std::string& location, const TensorSource& source) {
  CNNRT_CHECK(!source.model_dir.empty(), ErrorCode::Unsupported,
              "{} keeps its data in an external file ('{}'); load the model from its file, not from memory, "
              "so the file can be found", source.what, location);
  const fs::path rel(location);
  CNNRT_CHECK(!location.empty() && rel.is_relative(), ErrorCode::InvalidModel,
              "{}: external data location '{}' must be a relative path inside the model's folder", source.what,
              location);
  for (const auto& part : rel) {
    CNNRT_CHECK(part != "..", ErrorCode::InvalidModel,
                "{}: external data location '{}' leaves the model's folder ('..' is not allowed)", source.what,
                location);
  }
  // A symbolic link inside the folder may still point out of it: compare the resolved paths too.
  const fs::path full = fs::path(source.model_dir) / rel;
  std::error_code ec;
  const fs::path dir_real = fs::weakly_canonical(fs::path(source.model_dir), ec);
  const fs::path full_real = ec ? fs::path() : fs::weakly_canonical(full, ec);
  CNNRT_CHECK(!ec, ErrorCode::InvalidModel, "{}: cannot resolve external data location '{}': {}", source.what,
              location, ec.message());
  auto d = dir_real.begin();
  auto f = full_real.begin();
  for (; d != dir_real.end() && f != full_real.end() && *d == *f; ++d, ++f) {
  }
  CNNRT_CHECK(d == dir_real.end(), ErrorCode::InvalidModel,
              "{}: external data location '{}' resolves to '{}', outside the model's folder '{}' (through a "
              "symbolic link)", source.what, location, full_real.string(), dir_real.string());
  return full.string();
}

std::string read_external(const onnx::TensorProto& proto, const TensorSource& source, int64_t expected_bytes) {
  std::string location;
  int64_t offset = 0;
  int64_t length = -1;
  for (const auto& kv : proto.external_data()) {
    try {
      if (kv.key() == "location") location = kv.value();
      if (kv.key() == "offset") offset = std::stoll(kv.value());
      if (kv.key() == "length") length = std::stoll(kv.value());
    } catch (const std::exception&) {
      fail(ErrorCode::InvalidModel, "{}: external data '{}' is not a number ('{}')", source.what, kv.key(),
           kv.value());
    }
  }
  const std::string path = external_path(location, source);
  CNNRT_CHECK(offset >= 0, ErrorCode::InvalidModel, "{}: negative external data offset {}", source.what, offset);
  if (length < 0) length = expected_bytes;
  CNNRT_CHECK(length == expected_bytes, ErrorCode::InvalidModel,
              "{}: external data length {} does not match its dims ({} bytes)", source.what, length, expected_bytes);
  std::error_code ec;
  const auto file_size = fs::file_size(path, ec);
  CNNRT_CHECK(!ec, ErrorCode::InvalidModel, "{}: cannot read external data file '{}': {}", source.what, path,
              ec.message());
  CNNRT_CHECK(static_cast<uint64_t>(offset) + static_cast<uint64_t>(length) <= file_size, ErrorCode::InvalidModel,
              "{}: external data file '{}' has {} bytes, but offset {} + length {} reach past its end", source.what,
              path, file_size, offset, length);
  std::ifstream in(path, std::ios::binary);
  std::string bytes(static_cast<size_t>(length), '\0');
  in.seekg(offset);
  in.read(bytes.data(), length);
  CNNRT_CHECK(in.good() || length == 0, ErrorCode::Io, "{}: reading external data file '{}' failed", source.what,
              path);
  return bytes;
}

}  // namespace

DType tensor_dtype(const onnx::TensorProto& proto) { return static_cast<DType>(proto.data_type()); }

HostTensor decode_tensor(const onnx::TensorProto& proto, const TensorSource& source) {
  const std::string& what = source.what;
  const DType stored = tensor_dtype(proto);
  const Shape dims = checked_dims(proto, what);
  const int64_t count = ir::numel(dims);
  CNNRT_CHECK(!proto.has_segment(), ErrorCode::Unsupported, "{} is a segment of a larger tensor (unsupported)", what);
  CNNRT_CHECK(stored == DType::Float32 || widens_to_int64(stored), ErrorCode::Unsupported,
              "{} has type {}; cnnrt reads float32 tensors and integer/bool tensors (as int64)", what,
              ir::dtype_name(stored));
  const int64_t elem = stored_element_bytes(stored);
  CNNRT_CHECK(count <= std::numeric_limits<int64_t>::max() / 8, ErrorCode::InvalidModel,
              "{} declares {} elements, too many to address", what, count);
  const int64_t stored_bytes = count * elem;
  const int64_t host_bytes = count * (stored == DType::Float32 ? 4 : 8);

  // Where the data is, and how much of it there is, before allocating anything.
  const bool external = proto.data_location() == onnx::TensorProto::EXTERNAL;
  std::string external_bytes;
  const std::string* raw = nullptr;
  int64_t typed_count = -1;
  if (external) {
    CNNRT_CHECK(host_bytes <= source.max_bytes, ErrorCode::LimitExceeded,
                "{} needs {} bytes, over the weight limit of {} bytes (Limits::max_weight_bytes; raise it with "
                "--max-weight-bytes)", what,
                host_bytes, source.max_bytes);
    external_bytes = read_external(proto, source, stored_bytes);
    raw = &external_bytes;
  } else if (proto.has_raw_data()) {
    raw = &proto.raw_data();
  } else if (stored == DType::Float32) {
    typed_count = proto.float_data_size();
  } else if (stored == DType::Int64) {
    typed_count = proto.int64_data_size();
  } else if (stored == DType::UInt32) {
    typed_count = proto.uint64_data_size();
  } else {
    typed_count = proto.int32_data_size();
  }
  if (raw) {
    CNNRT_CHECK(static_cast<int64_t>(raw->size()) == stored_bytes, ErrorCode::InvalidModel,
                "{} holds {} bytes of data, but dims {} of {} need {}", what, raw->size(), ir::shape_str(dims),
                ir::dtype_name(stored), stored_bytes);
  } else {
    CNNRT_CHECK(typed_count == count, ErrorCode::InvalidModel,
                "{} holds {} values, but dims {} need {}", what, typed_count, ir::shape_str(dims), count);
  }
  CNNRT_CHECK(host_bytes <= source.max_bytes, ErrorCode::LimitExceeded,
              "{} needs {} bytes, over the weight limit of {} bytes (Limits::max_weight_bytes; raise it with "
                "--max-weight-bytes)", what, host_bytes,
              source.max_bytes);

  if (stored == DType::Float32) {
    std::vector<float> values(static_cast<size_t>(count));
    if (raw) {
      if (stored_bytes > 0) std::memcpy(values.data(), raw->data(), static_cast<size_t>(stored_bytes));
    } else {
      std::copy(proto.float_data().begin(), proto.float_data().end(), values.begin());
    }
    return HostTensor::floats(dims, std::move(values));
  }
  std::vector<int64_t> values(static_cast<size_t>(count));
  if (raw) {
    for (int64_t i = 0; i < count; ++i) values[i] = load_integer(raw->data() + i * elem, stored);
  } else if (stored == DType::Int64) {
    std::copy(proto.int64_data().begin(), proto.int64_data().end(), values.begin());
  } else if (stored == DType::UInt32) {
    std::copy(proto.uint64_data().begin(), proto.uint64_data().end(), values.begin());
  } else {
    for (int64_t i = 0; i < count; ++i) {
      const int32_t v = proto.int32_data(static_cast<int>(i));
      values[i] = stored == DType::Bool ? (v != 0) : v;
    }
  }
  return HostTensor::ints(dims, std::move(values));
}

HostTensor read_tensor_file(const std::string& path, std::string* name) {
  std::ifstream in(path, std::ios::binary);
  CNNRT_CHECK(in.good(), ErrorCode::Io, "cannot open tensor file '{}'", path);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  onnx::TensorProto proto;
  CNNRT_CHECK(!bytes.empty() && proto.ParseFromString(bytes), ErrorCode::InvalidInput,
              "'{}' is not a serialized ONNX TensorProto", path);
  if (name) *name = proto.name();
  TensorSource source;
  source.what = fmt::format("tensor file '{}'", path);
  source.model_dir = fs::path(path).parent_path().string();
  try {
    return decode_tensor(proto, source);
  } catch (const Error& e) {
    // A bad tensor file is bad input, not a bad model.
    throw Error(e.code() == ErrorCode::InvalidModel ? ErrorCode::InvalidInput : e.code(), e.what());
  }
}

void write_tensor_file(const std::string& path, const HostTensor& tensor, const std::string& name) {
  onnx::TensorProto proto;
  proto.set_name(name);
  for (int64_t d : tensor.shape()) proto.add_dims(d);
  if (tensor.dtype() == DType::Float32) {
    proto.set_data_type(onnx::TensorProto::FLOAT);
    proto.set_raw_data(tensor.f32(), static_cast<size_t>(tensor.numel()) * sizeof(float));
  } else {
    proto.set_data_type(onnx::TensorProto::INT64);
    proto.set_raw_data(tensor.i64(), static_cast<size_t>(tensor.numel()) * sizeof(int64_t));
  }
  std::ofstream out(path, std::ios::binary);
  CNNRT_CHECK(out.good() && proto.SerializeToOstream(&out), ErrorCode::Io, "cannot write tensor file '{}'", path);
}

}  // namespace cnnrt::onnx_io
