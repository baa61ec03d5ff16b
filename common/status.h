// Status and StatusOr<T>: errors as values at module boundaries.
// Immutable value types; safe to copy between threads.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

namespace manypy {

/// The error categories manypy reports. Frontends map them to gRPC / HTTP codes.
enum class StatusCode {
  kOk = 0,
  kInvalidArgument,
  kNotFound,
  kAlreadyExists,
  kFailedPrecondition,
  kResourceExhausted,
  kUnavailable,
  kDeadlineExceeded,
  kInternal,
  kUnauthenticated,   ///< no valid credentials (gRPC UNAUTHENTICATED, HTTP 401)
  kPermissionDenied,  ///< valid credentials without the right (gRPC PERMISSION_DENIED, HTTP 403)
  /// The client left (cancelled, disconnected) before its answer: the
  /// client's doing, never a server fault (gRPC CANCELLED, HTTP 499).
  kCancelled,
};

const char* StatusCodeName(StatusCode code);

/// A code and a message naming what was wrong.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  /// "INVALID_ARGUMENT: message", or "OK".
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
inline Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status AlreadyExists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
inline Status FailedPrecondition(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
inline Status Unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status DeadlineExceeded(std::string m) { return {StatusCode::kDeadlineExceeded, std::move(m)}; }
inline Status Cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
inline Status Unauthenticated(std::string m) { return {StatusCode::kUnauthenticated, std::move(m)}; }
inline Status PermissionDenied(std::string m) { return {StatusCode::kPermissionDenied, std::move(m)}; }

/// Either a value or a non-OK status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT: implicit by design
    if (status_.ok()) status_ = Internal("StatusOr constructed from an OK status without a value");
  }
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { return Checked(), *value_; }
  T&& value() && { return Checked(), std::move(*value_); }
  T& operator*() & { return value(); }
  T* operator->() { return &value(); }

 private:
  void Checked() const {
    if (!ok()) throw std::logic_error("StatusOr::value() on error: " + status_.ToString());
  }
  Status status_;
  std::optional<T> value_;
};

#define MANYPY_RETURN_IF_ERROR(expr)           \
  do {                                         \
    ::manypy::Status _manypy_status = (expr);  \
    if (!_manypy_status.ok()) return _manypy_status; \
  } while (0)

}  // namespace manypy
