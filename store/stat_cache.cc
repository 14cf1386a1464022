#include "store/stat_cache.h"

#include <chrono>
#include <sstream>

#include "common/file_util.h"

namespace cairn {
namespace fs = std::filesystem;

namespace {

constexpr const char* kHeader = "cairn-stat-cache 1";
constexpr int64_t kRacyWindowNs = 1'000'000'000;  // coarse file systems have 1 s mtimes

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
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
  auto text = read_file(file);
  if (!text.ok()) return cache;
  std::istringstream in(*text);
  std::string line;
  if (!std::getline(in, line) || line != kHeader) return cache;
  if (!(in >> cache.written_ns_)) return cache;
  std::getline(in, line);
  if (in.peek() == 'm' && std::getline(in, line) && line.rfind("meta ", 0) == 0)
    cache.meta_ = line.substr(5);
  // Lines: value size mtime_ns ctime_ns ino mode <TAB> key
  while (std::getline(in, line)) {
    const size_t tab = line.find('\t');
    if (tab == std::string::npos) continue;
    std::istringstream fields(line.substr(0, tab));
    Entry e;
    if (!(fields >> e.value >> e.st.size >> e.st.mtime_ns >> e.st.ctime_ns >> e.st.ino >>
          e.st.mode))
      continue;
    const std::string key = line.substr(tab + 1);
    for (size_t slash = key.find('/'); slash != std::string::npos; slash = key.find('/', slash + 1))
      cache.loaded_dirs_.insert(key.substr(0, slash));
    cache.loaded_[key] = std::move(e);
  }
  return cache;
}

std::optional<std::string> StatCache::lookup(const std::string& key, const FileStat& st) const {
  auto it = loaded_.find(key);
  if (it == loaded_.end() || !(it->second.st == st)) return std::nullopt;
  if (st.mtime_ns >= written_ns_ - kRacyWindowNs) return std::nullopt;
  return it->second.value;
}

void StatCache::record(const std::string& key, const FileStat& st, const std::string& value) {
  recorded_[key] = Entry{st, value};
}

Status StatCache::save(const fs::path& file, bool keep_loaded) const {
  std::string out = std::string(kHeader) + "\n" + std::to_string(now_ns()) + "\n";
  if (!meta_.empty() && meta_.find('\n') == std::string::npos) out += "meta " + meta_ + "\n";
  auto entries = recorded_;
  // A loaded entry that was racy when its cache was written must not become trusted just
  // because this save has a later time: it is dropped instead.
  if (keep_loaded)
    for (const auto& [key, e] : loaded_)
      if (e.st.mtime_ns < written_ns_ - kRacyWindowNs) entries.emplace(key, e);
  for (const auto& [key, e] : entries) {
    if (key.find('\n') != std::string::npos) continue;  // cannot be written; simply not cached
    out += e.value + " " + std::to_string(e.st.size) + " " + std::to_string(e.st.mtime_ns) + " " +
           std::to_string(e.st.ctime_ns) + " " + std::to_string(e.st.ino) + " " +
           std::to_string(e.st.mode) + "\t" + key + "\n";
  }
  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  return write_file_atomic(file, out);
}

}  // namespace cairn
