// IDX files (the MNIST / Fashion-MNIST format), gzipped or not.
//
// Layout: 2 zero bytes, a type byte, a rank byte, then `rank` big-endian uint32 dimensions, then the
// values in row-major order, big-endian. Types: 0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32,
// 0x0D float32, 0x0E float64.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cnnrt_cli {

enum class IdxType : uint8_t { U8 = 0x08, I8 = 0x09, I16 = 0x0B, I32 = 0x0C, F32 = 0x0D, F64 = 0x0E };
const char* to_string(IdxType type);

struct IdxArray {
  IdxType type = IdxType::U8;
  std::vector<int64_t> dims;
  std::vector<float> values;  // converted from `type`

  int64_t count() const;  // product of dims
};

// Refuses data beyond this many (decompressed) bytes, so a hostile header or gzip bomb cannot exhaust memory.
constexpr int64_t kMaxIdxBytes = int64_t(2) << 30;

// Parses IDX bytes; throws cnnrt::Error (InvalidInput) naming `name` for a bad magic, an unknown type, a
// rank of 0, or a size that does not match the header (truncated or with trailing bytes).
IdxArray parse_idx(const std::vector<uint8_t>& bytes, const std::string& name);
// Reads a file (gzip is detected by its magic and decompressed) and parses it. Io for an unreadable file,
// InvalidInput for a truncated or corrupt gzip stream.
IdxArray read_idx(const std::string& path);

// The inverse, for tests and tools: IDX bytes of the given type (values are converted).
std::vector<uint8_t> encode_idx(IdxType type, const std::vector<int64_t>& dims, const std::vector<float>& values);

}  // namespace cnnrt_cli
