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
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

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
  // Empty when the file is missing or unreadable: a cache is never an error.
  static StatCache load(const std::filesystem::path& file);

  std::optional<std::string> lookup(std::string_view key, const FileStat& st) const;
  // The same without a copy: a view into this cache, valid while it lives.
  std::optional<std::string_view> lookup_view(std::string_view key, const FileStat& st) const;
  // Whether the loaded cache has `key`, whatever its stat data; and whether it has a key
  // below the directory `dir` ('/'-separated keys).
  bool contains(std::string_view key) const { return find(key) != nullptr; }
  bool contains_dir(std::string_view dir) const { return s_.loaded_dirs.count(dir) > 0; }
  // A free-form value saved with the cache (one line): what its users need to know
  // about the state it was computed in.
  const std::string& meta() const { return s_.meta; }
  void set_meta(std::string meta) { s_.meta = std::move(meta); }
  void record(std::string_view key, const FileStat& st, std::string_view value);
  // Writes the recorded entries and, with `keep_loaded`, the loaded ones not recorded again
  // (a cache shared by several users); without it, keys not recorded since load drop out (a
  // cache of one tree, where they are deleted files). Written atomically; concurrent
  // writers race harmlessly (the last one wins). Not fsynced: a cache lost in a crash only
  // costs time, and one cut short or damaged is not loaded at all (its end line carries a
  // check of every byte before it).
  Status save(const std::filesystem::path& file, bool keep_loaded = false) const;

 private:
  // A loaded entry: views into the loaded file's text, which copies of the cache share, so
  // loading allocates per file nothing but its slot (a cache of 10,000 files is loaded on
  // every snapshot).
  struct Loaded {
    std::string_view key, value, line;
    FileStat st;
    bool kept = false;      // recorded again as it was: saved by copying its line
    uint64_t order = 0;     // when kept
    bool replaced = false;  // its key comes again later in the file, which wins
  };
  struct Entry {
    FileStat st;
    std::string value;
    uint64_t order = 0;  // saved in the order recorded, which is how they will be asked
  };
  const Loaded* find(std::string_view key) const;
  void index();  // fills slots and loaded_dirs from loaded
  // Copies share the loaded text (never modified), so their views stay valid.
  struct State {
    int64_t written_ns = 0;  // when the loaded file was written
    std::shared_ptr<const std::string> text;
    std::vector<Loaded> loaded;
    std::vector<uint32_t> slots;  // open addressing: index into loaded + 1, 0 when free
    std::unordered_map<std::string, Entry> recorded;
    uint64_t recorded_count = 0;
    // Every parent directory of a loaded key; views into text.
    std::unordered_set<std::string_view> loaded_dirs;
    std::string meta;
  } s_;
};

}  // namespace cairn
