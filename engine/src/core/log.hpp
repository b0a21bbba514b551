// The library's logger: spdlog logger "cnnrt", writing to stderr unless the host registered its own.
#pragma once

#include <spdlog/spdlog.h>

namespace cnnrt {
spdlog::logger& log();
}  // namespace cnnrt
