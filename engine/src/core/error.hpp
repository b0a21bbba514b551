// Throwing helpers. The library reports every failure as cnnrt::Error; only the apps exit.
#pragma once

#include <fmt/format.h>

#include <utility>

#include "cnnrt/cnnrt.hpp"

namespace cnnrt {

template <class... Args>
[[noreturn]] void fail(ErrorCode code, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(code, fmt::format(format, std::forward<Args>(args)...));
}

// Re-throws an Error with `prefix: ` in front of its message, keeping its code.
[[noreturn]] void rethrow_with_prefix(const Error& error, const std::string& prefix);

}  // namespace cnnrt

#define CNNRT_CHECK(cond, code, ...)       \
  do {                                     \
    if (!(cond)) ::cnnrt::fail(code, __VA_ARGS__); \
  } while (0)
