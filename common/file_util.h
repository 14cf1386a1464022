// Small POSIX helpers with RAII: file descriptors, durable writes, directory fsync.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <string_view>
#include <utility>

#include "common/status.h"

namespace cairn {

// Owns a file descriptor; closes it on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

Status write_all(int fd, std::string_view data);
Result<std::string> read_file(const std::filesystem::path& file);
// Writes to a temporary sibling, fsyncs it, renames it over `file` and fsyncs the directory:
// readers see the old content or the new, never a torn file.
Status write_file_atomic(const std::filesystem::path& file, std::string_view data);
Status fsync_dir(const std::filesystem::path& dir);
Status copy_file_durable(const std::filesystem::path& from, const std::filesystem::path& to);
std::string errno_text();

// Whether `path` is `dir` or lies below it, compared lexically (neither is resolved: callers
// canonicalise first when links matter).
bool lies_inside(const std::filesystem::path& path, const std::filesystem::path& dir);
// Whether `rel`, taken relative to some directory, names something below it: relative, not
// empty, and its lexical normal form does not climb out with "..". A name that merely starts
// with two dots ("..weights") stays below. What a record from the store must satisfy before
// a path from it is joined to a directory that will be written.
bool stays_below(const std::filesystem::path& rel);
// A 1 MiB buffer owned by the calling thread, not zeroed: file copies and hashes that run
// once per file (thousands of small checkpoint files) would otherwise allocate and clear
// a fresh one each time.
char* thread_io_buffer();
inline constexpr size_t kIoBufferSize = 1 << 20;
// A fresh, unique directory under `parent` (created), named with `prefix`.
Result<std::filesystem::path> make_unique_dir(const std::filesystem::path& parent,
                                              std::string_view prefix);

// Removes a directory tree when it goes out of scope, unless release()d.
class ScopedDirRemover {
 public:
  explicit ScopedDirRemover(std::filesystem::path dir) : dir_(std::move(dir)) {}
  ~ScopedDirRemover() {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  ScopedDirRemover(const ScopedDirRemover&) = delete;
  ScopedDirRemover& operator=(const ScopedDirRemover&) = delete;
  void release() { dir_.clear(); }

 private:
  std::filesystem::path dir_;
};

}  // namespace cairn
