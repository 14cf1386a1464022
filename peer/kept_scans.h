// The digests of the directories an agent listed last (ScanCache, checkpoint_manifest.h), so
// that a fetch tried again after a dropped link lists the same directory without reading its
// unchanged files again: a staged checkpoint's (agent_checkpoints.h) and an orphan's
// (engine/coordinator/remote_orphans.h). Bounded: the `most` directories listed last; what a
// directory's entry holds is checked against each file's identity on every use, so an entry
// kept past the directory's life (removed, made again) costs nothing but memory.
//
// Thread-safety: every member may be called from any thread (one mutex).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "peer/checkpoint_manifest.h"

namespace cairn {

class KeptScans {
 public:
  explicit KeptScans(size_t most = 16) : most_(most) {}

  // `dir`'s last listing (a copy), or an empty one.
  ScanCache of(const std::string& dir);
  // Keeps `cache` as `dir`'s last listing, forgetting the directory listed longest ago past
  // `most`.
  void keep(const std::string& dir, ScanCache cache);
  void forget(const std::string& dir);

 private:
  struct Kept {
    ScanCache cache;
    uint64_t listed = 0;  // clock_ when it was kept
  };
  const size_t most_;
  std::mutex mutex_;
  std::map<std::string, Kept> kept_;
  uint64_t clock_ = 0;
};

// ", 2 digests kept from an earlier listing" ("" for 0), for the agent's log lines.
std::string kept_digests_text(size_t reused);

// scan_checkpoint_dir of `dir` with `scans`' last listing of it, kept for the next.
Result<WireManifest> scan_again(KeptScans& scans, const std::filesystem::path& dir,
                                ScanCounts* counts);

}  // namespace cairn
