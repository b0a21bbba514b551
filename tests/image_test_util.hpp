// Small images and files for the infer/eval tests: PNG bytes from pixels, files in a scratch folder, and
// runs of the built `cnnrt` tool (CNNRT_CLI_BINARY).
#pragma once

#include <stb_image_write.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace cnnrt::testing {

// PNG bytes of an 8-bit image with interleaved channels.
inline std::vector<uint8_t> png_bytes(int width, int height, int channels, const std::vector<uint8_t>& pixels) {
  std::vector<uint8_t> out;
  auto append = [](void* context, void* data, int size) {
    auto* bytes = static_cast<std::vector<uint8_t>*>(context);
    bytes->insert(bytes->end(), static_cast<uint8_t*>(data), static_cast<uint8_t*>(data) + size);
  };
  stbi_write_png_to_func(append, &out, width, height, channels, pixels.data(), width * channels);
  return out;
}

inline std::vector<uint8_t> uniform_png(int width, int height, int channels, uint8_t value) {
  return png_bytes(width, height, channels, std::vector<uint8_t>(size_t(width) * height * channels, value));
}

inline void write_file(const std::filesystem::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// A fresh folder under the system's temp folder, removed when the object goes.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name) {
    path_ = std::filesystem::temp_directory_path() /
            ("cnnrt_test_" + name + "_" + std::to_string(::getpid()) + "_" +
             std::to_string(reinterpret_cast<uintptr_t>(this)));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

struct CliResult {
  int status = -1;
  std::string out;
  std::string err;
};

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::string quote(const std::string& arg) {
  std::string q = "'";
  for (char ch : arg) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

// Runs the built `cnnrt` tool with `args`, capturing stdout and stderr in files of `dir`.
inline CliResult run_cli(const ScratchDir& dir, const std::vector<std::string>& args) {
  std::string command = quote(CNNRT_CLI_BINARY);
  for (const std::string& a : args) command += " " + quote(a);
  command += " >" + quote(dir / "stdout.txt") + " 2>" + quote(dir / "stderr.txt");
  const int raw = std::system(command.c_str());
  CliResult r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = read_text(dir / "stdout.txt");
  r.err = read_text(dir / "stderr.txt");
  return r;
}

}  // namespace cnnrt::testing
