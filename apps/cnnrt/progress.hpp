// A progress bar on stderr for long runs: drawn only when stderr is a terminal and the run has taken more
// than a second, redrawn at most ten times a second, erased when done.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace cnnrt_cli {

class ProgressBar {
 public:
  // enabled: false draws nothing (e.g. --json or --quiet); otherwise drawn when stderr is a terminal.
  ProgressBar(std::string label, int64_t total, bool enabled = true);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  void update(int64_t done);
  void finish();  // erases the bar (if drawn); called by the destructor too

  // The line drawn for `done` of `total` after `seconds`; width is the bar's width in characters.
  static std::string render(const std::string& label, int64_t done, int64_t total, double seconds, int width = 30);

 private:
  using Clock = std::chrono::steady_clock;
  std::string label_;
  int64_t total_;
  bool enabled_;
  bool drawn_ = false;
  Clock::time_point start_;
  Clock::time_point last_draw_;
};

}  // namespace cnnrt_cli
