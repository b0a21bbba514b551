#include "idx.hpp"

#include <fmt/format.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "cnnrt/cnnrt.hpp"

namespace cnnrt_cli {

using cnnrt::Error;
using cnnrt::ErrorCode;

namespace {

constexpr size_t kMaxRank = 16;

int element_bytes(IdxType type) {
  switch (type) {
    case IdxType::U8:
    case IdxType::I8: return 1;
    case IdxType::I16: return 2;
    case IdxType::I32:
    case IdxType::F32: return 4;
    case IdxType::F64: return 8;
  }
  return 0;
}

bool known_type(uint8_t code) {
  switch (static_cast<IdxType>(code)) {
    case IdxType::U8:
    case IdxType::I8:
    case IdxType::I16:
    case IdxType::I32:
    case IdxType::F32:
    case IdxType::F64: return true;
  }
  return false;
}

uint64_t read_be(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | p[i];
  return v;
}

void write_be(std::vector<uint8_t>& out, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

float decode_value(const uint8_t* p, IdxType type) {
  switch (type) {
    case IdxType::U8: return p[0];
    case IdxType::I8: return static_cast<int8_t>(p[0]);
    case IdxType::I16: return static_cast<int16_t>(read_be(p, 2));
    case IdxType::I32: return static_cast<float>(static_cast<int32_t>(read_be(p, 4)));
    case IdxType::F32: {
      const uint32_t bits = static_cast<uint32_t>(read_be(p, 4));
      float f;
      std::memcpy(&f, &bits, sizeof f);
      return f;
    }
    case IdxType::F64: {
      const uint64_t bits = read_be(p, 8);
      double d;
      std::memcpy(&d, &bits, sizeof d);
      return static_cast<float>(d);
    }
  }
  return 0;
}

std::vector<uint8_t> gunzip(const std::vector<uint8_t>& compressed, const std::string& name) {
  z_stream zs{};
  if (inflateInit2(&zs, 15 + 16) != Z_OK) throw Error(ErrorCode::Internal, "zlib: inflateInit2 failed");
  std::vector<uint8_t> out;
  zs.next_in = const_cast<Bytef*>(compressed.data());
  zs.avail_in = static_cast<uInt>(compressed.size());
  uint8_t chunk[1 << 16];
  int rc = Z_OK;
  while (true) {
    zs.next_out = chunk;
    zs.avail_out = sizeof chunk;
    rc = inflate(&zs, Z_NO_FLUSH);
    out.insert(out.end(), chunk, chunk + (sizeof chunk - zs.avail_out));
    if (static_cast<int64_t>(out.size()) > kMaxIdxBytes + 4 + 4 * int64_t(kMaxRank)) {
      inflateEnd(&zs);
      throw Error(ErrorCode::InvalidInput, fmt::format("{}: decompresses to more than the {} byte limit for IDX data",
                                                       name, kMaxIdxBytes));
    }
    if (rc == Z_STREAM_END) {
      if (zs.avail_in == 0) break;
      inflateReset(&zs);  // gzip allows several members, one after the other
      continue;
    }
    if (rc == Z_BUF_ERROR && zs.avail_in == 0) {
      inflateEnd(&zs);
      throw Error(ErrorCode::InvalidInput,
                  fmt::format("{}: truncated gzip stream ({} bytes decompressed before it ended)", name, out.size()));
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      const std::string msg = zs.msg ? zs.msg : "error " + std::to_string(rc);
      inflateEnd(&zs);
      throw Error(ErrorCode::InvalidInput, fmt::format("{}: corrupt gzip stream ({})", name, msg));
    }
  }
  inflateEnd(&zs);
  return out;
}

}  // namespace

const char* to_string(IdxType type) {
  switch (type) {
    case IdxType::U8: return "uint8";
    case IdxType::I8: return "int8";
    case IdxType::I16: return "int16";
    case IdxType::I32: return "int32";
    case IdxType::F32: return "float32";
    case IdxType::F64: return "float64";
  }
  return "?";
}

int64_t IdxArray::count() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

IdxArray parse_idx(const std::vector<uint8_t>& bytes, const std::string& name) {
  if (bytes.size() < 4) {
    throw Error(ErrorCode::InvalidInput, fmt::format("{}: {} bytes, too short for an IDX header", name, bytes.size()));
  }
  if (bytes[0] != 0 || bytes[1] != 0 || !known_type(bytes[2])) {
    throw Error(ErrorCode::InvalidInput,
                fmt::format("{}: bad IDX magic {:02x} {:02x} {:02x} {:02x} (expected 00 00, a type among 08 09 0b 0c "
                            "0d 0e, and a rank)",
                            name, bytes[0], bytes[1], bytes[2], bytes[3]));
  }
  IdxArray array;
  array.type = static_cast<IdxType>(bytes[2]);
  const size_t rank = bytes[3];
  if (rank == 0 || rank > kMaxRank) {
    throw Error(ErrorCode::InvalidInput, fmt::format("{}: IDX rank {} (expected 1 to {})", name, rank, kMaxRank));
  }
  const size_t header = 4 + 4 * rank;
  if (bytes.size() < header) {
    throw Error(ErrorCode::InvalidInput, fmt::format("{}: truncated IDX header ({} bytes, the rank-{} header needs {})",
                                                     name, bytes.size(), rank, header));
  }
  const int elem = element_bytes(array.type);
  int64_t count = 1;
  for (size_t i = 0; i < rank; ++i) {
    const int64_t d = static_cast<int64_t>(read_be(&bytes[4 + 4 * i], 4));
    array.dims.push_back(d);
    if (d != 0 && count > kMaxIdxBytes / elem / d) {
      throw Error(ErrorCode::InvalidInput, fmt::format("{}: IDX dimensions {} exceed the {} byte limit", name,
                                                       fmt::join(array.dims, "x"), kMaxIdxBytes));
    }
    count *= d;
  }
  const size_t data_bytes = static_cast<size_t>(count) * elem;
  const size_t have = bytes.size() - header;
  if (have < data_bytes) {
    throw Error(ErrorCode::InvalidInput,
                fmt::format("{}: truncated IDX data: the header declares {} {} values ({} bytes), the file holds {}",
                            name, fmt::join(array.dims, "x"), to_string(array.type), data_bytes, have));
  }
  if (have > data_bytes) {
    throw Error(ErrorCode::InvalidInput,
                fmt::format("{}: {} unexpected bytes after the {} {} values the IDX header declares", name,
                            have - data_bytes, fmt::join(array.dims, "x"), to_string(array.type)));
  }
  array.values.resize(static_cast<size_t>(count));
  const uint8_t* p = bytes.data() + header;
  for (size_t i = 0; i < array.values.size(); ++i) array.values[i] = decode_value(p + i * elem, array.type);
  return array;
}

IdxArray read_idx(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw Error(ErrorCode::Io, fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  const std::streamoff size = in.tellg();
  if (size < 0) throw Error(ErrorCode::Io, path + ": cannot read");
  if (size > kMaxIdxBytes + 4 + 4 * int64_t(kMaxRank)) {
    throw Error(ErrorCode::InvalidInput, fmt::format("{}: {} bytes, more than the {} byte limit for IDX data", path,
                                                     size, kMaxIdxBytes));
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  in.seekg(0);
  if (size > 0 && !in.read(reinterpret_cast<char*>(bytes.data()), size)) {
    throw Error(ErrorCode::Io, path + ": read failed");
  }
  const bool gzipped = bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b;
  return parse_idx(gzipped ? gunzip(bytes, path) : bytes, path);
}

std::vector<uint8_t> encode_idx(IdxType type, const std::vector<int64_t>& dims, const std::vector<float>& values) {
  std::vector<uint8_t> out = {0, 0, static_cast<uint8_t>(type), static_cast<uint8_t>(dims.size())};
  for (int64_t d : dims) write_be(out, static_cast<uint64_t>(d), 4);
  for (float v : values) {
    switch (type) {
      case IdxType::U8:
      case IdxType::I8: out.push_back(static_cast<uint8_t>(static_cast<int>(v))); break;
      case IdxType::I16: write_be(out, static_cast<uint16_t>(static_cast<int16_t>(v)), 2); break;
      case IdxType::I32: write_be(out, static_cast<uint32_t>(static_cast<int32_t>(v)), 4); break;
      case IdxType::F32: {
        uint32_t bits;
        std::memcpy(&bits, &v, sizeof bits);
        write_be(out, bits, 4);
        break;
      }
      case IdxType::F64: {
        const double d = v;
        uint64_t bits;
        std::memcpy(&bits, &d, sizeof bits);
        write_be(out, bits, 8);
        break;
      }
    }
  }
  return out;
}

}  // namespace cnnrt_cli
