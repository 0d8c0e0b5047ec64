// Status and StatusOr<T>: the error type used across AON component boundaries.
//
// No exceptions cross a component boundary and none are thrown inside the agent.
// A Status carries a code and a message that already names the thing that failed
// (file path, option, rank, errno text), so callers can print it as is.
#pragma once

#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

namespace aon {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // bad option or value
  kNotFound,         // file or dataset missing
  kDataLoss,         // corrupt or truncated data
  kUnimplemented,    // e.g. a newer trace format major version
  kUnavailable,      // a resource exists but cannot be used now (CUPTI taken, no GPU)
  kPermissionDenied,
  kIoError,
  kInternal,
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "<code name>: <message>", or "OK".
  std::string ToString() const;

  // Prefixes context ("while merging rank 3: ") to the message; keeps the code.
  Status WithContext(const std::string& context) const {
    if (ok()) return *this;
    return Status(code_, context + ": " + message_);
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status DataLoss(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
inline Status Unimplemented(std::string m) { return {StatusCode::kUnimplemented, std::move(m)}; }
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status IoError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
// "<what>: <strerror(errno_value)>", with the code chosen from errno.
Status ErrnoStatus(const std::string& what, int errno_value);

// A value or why there is none. The error is a Status, or a part's own error
// type E where callers branch on codes of their own (the collector protocol's
// CollectorError); E has code(), message() and ToStatus(), and its code 0 means OK.
template <typename T, typename E = Status>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  StatusOr(E error) : error_(std::move(error)) {   // NOLINT(google-explicit-constructor)
    if constexpr (std::is_same_v<E, Status>) {
      if (error_.ok()) error_ = Internal("StatusOr built from an OK status without a value");
    }
  }
  bool ok() const { return value_.has_value(); }
  // The error as a Status (OK with a value).
  decltype(auto) status() const {
    if constexpr (std::is_same_v<E, Status>) {
      return (error_);  // const Status&
    } else {
      return ok() ? Status::Ok() : error_.ToStatus();
    }
  }
  const E& error() const { return error_; }
  auto code() const { return ok() ? decltype(error_.code()){} : error_.code(); }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  E error_;
  std::optional<T> value_;
};

}  // namespace aon

#define AON_CONCAT_INNER_(a, b) a##b
#define AON_CONCAT_(a, b) AON_CONCAT_INNER_(a, b)

#define AON_RETURN_IF_ERROR(expr)              \
  do {                                         \
    ::aon::Status aon_status_ = (expr);        \
    if (!aon_status_.ok()) return aon_status_; \
  } while (0)

#define AON_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()

#define AON_ASSIGN_OR_RETURN(lhs, expr) \
  AON_ASSIGN_OR_RETURN_IMPL_(AON_CONCAT_(aon_statusor_, __LINE__), lhs, expr)
