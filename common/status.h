// Status and Result<T>: how errors travel between modules. No exceptions cross a module
// boundary; a function that can fail returns one of these, LevelDB-style.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace cairn {

// What kind of failure, so the CLI can pick the exit status (SPEC §1: 2 for bad usage or
// bad input, 1 for everything else).
enum class ErrorKind { kNone, kBadInput, kNotFound, kIo, kCorrupt, kFailed };

class Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status BadInput(std::string msg) { return Status(ErrorKind::kBadInput, std::move(msg)); }
  static Status NotFound(std::string msg) { return Status(ErrorKind::kNotFound, std::move(msg)); }
  static Status Io(std::string msg) { return Status(ErrorKind::kIo, std::move(msg)); }
  static Status Corrupt(std::string msg) { return Status(ErrorKind::kCorrupt, std::move(msg)); }
  static Status Failed(std::string msg) { return Status(ErrorKind::kFailed, std::move(msg)); }

  bool ok() const { return kind_ == ErrorKind::kNone; }
  ErrorKind kind() const { return kind_; }
  const std::string& message() const { return message_; }
  // Exit status a command should end with when it fails with this status.
  // A missing experiment, trial or checkpoint is bad input too: the user named something
  // that is not there.
  int exit_code() const {
    if (ok()) return 0;
    return kind_ == ErrorKind::kBadInput || kind_ == ErrorKind::kNotFound ? 2 : 1;
  }

 private:
  Status(ErrorKind kind, std::string msg) : kind_(kind), message_(std::move(msg)) {}
  ErrorKind kind_ = ErrorKind::kNone;
  std::string message_;
};

// A value or the Status that explains why there is none.
template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}          // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {}  // NOLINT: implicit by design

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() { return *value_; }
  const T& operator*() const { return *value_; }
  // The value, or `fallback` when there is none.
  T value_or(T fallback) const& { return value_ ? *value_ : std::move(fallback); }
  T value_or(T fallback) && { return value_ ? std::move(*value_) : std::move(fallback); }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace cairn
