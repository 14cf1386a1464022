// The agent's side of checkpoints over the wire (docs/peers.md "Checkpoints over the
// wire"). Three requests, each on a connection of its own that the coordinator opens for it
// (so a large transfer never holds up the connection that runs ranks):
//
// - checkpoint_stage {trial, attempt}: makes a fresh directory for a rank's checkpoint under
//   DIR/work/trials/<trial>/checkpoints/ and remembers it for that trial and attempt;
//   answers {"type": "checkpoint_staged", "path"}.
// - checkpoint_fetch {trial, attempt, path}: a directory staged for that same trial and
//   attempt (anything else — a path outside DIR, another attempt's, one never staged — is
//   refused with one line); answers its manifest, reads the digests the coordinator lacks
//   (each from the offset it asks: checkpoint_want.h, checked before any file is read),
//   sends only those contents (checkpoint_send.h, as for an orphan's fetch), then waits for
//   checkpoint_done (sent once the coordinator holds everything durably), removes the
//   directory and answers checkpoint_dropped.
// - checkpoint_offer {trial, attempt, manifest}: a restore. Answers the digests that the
//   content cache DIR/objects lacks, each after what an earlier restore cut in the middle
//   left of it (DIR/objects/tmp-partial-<digest>, kept when a connection breaks), receives
//   them (each verified against its SHA-256 as a whole, kept bytes included, and fsynced
//   before it gets its name), then writes the checkpoint's files to a fresh
//   DIR/work/trials/<trial>/restore-<attempt>-<random> and answers
//   {"type": "checkpoint_restored", "path"}.
//
// A directory fetched, confirmed and removed is still answered for a while: its manifest is
// kept (the latest kDeliveredKept directories, at most kDeliveredFiles files in all), so that
// a fetch of it again by the same trial and attempt gets that manifest and, when it wants no
// content (the coordinator's store has it all), completes. That is a `cairn resume` after a
// coordinator killed between its checkpoint_done and the checkpoint's registration: the
// contents are durable in its store, and the rank's checkpoint_end, never acknowledged, is
// replayed; without the manifest that checkpoint was lost. A content wanted from such a
// directory is answered with an error: it is gone.
//
// A fetch tried again (its link dropped) lists the same staged directory again without
// reading its files a second time: the digests of the files unchanged since the listing
// before are kept per staged directory (ScanCache, checkpoint_manifest.h: keyed by device,
// inode, size, mtime and ctime, never kept for a file written within a clock tick of its
// reading), until the directory's fetch ends with checkpoint_done, for the 16 directories
// listed last (kept_scans.h).
//
// Every exchange logs one line with the content bytes that crossed the wire; the totals are
// also counted here (for tests).
//
// Thread-safety: one AgentCheckpoints is shared by every connection thread of an agent;
// serve() may run on several at once (the table of staged directories is under a mutex).
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "common/json.h"
#include "peer/kept_scans.h"
#include "peer/peer_connection.h"

namespace cairn {

class AgentCheckpoints {
 public:
  // `dir` is the agent's DIR; empty: every checkpoint request is refused.
  explicit AgentCheckpoints(std::filesystem::path dir);

  // Whether `type` is one of the requests above.
  static bool handles(const std::string& type);
  // Serves `request` and the exchange it starts. Returns false when the connection must end
  // (it broke, or the peer went off the protocol mid-exchange; the reason is logged). A
  // request refused before its exchange began is answered {"type": "error", "reason"} and
  // logged as "refused a checkpoint request from NAME: REASON"; the connection goes on.
  bool serve(PeerConnection& peer, const Json& request, const std::string& name);

  uint64_t content_bytes_sent() const { return sent_.load(); }
  uint64_t content_bytes_received() const { return received_.load(); }

 private:
  bool stage(PeerConnection& peer, const Json& request, const std::string& name);
  bool fetch(PeerConnection& peer, const Json& request, const std::string& name);
  bool offer(PeerConnection& peer, const Json& request, const std::string& name);
  bool refuse(PeerConnection& peer, const std::string& name, const std::string& why);
  class PartialClaims;

  // A directory fetched, confirmed and removed (see above).
  struct Delivered {
    std::string trial;
    int64_t attempt = 0;
    WireManifest manifest;
    uint64_t order = 0;  // when it was delivered: the oldest goes first
  };
  static constexpr size_t kDeliveredKept = 64;
  static constexpr size_t kDeliveredFiles = 1 << 16;
  // Keeps `path`'s manifest as delivered, forgetting the oldest past the bounds; under mutex_.
  void keep_delivered(const std::string& path, Delivered delivered);

  std::filesystem::path dir_;
  std::mutex mutex_;
  std::map<std::string, std::pair<std::string, int64_t>> staged_;  // path -> (trial, attempt)
  std::map<std::string, Delivered> delivered_;                     // path -> its manifest
  uint64_t delivered_order_ = 0;
  KeptScans scans_;  // staged path -> the digests of its last listing
  // Contents a restore is receiving into objects/tmp-partial-<digest> now (PartialClaims).
  std::set<std::string> receiving_;
  std::atomic<uint64_t> sent_{0}, received_{0};
};

}  // namespace cairn
