// A cache of values computed from a file's content (a SHA-256, a git blob id), keyed by the
// file's path and trusted only while its stat data is unchanged, so an unchanged tree is
// re-read with a stat per file instead of a read. Used by code snapshots and fingerprints.
//
// Like git's index it guards against the "racy" case: a file modified within the same
// timestamp granule as the cache was written could keep its stat data, so entries whose
// mtime is not comfortably older than the cache file's own writing are not trusted.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "common/status.h"

namespace cairn {

struct FileStat {
  uint64_t size = 0;
  int64_t mtime_ns = 0, ctime_ns = 0;
  uint64_t ino = 0;
  uint32_t mode = 0;
  bool operator==(const FileStat&) const = default;
  static FileStat of(const struct stat& st);
};

class StatCache {
 public:
  StatCache() = default;
  StatCache(StatCache&&) = default;  // loaded_dirs_ stays valid: the map's nodes move along
  StatCache& operator=(StatCache&&) = default;
  StatCache(const StatCache& o) { *this = o; }
  StatCache& operator=(const StatCache& o);

  // Empty when the file is missing or unreadable: a cache is never an error.
  static StatCache load(const std::filesystem::path& file);

  std::optional<std::string> lookup(const std::string& key, const FileStat& st) const;
  // Whether the loaded cache has `key`, whatever its stat data; and whether it has a key
  // below the directory `dir` ('/'-separated keys).
  bool contains(const std::string& key) const { return loaded_.count(key) > 0; }
  bool contains_dir(std::string_view dir) const { return loaded_dirs_.count(dir) > 0; }
  // A free-form value saved with the cache (one line): what its users need to know
  // about the state it was computed in.
  const std::string& meta() const { return meta_; }
  void set_meta(std::string meta) { meta_ = std::move(meta); }
  void record(const std::string& key, const FileStat& st, const std::string& value);
  // Writes the recorded entries and, with `keep_loaded`, the loaded ones not recorded again
  // (a cache shared by several users); without it, keys not recorded since load drop out (a
  // cache of one tree, where they are deleted files). Written atomically; concurrent
  // writers race harmlessly (the last one wins). Not fsynced: a cache lost in a crash only
  // costs time, and one cut short (no end line) is not loaded.
  Status save(const std::filesystem::path& file, bool keep_loaded = false) const;

 private:
  struct Entry {
    FileStat st;
    std::string value;
    bool kept = false;  // a loaded entry recorded again as it was
  };
  void index_dir_of(std::string_view key);
  int64_t written_ns_ = 0;  // when the loaded file was written
  std::unordered_map<std::string, Entry> loaded_, recorded_;
  // Every parent directory of a loaded key; views into loaded_'s keys, which stay put.
  std::unordered_set<std::string_view> loaded_dirs_;
  std::string meta_;
};

}  // namespace cairn
