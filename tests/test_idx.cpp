// The IDX reader behind `cnnrt eval`: raw and gzipped files, every IDX type, and the broken files it must
// refuse with a clear message (truncated data or gzip stream, bad magic, trailing bytes).
#include <doctest/doctest.h>
#include <zlib.h>

#include "apps/cnnrt/idx.hpp"
#include "cnnrt/cnnrt.hpp"
#include "image_test_util.hpp"

using namespace cnnrt_cli;
using cnnrt::testing::ScratchDir;
using cnnrt::testing::write_file;

namespace {

std::vector<uint8_t> gzip(const std::vector<uint8_t>& bytes) {
  z_stream zs{};
  REQUIRE(deflateInit2(&zs, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::vector<uint8_t> out(deflateBound(&zs, static_cast<uLong>(bytes.size())) + 32);
  zs.next_in = const_cast<Bytef*>(bytes.data());
  zs.avail_in = static_cast<uInt>(bytes.size());
  zs.next_out = out.data();
  zs.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&zs, Z_FINISH) == Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

std::string idx_error(const std::vector<uint8_t>& bytes) {
  try {
    parse_idx(bytes, "set.idx");
  } catch (const cnnrt::Error& e) {
    CHECK(e.code() == cnnrt::ErrorCode::InvalidInput);
    return e.what();
  }
  FAIL("the IDX bytes parsed, but they should have been refused");
  return "";
}

const std::vector<float> kPixels = {0, 1, 2, 127, 128, 255};

}  // namespace

TEST_CASE("IDX round trip for every type") {
  for (IdxType type : {IdxType::U8, IdxType::I16, IdxType::I32, IdxType::F32, IdxType::F64}) {
    CAPTURE(to_string(type));
    const IdxArray a = parse_idx(encode_idx(type, {2, 3}, kPixels), "set.idx");
    CHECK(a.type == type);
    CHECK(a.dims == std::vector<int64_t>{2, 3});
    CHECK(a.count() == 6);
    CHECK(a.values == kPixels);
  }
  const IdxArray negative = parse_idx(encode_idx(IdxType::I8, {2}, {-3, 100}), "set.idx");
  CHECK(negative.values == std::vector<float>{-3, 100});
  const IdxArray fractional = parse_idx(encode_idx(IdxType::F32, {1}, {-0.375f}), "set.idx");
  CHECK(fractional.values[0] == -0.375f);
}

TEST_CASE("IDX layout: magic, big-endian dimensions, then the values") {
  const std::vector<uint8_t> bytes = encode_idx(IdxType::U8, {2, 1, 3}, kPixels);
  const std::vector<uint8_t> header = {0, 0, 0x08, 3, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 3};
  REQUIRE(bytes.size() == header.size() + kPixels.size());
  CHECK(std::vector<uint8_t>(bytes.begin(), bytes.begin() + 16) == header);
  CHECK(bytes.back() == 255);
}

TEST_CASE("IDX files are read raw or gzipped") {
  ScratchDir dir("idx");
  const std::vector<uint8_t> bytes = encode_idx(IdxType::U8, {3, 2}, kPixels);
  write_file(dir.path() / "raw-idx3-ubyte", bytes);
  write_file(dir.path() / "gz-idx3-ubyte.gz", gzip(bytes));
  for (const char* name : {"raw-idx3-ubyte", "gz-idx3-ubyte.gz"}) {
    CAPTURE(name);
    const IdxArray a = read_idx(dir / name);
    CHECK(a.dims == std::vector<int64_t>{3, 2});
    CHECK(a.values == kPixels);
  }
  SUBCASE("a truncated gzip stream") {
    std::vector<uint8_t> gz = gzip(encode_idx(IdxType::U8, {1000}, std::vector<float>(1000, 7)));
    gz.resize(gz.size() - 12);
    write_file(dir.path() / "cut.gz", gz);
    try {
      read_idx(dir / "cut.gz");
      FAIL("a truncated gzip stream was read");
    } catch (const cnnrt::Error& e) {
      CHECK(e.code() == cnnrt::ErrorCode::InvalidInput);
      CHECK(std::string(e.what()).find("cut.gz: truncated gzip stream (") != std::string::npos);
    }
  }
  SUBCASE("a missing file") {
    try {
      read_idx(dir / "nothing.idx");
      FAIL("a missing file was read");
    } catch (const cnnrt::Error& e) {
      CHECK(e.code() == cnnrt::ErrorCode::Io);
      CHECK(std::string(e.what()).find("nothing.idx: cannot open") != std::string::npos);
    }
  }
}

TEST_CASE("broken IDX data is refused, naming the file and the problem") {
  const std::vector<uint8_t> good = encode_idx(IdxType::U8, {2, 3}, kPixels);
  SUBCASE("truncated data") {
    std::vector<uint8_t> cut(good.begin(), good.end() - 2);
    CHECK(idx_error(cut) ==
          "set.idx: truncated IDX data: the header declares 2x3 uint8 values (6 bytes), the file holds 4");
  }
  SUBCASE("truncated header") {
    std::vector<uint8_t> cut(good.begin(), good.begin() + 9);
    CHECK(idx_error(cut).find("truncated IDX header") != std::string::npos);
  }
  SUBCASE("too short for a header") { CHECK(idx_error({0, 0}).find("too short") != std::string::npos); }
  SUBCASE("bad magic") {
    std::vector<uint8_t> bad = good;
    bad[0] = 0x50;  // e.g. a PNG or text file
    CHECK(idx_error(bad).find("set.idx: bad IDX magic 50 00 08 02") == 0);
    bad = good;
    bad[2] = 0x07;  // no such type
    CHECK(idx_error(bad).find("bad IDX magic") != std::string::npos);
  }
  SUBCASE("rank 0") {
    CHECK(idx_error({0, 0, 8, 0}).find("IDX rank 0") != std::string::npos);
  }
  SUBCASE("trailing bytes") {
    std::vector<uint8_t> longer = good;
    longer.push_back(1);
    CHECK(idx_error(longer).find("1 unexpected bytes after") != std::string::npos);
  }
  SUBCASE("dimensions beyond the limit") {
    const std::vector<uint8_t> huge = {0, 0, 8, 2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    CHECK(idx_error(huge).find("exceed the") != std::string::npos);
  }
}
