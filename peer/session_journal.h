// What lets a coordinator's connection to an agent be resumed on a new TCP connection
// after the link dropped (docs/peers.md "Reattach"): each end counts the frames it sent
// and received on the session, and keeps the frames it sent until the other end says it
// has them. Resuming, each end says how many it received, and the other sends again what
// came after: every frame arrives once, in order, as if the link had never dropped.
//
// The count is carried by the frames themselves: the coordinator's heartbeats and the
// agent's answers to them carry "received" (how many frames that end has received), which
// frees what the other end kept. The session's own frames (kSessionFrameTypes: opening,
// resuming, goodbye) are neither counted nor kept; neither is raw data outside the frame
// layer (receive_raw), which a session connection does not carry.
//
// Bounded: at most kJournalBytes of sent frames are kept. A frame that would pass it drops
// the oldest, and the session can then no longer be resumed past them (replay_after says
// so): its link drop becomes a lost connection, as without a journal.
//
// Thread-safety: none; the connection's thread uses it (PeerConnection calls it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "common/json.h"
#include "common/status.h"

namespace cairn {

inline constexpr size_t kJournalBytes = size_t{64} << 20;

// Whether a frame of this type belongs to the session layer (not counted or kept).
bool is_session_frame_type(std::string_view type);

class SessionJournal {
 public:
  explicit SessionJournal(size_t max_bytes = kJournalBytes) : max_bytes_(max_bytes) {}

  // A frame `message` (encoded as `frame`) was sent.
  void sent(const Json& message, std::string frame);
  // A frame `message` was received; a heartbeat's "received" frees what the peer has.
  void received(const Json& message);
  // The peer has received `count` frames of ours: those are no longer kept.
  void acknowledge(int64_t count);

  int64_t sent_count() const { return sent_; }
  int64_t received_count() const { return received_; }
  // How many of our frames the peer said it has received (the highest count acknowledged).
  int64_t acknowledged_count() const { return acknowledged_; }
  size_t kept_bytes() const { return kept_bytes_; }

  // The encoded frames after the first `count` the peer received, to send again in order;
  // an error (one line) when some of them were dropped (the bound) or `count` is more than
  // was sent.
  Result<std::vector<std::string>> replay_after(int64_t count) const;

 private:
  size_t max_bytes_;
  int64_t sent_ = 0;
  int64_t received_ = 0;
  int64_t acknowledged_ = 0;
  int64_t first_kept_ = 1;  // the number of kept_.front() (frames are numbered from 1)
  std::deque<std::string> kept_;
  size_t kept_bytes_ = 0;
};

}  // namespace cairn
