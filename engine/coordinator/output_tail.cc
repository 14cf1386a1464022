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

Status OutputTail::open(Followed& f) {
  UniqueFd fd(::open(f.file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) return Status::Ok();  // not made yet
    return Status::Io("cannot open " + f.file.string() + ": " + errno_text());
  }
  // The watch before the first read: what is written after it raises an event.
  const int watch = ::inotify_add_watch(inotify_.get(), f.file.c_str(), IN_MODIFY);
  if (watch < 0) return Status::Io("inotify_add_watch " + f.file.string() + ": " + errno_text());
  f.fd = std::move(fd);
  f.watch = watch;
  return Status::Ok();
}

Status OutputTail::follow(int64_t key, const std::filesystem::path& file, uint64_t offset) {
  stop(key);
  Followed f;
  f.file = file;
  f.offset = offset;
  if (Status opened = open(f); !opened.ok()) return opened;
  followed_[key] = std::move(f);
  return Status::Ok();
}

std::vector<int64_t> OutputTail::attach(const std::filesystem::path& file) {
  std::vector<int64_t> keys;
  for (auto& [key, f] : followed_)
    if (!f.fd && f.file == file && open(f).ok() && f.fd) keys.push_back(key);
  return keys;
}

void OutputTail::stop(int64_t key) {
  auto it = followed_.find(key);
  if (it == followed_.end()) return;
  // Another key may share the watch (inotify gives one watch per inode); only drop it when
  // no one else uses it.
  bool shared = false;
  for (const auto& [k, f] : followed_)
    if (k != key && f.watch == it->second.watch) shared = true;
  if (!shared && it->second.watch >= 0) ::inotify_rm_watch(inotify_.get(), it->second.watch);
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
  // A file made since it was followed, whose attach() has not come yet (its launcher made it
  // and the rank ended in one round of the loop).
  if (!f.fd && (!open(f).ok() || !f.fd)) return {};
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
