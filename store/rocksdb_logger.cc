#include "store/rocksdb_logger.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <string>

#include "common/file_util.h"

namespace cairn {
namespace fs = std::filesystem;

namespace {

class DiscardingLogger final : public rocksdb::Logger {
 public:
  DiscardingLogger() : rocksdb::Logger(rocksdb::InfoLogLevel::HEADER_LEVEL) {}
  using rocksdb::Logger::Logv;
  void Logv(const char*, va_list) override {}
};

class FileLogger final : public rocksdb::Logger {
 public:
  FileLogger(fs::path dir, uint64_t max_size, UniqueFd fd, uint64_t size)
      : dir_(std::move(dir)), max_size_(max_size), fd_(std::move(fd)), size_(size) {}

  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override {
    char line[1024];
    timespec now{};
    ::clock_gettime(CLOCK_REALTIME, &now);
    tm local{};
    ::localtime_r(&now.tv_sec, &local);
    int n = static_cast<int>(::strftime(line, sizeof line, "%Y/%m/%d-%H:%M:%S", &local));
    n += std::snprintf(line + n, sizeof line - n, ".%06ld ", now.tv_nsec / 1000);
    va_list copy;
    va_copy(copy, ap);
    const int body = std::vsnprintf(line + n, sizeof line - n, format, copy);
    va_end(copy);
    size_t len = body < 0 ? static_cast<size_t>(n)
                          : std::min(sizeof line - 1, static_cast<size_t>(n + body));
    if (len == 0 || line[len - 1] != '\n') line[len++] = '\n';

    std::lock_guard<std::mutex> hold(mutex_);
    if (size_ + len > max_size_) roll();
    if (!fd_) return;
    // Diagnostics only: a short or failed write (ENOSPC) loses this line, nothing more.
    const ssize_t wrote = ::write(fd_.get(), line, len);
    if (wrote > 0) size_ += static_cast<uint64_t>(wrote);
  }

  rocksdb::Status Close() override { return rocksdb::Status::OK(); }

 private:
  void roll() {
    std::error_code ec;
    fs::rename(dir_ / "LOG", dir_ / "LOG.old", ec);
    UniqueFd fresh(
        ::open((dir_ / "LOG").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_TRUNC | O_CLOEXEC, 0644));
    if (fresh) fd_ = std::move(fresh);  // otherwise keep appending to the old one
    size_ = 0;
  }

  const fs::path dir_;
  const uint64_t max_size_;
  std::mutex mutex_;  // RocksDB logs from its background threads too
  UniqueFd fd_;
  uint64_t size_;
};

}  // namespace

std::shared_ptr<rocksdb::Logger> discarding_rocksdb_logger() {
  static const std::shared_ptr<rocksdb::Logger> logger = std::make_shared<DiscardingLogger>();
  return logger;
}

std::shared_ptr<rocksdb::Logger> file_rocksdb_logger(const fs::path& dir, uint64_t max_size) {
  UniqueFd fd(::open((dir / "LOG").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!fd) return nullptr;
  struct stat st {};
  const uint64_t size = ::fstat(fd.get(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  return std::make_shared<FileLogger>(dir, max_size, std::move(fd), size);
}

}  // namespace cairn
