#include "store/stat_cache.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>

#include "common/file_util.h"

namespace cairn {
namespace fs = std::filesystem;

namespace {

constexpr const char* kHeader = "cairn-stat-cache 2";
constexpr char kTrailer[] = "end\n";
constexpr int64_t kRacyWindowNs = 1'000'000'000;  // coarse file systems have 1 s mtimes

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

template <typename T>
bool parse(std::string_view text, T& out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

template <typename T>
void append_number(std::string& out, T n) {
  char buf[24];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, n);
  out.append(buf, end);
}

// Replaces `file` at once (a reader sees the old or the new content) but without fsync: a
// cache lost in a crash only costs time, and one cut short has no end line, so is not used.
Status write_file_replacing(const fs::path& file, std::string_view data) {
  fs::path tmp = file;
  tmp += ".tmp-" + std::to_string(::getpid());
  {
    UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!fd) return Status::Io("cannot create " + tmp.string() + ": " + errno_text());
    Status st = write_all(fd.get(), data);
    if (!st.ok()) {
      ::unlink(tmp.c_str());
      return Status::Io("cannot write " + tmp.string() + ": " + st.message());
    }
  }
  if (::rename(tmp.c_str(), file.c_str()) != 0) {
    Status st = Status::Io("cannot rename " + tmp.string() + ": " + errno_text());
    ::unlink(tmp.c_str());
    return st;
  }
  return Status::Ok();
}

// The whole file in one read of its size (the cache is a megabyte for 10,000 files).
std::optional<std::string> read_whole(const fs::path& file) {
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st;
  if (!fd || ::fstat(fd.get(), &st) != 0) return std::nullopt;
  std::string out(static_cast<size_t>(st.st_size), '\0');
  size_t len = 0;
  while (len < out.size()) {
    const ssize_t n = ::read(fd.get(), out.data() + len, out.size() - len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    len += static_cast<size_t>(n);
  }
  out.resize(len);
  return out;
}

}  // namespace

FileStat FileStat::of(const struct stat& st) {
  FileStat f;
  f.size = static_cast<uint64_t>(st.st_size);
  f.mtime_ns = int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
  f.ctime_ns = int64_t{st.st_ctim.tv_sec} * 1'000'000'000 + st.st_ctim.tv_nsec;
  f.ino = st.st_ino;
  f.mode = st.st_mode;
  return f;
}

StatCache StatCache::load(const fs::path& file) {
  StatCache cache;
  auto text = read_whole(file);
  if (!text) return cache;
  std::string_view in(*text);
  auto next_line = [&in](std::string_view& line) {
    const size_t nl = in.find('\n');
    if (nl == std::string_view::npos) return false;
    line = in.substr(0, nl);
    in.remove_prefix(nl + 1);
    return true;
  };
  std::string_view line;
  if (!next_line(line) || line != kHeader) return cache;
  // Written last: a file cut short (a crash before its data reached the disk) is not used.
  if (in.size() < sizeof kTrailer - 1 || in.substr(in.size() - (sizeof kTrailer - 1)) != kTrailer)
    return cache;
  in.remove_suffix(sizeof kTrailer - 1);
  if (!next_line(line) || !parse(line, cache.written_ns_)) return cache;
  if (in.rfind("meta ", 0) == 0 && next_line(line)) cache.meta_ = std::string(line.substr(5));
  cache.loaded_.reserve(static_cast<size_t>(std::count(in.begin(), in.end(), '\n')));
  // Lines: value size mtime_ns ctime_ns ino mode <TAB> key
  while (next_line(line)) {
    const size_t tab = line.find('\t');
    if (tab == std::string_view::npos) continue;
    std::string_view fields = line.substr(0, tab);
    auto field = [&fields](std::string_view& out) {
      const size_t sp = fields.find(' ');
      out = fields.substr(0, sp);
      fields.remove_prefix(sp == std::string_view::npos ? fields.size() : sp + 1);
      return !out.empty();
    };
    std::string_view value, size, mtime, ctime, ino, mode;
    Entry e;
    if (!field(value) || !field(size) || !field(mtime) || !field(ctime) || !field(ino) ||
        !field(mode) || !fields.empty() || !parse(size, e.st.size) ||
        !parse(mtime, e.st.mtime_ns) || !parse(ctime, e.st.ctime_ns) || !parse(ino, e.st.ino) ||
        !parse(mode, e.st.mode))
      continue;
    e.value = std::string(value);
    auto [it, inserted] =
        cache.loaded_.insert_or_assign(std::string(line.substr(tab + 1)), std::move(e));
    (void)inserted;
    cache.index_dir_of(it->first);
  }
  return cache;
}

void StatCache::index_dir_of(std::string_view key) {
  for (size_t slash = key.rfind('/'); slash != std::string_view::npos && slash > 0;
       slash = key.rfind('/', slash - 1)) {
    // Parents are added deepest first; one already known has its own parents known too.
    if (!loaded_dirs_.insert(key.substr(0, slash)).second) break;
  }
}

StatCache& StatCache::operator=(const StatCache& o) {
  if (this == &o) return *this;
  written_ns_ = o.written_ns_;
  loaded_ = o.loaded_;
  recorded_ = o.recorded_;
  meta_ = o.meta_;
  loaded_dirs_.clear();  // views into this copy's own keys
  for (const auto& [key, e] : loaded_) index_dir_of(key);
  return *this;
}

std::optional<std::string> StatCache::lookup(const std::string& key, const FileStat& st) const {
  auto it = loaded_.find(key);
  if (it == loaded_.end() || !(it->second.st == st)) return std::nullopt;
  if (st.mtime_ns >= written_ns_ - kRacyWindowNs) return std::nullopt;
  return it->second.value;
}

void StatCache::record(const std::string& key, const FileStat& st, const std::string& value) {
  // The common case, an unchanged file, marks the loaded entry instead of copying it.
  auto it = loaded_.find(key);
  if (it != loaded_.end() && it->second.st == st && it->second.value == value) {
    it->second.kept = true;
    if (!recorded_.empty()) recorded_.erase(key);
    return;
  }
  if (it != loaded_.end()) it->second.kept = false;
  recorded_[key] = Entry{st, value};
}

Status StatCache::save(const fs::path& file, bool keep_loaded) const {
  std::string out;
  out.reserve((recorded_.size() + (keep_loaded ? loaded_.size() : 0)) * 128 + meta_.size() + 64);
  out += kHeader;
  out += '\n';
  append_number(out, now_ns());
  out += '\n';
  if (!meta_.empty() && meta_.find('\n') == std::string::npos) out += "meta " + meta_ + "\n";
  auto write = [&out](const std::string& key, const Entry& e) {
    if (key.find('\n') != std::string::npos) return;  // cannot be written; simply not cached
    out += e.value;
    out += ' ';
    append_number(out, e.st.size);
    out += ' ';
    append_number(out, e.st.mtime_ns);
    out += ' ';
    append_number(out, e.st.ctime_ns);
    out += ' ';
    append_number(out, e.st.ino);
    out += ' ';
    append_number(out, e.st.mode);
    out += '\t';
    out += key;
    out += '\n';
  };
  for (const auto& [key, e] : recorded_) write(key, e);
  for (const auto& [key, e] : loaded_) {
    if (e.kept) {
      write(key, e);  // recorded again, unchanged
    } else if (keep_loaded && e.st.mtime_ns < written_ns_ - kRacyWindowNs &&
               !recorded_.count(key)) {
      // A loaded entry that was racy when its cache was written must not become trusted
      // just because this save has a later time: it is dropped instead.
      write(key, e);
    }
  }
  out += kTrailer;
  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  return write_file_replacing(file, out);
}

}  // namespace cairn
