// The tuning cache: measured kernel choices on disk, one JSON file that many processes may read and write.
//
// An entry's key names the device, the kernel set (a fingerprint of every variant name the planner can offer,
// so a new, renamed or removed kernel invalidates what was measured without it) and the layer's signature.
// Writes merge: each store takes an exclusive lock on PATH.lock, reads the file again, adds its entry, writes a
// temporary file and renames it over the cache. Readers never see half a file, and processes writing at once
// lose none of each other's entries. A file that does not parse is set aside with one warning and rewritten.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cnnrt::plan {

struct CachedChoice {
  std::string kernel;                                  // the winner
  std::vector<std::pair<std::string, double>> timings;  // every candidate's median (us; < 0: failed its check)
  std::map<std::string, double> errors;                 // each checked candidate's relative 2-norm distance from the
                                                        // reference's output (the reference itself: 0)
};

class TuningCache {
 public:
  // `path` "": in memory only.
  explicit TuningCache(std::string path);

  static std::string key(const std::string& device, const std::string& kernel_set, const std::string& signature);

  std::optional<CachedChoice> find(const std::string& key) const;
  void store(const std::string& key, const CachedChoice& choice);
  size_t size() const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  mutable std::mutex mutex_;
  std::map<std::string, CachedChoice> entries_;
};

}  // namespace cnnrt::plan
