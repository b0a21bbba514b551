// Small images and files for the infer/eval tests: PNG bytes from pixels, files in a scratch folder.
#pragma once

#include <stb_image_write.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
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

}  // namespace cnnrt::testing
