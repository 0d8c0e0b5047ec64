#include "aon/base/status.h"

namespace aon {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kNotFound: return "not found";
    case StatusCode::kDataLoss: return "data loss";
    case StatusCode::kUnimplemented: return "unsupported";
    case StatusCode::kUnavailable: return "unavailable";
    case StatusCode::kPermissionDenied: return "permission denied";
    case StatusCode::kIoError: return "I/O error";
    case StatusCode::kInternal: return "internal error";
  }
  return "unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(StatusCodeName(code_)) + ": " + message_;
}

Status ErrnoStatus(const std::string& what, int errno_value) {
  StatusCode code = StatusCode::kIoError;
  if (errno_value == ENOENT || errno_value == ENOTDIR) code = StatusCode::kNotFound;
  if (errno_value == EACCES || errno_value == EPERM || errno_value == EROFS)
    code = StatusCode::kPermissionDenied;
  if (errno_value == EINVAL) code = StatusCode::kInvalidArgument;
  return Status(code, what + ": " + std::strerror(errno_value));
}

}  // namespace aon
