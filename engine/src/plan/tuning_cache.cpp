#include "plan/tuning_cache.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/log.hpp"

namespace cnnrt::plan {

namespace fs = std::filesystem;

namespace {

constexpr int kFormat = 2;  // the file layout; a file of another format is ignored (and replaced on write)

// An exclusive lock on PATH.lock for as long as it lives (no lock where the file cannot be opened: the writes
// are still atomic renames, merely not merged).
class FileLock {
 public:
  explicit FileLock(const std::string& path) {
    fd_ = ::open((path + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ >= 0 && ::flock(fd_, LOCK_EX) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the lock
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

// The entries of the file at `path` (none if it does not exist; nullopt if it does not parse).
std::optional<std::map<std::string, CachedChoice>> read_entries(const std::string& path) {
  std::map<std::string, CachedChoice> out;
  std::ifstream in(path);
  if (!in.good()) return out;
  std::stringstream text;
  text << in.rdbuf();
  try {
    const nlohmann::json doc = nlohmann::json::parse(text.str());
    if (doc.value("format", 0) != kFormat || !doc.contains("entries") || !doc["entries"].is_object()) return out;
    for (const auto& [key, e] : doc["entries"].items()) {
      CachedChoice c;
      c.kernel = e.value("kernel", "");
      for (const auto& t : e.value("timings", nlohmann::json::array())) {
        c.timings.emplace_back(t.value("kernel", ""), t.value("us", -1.0));
        if (t.contains("err") && t["err"].is_number()) c.errors[c.timings.back().first] = t["err"].get<double>();
      }
      if (!c.kernel.empty()) out[key] = std::move(c);
    }
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return out;
}

}  // namespace

TuningCache::TuningCache(std::string path) : path_(std::move(path)) {
  if (path_.empty()) return;
  auto entries = read_entries(path_);
  if (entries) {
    entries_ = std::move(*entries);
  } else {
    log().warn("tuning cache '{}' is unreadable; it will be rewritten", path_);
  }
}

std::string TuningCache::key(const std::string& device, const std::string& kernel_set, const std::string& signature) {
  return fmt::format("{}|{}|{}", device, kernel_set, signature);
}

std::optional<CachedChoice> TuningCache::find(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

size_t TuningCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

void TuningCache::store(const std::string& key, const CachedChoice& choice) {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_[key] = choice;
  if (path_.empty()) return;
  std::error_code ec;
  const fs::path parent = fs::path(path_).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  FileLock file_lock(path_);
  // What other processes stored since this one read the file, then this process's entries over them.
  if (auto on_disk = read_entries(path_)) {
    for (auto& [k, c] : *on_disk) entries_.emplace(k, std::move(c));
  }
  nlohmann::json doc = {{"format", kFormat}, {"entries", nlohmann::json::object()}};
  for (const auto& [k, c] : entries_) {
    nlohmann::json timings = nlohmann::json::array();
    for (const auto& [kernel, us] : c.timings) {
      nlohmann::json t = {{"kernel", kernel}, {"us", us}};
      if (const auto e = c.errors.find(kernel); e != c.errors.end()) t["err"] = e->second;
      timings.push_back(std::move(t));
    }
    doc["entries"][k] = {{"kernel", c.kernel}, {"timings", std::move(timings)}};
  }
  const std::string tmp = fmt::format("{}.{}.tmp", path_, ::getpid());
  {
    std::ofstream out(tmp);
    out << doc.dump(1) << "\n";
    if (!out.good()) {
      log().warn("cannot write tuning cache '{}'; choices will be measured again next time", path_);
      fs::remove(tmp, ec);
      return;
    }
  }
  fs::rename(tmp, path_, ec);
  if (ec) {
    log().warn("cannot write tuning cache '{}': {}", path_, ec.message());
    fs::remove(tmp, ec);
  }
}

}  // namespace cnnrt::plan
