#include "core/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <mutex>

#include "cnnrt/cnnrt.hpp"

namespace cnnrt {

spdlog::logger& log() {
  // A host may have registered a logger named "cnnrt" before our first use: respect it.
  static std::shared_ptr<spdlog::logger> logger = [] {
    if (auto existing = spdlog::get("cnnrt")) return existing;
    auto created = spdlog::stderr_color_mt("cnnrt");
    created->set_pattern("[cnnrt %^%l%$] %v");
    created->set_level(spdlog::level::warn);
    return created;
  }();
  return *logger;
}

void set_log_level(LogLevel level) {
  static const spdlog::level::level_enum levels[] = {spdlog::level::trace, spdlog::level::debug,
                                                     spdlog::level::info,  spdlog::level::warn,
                                                     spdlog::level::err,   spdlog::level::off};
  log().set_level(levels[static_cast<int>(level)]);
}

const char* version() { return CNNRT_VERSION_STRING; }

}  // namespace cnnrt
