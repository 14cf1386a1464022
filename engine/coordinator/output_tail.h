// Follows the files trials write their output to. inotify says which file grew, so the
// coordinator's poll loop wakes for output without polling the files themselves.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string_view>
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
  // Reads what was appended since the last read, at most kReadLimit bytes. Empty when
  // nothing. The view is into a buffer reused by the next call. A file found shorter than
  // what was read of it was truncated: it is read again from its start.
  std::string_view read_new(int64_t key);
  static constexpr size_t kReadLimit = 1 << 20;
  uint64_t offset(int64_t key) const;

 private:
  struct Followed {
    UniqueFd fd;
    int watch = -1;
    uint64_t offset = 0;
  };
  ssize_t read_at(Followed& f);  // pread at f.offset into buffer_

  UniqueFd inotify_;
  std::map<int64_t, Followed> followed_;
  // One buffer for every read, allocated on first use and never zeroed: a fresh zeroed
  // 1 MiB per call (mmap, page faults, memset) was most of the cost of tailing small output.
  std::unique_ptr<char[]> buffer_;
};

}  // namespace cairn
