// Follows the files trials write their output to. inotify says which file grew, so the
// coordinator's poll loop wakes for output without polling the files themselves.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <vector>

#include "common/file_util.h"
#include "common/status.h"

namespace cairn {

class OutputTail {
 public:
  static Result<OutputTail> create();
  int fd() const { return inotify_.get(); }

  // Starts following `file` for `key` (a trial index); reads begin at `offset`.
  Status follow(int64_t key, const std::filesystem::path& file, uint64_t offset);
  void stop(int64_t key);
  // The keys whose files changed since the last call (drains the inotify queue).
  std::vector<int64_t> changed();
  // Reads what was appended since the last read, at most `limit` bytes. Empty when nothing.
  std::string read_new(int64_t key, size_t limit = 1 << 20);
  uint64_t offset(int64_t key) const;

 private:
  struct Followed {
    UniqueFd fd;
    int watch = -1;
    uint64_t offset = 0;
  };
  UniqueFd inotify_;
  std::map<int64_t, Followed> followed_;
};

}  // namespace cairn
