#include "core/error.hpp"

namespace cnnrt {

Error::Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}

const char* to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::Usage: return "usage error";
    case ErrorCode::Unsupported: return "unsupported";
    case ErrorCode::InvalidModel: return "invalid model";
    case ErrorCode::InvalidInput: return "invalid input";
    case ErrorCode::LimitExceeded: return "limit exceeded";
    case ErrorCode::DeviceUnavailable: return "device unavailable";
    case ErrorCode::DeviceError: return "device error";
    case ErrorCode::Io: return "i/o error";
    case ErrorCode::Internal: return "internal error";
  }
  return "error";
}

int exit_code(ErrorCode code) {
  switch (code) {
    case ErrorCode::Usage: return 2;
    case ErrorCode::Unsupported: return 3;
    case ErrorCode::InvalidModel:
    case ErrorCode::InvalidInput:
    case ErrorCode::Io: return 4;
    case ErrorCode::DeviceUnavailable: return 5;
    case ErrorCode::LimitExceeded: return 6;
    case ErrorCode::DeviceError: return 7;
    case ErrorCode::Internal: return 8;
  }
  return 8;
}

const char* to_string(Device device) {
  switch (device) {
    case Device::Auto: return "auto";
    case Device::Cpu: return "cpu";
    case Device::Gpu: return "gpu";
  }
  return "?";
}

void rethrow_with_prefix(const Error& error, const std::string& prefix) {
  throw Error(error.code(), prefix + ": " + error.what());
}

}  // namespace cnnrt
