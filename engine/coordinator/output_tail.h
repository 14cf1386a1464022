// Follows the files trials write their output to. inotify says which file grew, so the
// coordinator's poll loop wakes for output without polling the files themselves.
//
// A file may be followed before it exists: a remote rank's is made when its first byte
// arrives (launcher.h take_new_outputs). It is opened and watched when attach() names it,
// or by the first read_new() that finds it; until then it reads as empty.
//
// Not thread-safe: the coordinator's loop is the only caller.
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

  // Starts following `file` for `key` (a trial index); reads begin at `offset`. A file that
  // does not exist yet is followed from when it does (above); any other failure to open or
  // watch it is an error, and the key is not followed.
  Status follow(int64_t key, const std::filesystem::path& file, uint64_t offset);
  // `file` exists now: the keys that followed it before it did, which are watched from now
  // on. What was written before the watch raised no event: the caller reads them.
  std::vector<int64_t> attach(const std::filesystem::path& file);
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
    std::filesystem::path file;
    UniqueFd fd;     // none while the file does not exist
    int watch = -1;  // inotify's; -1 while the file does not exist
    uint64_t offset = 0;
  };
  // Opens and watches f.file. Ok with f still unopened when the file does not exist.
  Status open(Followed& f);
  ssize_t read_at(Followed& f);  // pread at f.offset into buffer_

  UniqueFd inotify_;
  std::map<int64_t, Followed> followed_;
  // One buffer for every read, allocated on first use and never zeroed: a fresh zeroed
  // 1 MiB per call (mmap, page faults, memset) was most of the cost of tailing small output.
  std::unique_ptr<char[]> buffer_;
};

}  // namespace cairn
