#include "store/stat_cache.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>

#include "common/file_util.h"
#include "common/sealed_text.h"

namespace cairn {
namespace fs = std::filesystem;

namespace {

constexpr const char* kHeader = "cairn-stat-cache 3";
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
// cache lost in a crash only costs time, and one cut short or damaged fails its seal
// (common/sealed_text.h), so is not used.
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
  auto shared = std::make_shared<const std::string>(std::move(*text));
  // Not fsynced: a file cut short or damaged in a crash fails its seal and is not used at
  // all, not even in part. (OpenSSL's SHA-256 checks the ~1 MB of a 10,000-file cache in
  // about a millisecond.)
  const std::optional<std::string_view> body = unseal(*shared);
  if (!body) return cache;
  std::string_view in = *body;
  auto next_line = [&in](std::string_view& line) {
    const size_t nl = in.find('\n');
    if (nl == std::string_view::npos) return false;
    line = in.substr(0, nl);
    in.remove_prefix(nl + 1);
    return true;
  };
  std::string_view line;
  if (!next_line(line) || line != kHeader) return cache;
  if (!next_line(line) || !parse(line, cache.s_.written_ns)) return cache;
  if (in.rfind("meta ", 0) == 0 && next_line(line)) cache.s_.meta = std::string(line.substr(5));
  cache.s_.loaded.reserve(static_cast<size_t>(std::count(in.begin(), in.end(), '\n')));
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
    std::string_view size, mtime, ctime, ino, mode;
    Loaded e;
    if (!field(e.value) || !field(size) || !field(mtime) || !field(ctime) || !field(ino) ||
        !field(mode) || !fields.empty() || !parse(size, e.st.size) ||
        !parse(mtime, e.st.mtime_ns) || !parse(ctime, e.st.ctime_ns) || !parse(ino, e.st.ino) ||
        !parse(mode, e.st.mode))
      continue;
    e.key = line.substr(tab + 1);
    e.line = line;
    cache.s_.loaded.push_back(e);
  }
  cache.s_.text = std::move(shared);
  cache.index();
  return cache;
}

void StatCache::index() {
  size_t n = 16;
  while (n < 2 * s_.loaded.size()) n *= 2;
  s_.slots.assign(n, 0);
  const std::hash<std::string_view> hash;
  for (size_t i = 0; i < s_.loaded.size(); ++i) {
    const std::string_view key = s_.loaded[i].key;
    for (size_t at = hash(key) & (n - 1);; at = (at + 1) & (n - 1)) {
      if (s_.slots[at] == 0) {
        s_.slots[at] = static_cast<uint32_t>(i + 1);
        break;
      }
      if (s_.loaded[s_.slots[at] - 1].key == key) {  // a key twice: the later line wins
        s_.loaded[s_.slots[at] - 1].replaced = true;
        s_.slots[at] = static_cast<uint32_t>(i + 1);
        break;
      }
    }
    // Parents are added deepest first; one already known has its own parents known too.
    for (size_t slash = key.rfind('/'); slash != std::string_view::npos && slash > 0;
         slash = key.rfind('/', slash - 1)) {
      if (!s_.loaded_dirs.insert(key.substr(0, slash)).second) break;
    }
  }
}

// Where find() looks first: keys are mostly asked in the order they were saved (a walk of
// an unchanged tree, one directory after another), so a lookup is then one comparison in
// memory read in order, not a hash and three cache misses. Only a hint, checked before use:
// shared by every cache a thread reads, and one per thread (a walk may use several).
namespace {
thread_local size_t next_hint = 0;
}  // namespace

const StatCache::Loaded* StatCache::find(std::string_view key) const {
  if (next_hint < s_.loaded.size()) {
    const Loaded& e = s_.loaded[next_hint];
    if (e.key == key && !e.replaced) {
      ++next_hint;
      return &e;
    }
  }
  if (s_.slots.empty()) return nullptr;
  const size_t mask = s_.slots.size() - 1;
  for (size_t at = std::hash<std::string_view>()(key) & mask;; at = (at + 1) & mask) {
    if (s_.slots[at] == 0) return nullptr;
    const Loaded& e = s_.loaded[s_.slots[at] - 1];
    if (e.key == key) {
      next_hint = s_.slots[at];
      return &e;
    }
  }
}

std::optional<std::string_view> StatCache::lookup_view(std::string_view key,
                                                       const FileStat& st) const {
  const Loaded* e = find(key);
  if (e == nullptr || !(e->st == st)) return std::nullopt;
  if (st.mtime_ns >= s_.written_ns - kRacyWindowNs) return std::nullopt;
  return e->value;
}

std::optional<std::string> StatCache::lookup(std::string_view key, const FileStat& st) const {
  auto v = lookup_view(key, st);
  if (!v) return std::nullopt;
  return std::string(*v);
}

void StatCache::record(std::string_view key, const FileStat& st, std::string_view value) {
  // The common case, an unchanged file, marks the loaded entry instead of copying it.
  Loaded* e = const_cast<Loaded*>(find(key));
  if (e != nullptr && e->st == st && e->value == value) {
    e->kept = true;
    e->order = s_.recorded_count++;
    if (!s_.recorded.empty()) s_.recorded.erase(std::string(key));
    return;
  }
  if (e != nullptr) e->kept = false;
  s_.recorded[std::string(key)] = Entry{st, std::string(value), s_.recorded_count++};
}

Status StatCache::save(const fs::path& file, bool keep_loaded) const {
  std::string out;
  out.reserve(s_.recorded.size() * 128 + (s_.text ? s_.text->size() : 0) + s_.meta.size() + 64);
  out += kHeader;
  out += '\n';
  append_number(out, now_ns());
  out += '\n';
  if (!s_.meta.empty() && s_.meta.find('\n') == std::string::npos) out += "meta " + s_.meta + "\n";
  // In the order recorded (a walk's order), loaded entries kept unrecorded after them.
  struct Out {
    uint64_t order;
    const std::string* key;  // recorded
    const Entry* entry;
    const Loaded* loaded;
  };
  std::vector<Out> order;
  order.reserve(s_.recorded.size() + s_.loaded.size());
  for (const auto& [key, e] : s_.recorded) order.push_back({e.order, &key, &e, nullptr});
  for (const Loaded& e : s_.loaded) {
    if (e.replaced) continue;
    if (e.kept) {
      order.push_back({e.order, nullptr, nullptr, &e});
    } else if (keep_loaded && e.st.mtime_ns < s_.written_ns - kRacyWindowNs &&
               !s_.recorded.count(std::string(e.key))) {
      // A loaded entry that was racy when its cache was written must not become trusted
      // just because this save has a later time: it is dropped instead.
      order.push_back({~uint64_t{0}, nullptr, nullptr, &e});
    }
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const Out& a, const Out& b) { return a.order < b.order; });
  for (const Out& o : order) {
    if (o.loaded != nullptr) {
      out += o.loaded->line;  // as loaded: the same fields in the same format
      out += '\n';
      continue;
    }
    const std::string& key = *o.key;
    const Entry& e = *o.entry;
    if (key.find('\n') != std::string::npos) continue;  // cannot be written; not cached
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
  }
  seal(out);
  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  return write_file_replacing(file, out);
}

}  // namespace cairn
