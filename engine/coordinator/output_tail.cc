#include "engine/coordinator/output_tail.h"

#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace cairn {

Result<OutputTail> OutputTail::create() {
  OutputTail tail;
  tail.inotify_.reset(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (!tail.inotify_) return Status::Io("inotify_init1: " + errno_text());
  return tail;
}

Status OutputTail::follow(int64_t key, const std::filesystem::path& file, uint64_t offset) {
  stop(key);
  Followed f;
  f.fd.reset(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!f.fd) return Status::Io("cannot open " + file.string() + ": " + errno_text());
  f.watch = ::inotify_add_watch(inotify_.get(), file.c_str(), IN_MODIFY);
  if (f.watch < 0) return Status::Io("inotify_add_watch " + file.string() + ": " + errno_text());
  f.offset = offset;
  followed_[key] = std::move(f);
  return Status::Ok();
}

void OutputTail::stop(int64_t key) {
  auto it = followed_.find(key);
  if (it == followed_.end()) return;
  // Another key may share the watch (inotify gives one watch per inode); only drop it when
  // no one else uses it.
  bool shared = false;
  for (const auto& [k, f] : followed_)
    if (k != key && f.watch == it->second.watch) shared = true;
  if (!shared) ::inotify_rm_watch(inotify_.get(), it->second.watch);
  followed_.erase(it);
}

std::vector<int64_t> OutputTail::changed() {
  std::vector<int64_t> keys;
  alignas(inotify_event) char buf[4096];
  for (;;) {
    ssize_t n = ::read(inotify_.get(), buf, sizeof buf);
    if (n <= 0) break;
    for (char* p = buf; p < buf + n;) {
      auto* ev = reinterpret_cast<inotify_event*>(p);
      for (const auto& [k, f] : followed_)
        if (f.watch == ev->wd) keys.push_back(k);
      p += sizeof(inotify_event) + ev->len;
    }
  }
  return keys;
}

ssize_t OutputTail::read_at(Followed& f) {
  ssize_t n;
  do {
    n = ::pread(f.fd.get(), buffer_.get(), kReadLimit, static_cast<off_t>(f.offset));
  } while (n < 0 && errno == EINTR);
  return n;
}

std::string_view OutputTail::read_new(int64_t key) {
  auto it = followed_.find(key);
  if (it == followed_.end()) return {};
  if (!buffer_) buffer_ = std::make_unique_for_overwrite<char[]>(kReadLimit);
  Followed& f = it->second;
  ssize_t n = read_at(f);
  struct stat st {};
  if (n == 0 && ::fstat(f.fd.get(), &st) == 0 && static_cast<uint64_t>(st.st_size) < f.offset) {
    // Shorter than what was read: truncated (someone reclaimed its space; the store holds
    // a copy). Its writers append, so what it holds now was written since: read from the
    // start, or that output would be skipped until the file grew past the old offset.
    f.offset = 0;
    n = read_at(f);
  }
  if (n <= 0) return {};
  f.offset += static_cast<uint64_t>(n);
  return {buffer_.get(), static_cast<size_t>(n)};
}

uint64_t OutputTail::offset(int64_t key) const {
  auto it = followed_.find(key);
  return it == followed_.end() ? 0 : it->second.offset;
}

}  // namespace cairn
