#include "common/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <random>

namespace cairn {

std::string errno_text() {
  return std::strerror(errno);
}

char* thread_io_buffer() {
  thread_local std::unique_ptr<char[]> buffer(new char[kIoBufferSize]);
  return buffer.get();
}

Status write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::Io(errno_text());
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::Ok();
}

Result<std::string> read_file(const std::filesystem::path& file) {
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) return Status::NotFound(file.string() + ": no such file");
    return Status::Io("cannot open " + file.string() + ": " + errno_text());
  }
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::Io("cannot read " + file.string() + ": " + errno_text());
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

Status fsync_dir(const std::filesystem::path& dir) {
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return Status::Io("cannot open directory " + dir.string() + ": " + errno_text());
  if (::fsync(fd.get()) != 0) return Status::Io("fsync " + dir.string() + ": " + errno_text());
  return Status::Ok();
}

Status write_file_atomic(const std::filesystem::path& file, std::string_view data) {
  std::filesystem::path tmp = file;
  tmp += ".tmp-" + std::to_string(::getpid());
  {
    UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!fd) return Status::Io("cannot create " + tmp.string() + ": " + errno_text());
    Status st = write_all(fd.get(), data);
    if (!st.ok()) return Status::Io("cannot write " + tmp.string() + ": " + st.message());
    if (::fsync(fd.get()) != 0) return Status::Io("fsync " + tmp.string() + ": " + errno_text());
  }
  if (::rename(tmp.c_str(), file.c_str()) != 0) {
    Status st = Status::Io("cannot rename " + tmp.string() + ": " + errno_text());
    ::unlink(tmp.c_str());
    return st;
  }
  return fsync_dir(file.parent_path().empty() ? "." : file.parent_path());
}

Status copy_file_durable(const std::filesystem::path& from, const std::filesystem::path& to) {
  UniqueFd in(::open(from.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in) return Status::Io("cannot open " + from.string() + ": " + errno_text());
  UniqueFd out(::open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!out) return Status::Io("cannot create " + to.string() + ": " + errno_text());
  char* buf = thread_io_buffer();
  for (;;) {
    ssize_t n = ::read(in.get(), buf, kIoBufferSize);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::Io("cannot read " + from.string() + ": " + errno_text());
    if (n == 0) break;
    Status st = write_all(out.get(), std::string_view(buf, static_cast<size_t>(n)));
    if (!st.ok()) return Status::Io("cannot write " + to.string() + ": " + st.message());
  }
  if (::fsync(out.get()) != 0) return Status::Io("fsync " + to.string() + ": " + errno_text());
  return Status::Ok();
}

Result<std::filesystem::path> make_unique_dir(const std::filesystem::path& parent,
                                              std::string_view prefix) {
  std::error_code ec;
  std::filesystem::create_directories(parent, ec);
  if (ec) return Status::Io("cannot create " + parent.string() + ": " + ec.message());
  std::random_device rd;
  for (int attempt = 0; attempt < 100; ++attempt) {
    char suffix[17];
    std::snprintf(suffix, sizeof suffix, "%08x%08x", rd(), rd());
    std::filesystem::path dir = parent / (std::string(prefix) + suffix);
    if (::mkdir(dir.c_str(), 0755) == 0) return dir;
    if (errno != EEXIST) return Status::Io("cannot create " + dir.string() + ": " + errno_text());
  }
  return Status::Io("cannot create a unique directory under " + parent.string());
}

bool lies_inside(const std::filesystem::path& path, const std::filesystem::path& dir) {
  const std::filesystem::path rel = path.lexically_relative(dir);
  return !rel.empty() && *rel.begin() != "..";
}

bool stays_below(const std::filesystem::path& rel) {
  if (rel.empty() || rel.is_absolute()) return false;
  const std::filesystem::path normal = rel.lexically_normal();
  return !normal.empty() && *normal.begin() != ".." && normal != ".";
}

}  // namespace cairn
