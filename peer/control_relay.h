// A rank's control channel (docs/protocol.md) relayed through the agent's connection
// (docs/peers.md "The control channel through the agent"), one end on each side:
//
// - On the agent, the connection has one Unix listener under the agent's directory (listen,
//   made at its first launch), which every rank's CAIRN_CONTROL names. A connection to it is
//   the rank's whose process it comes from (the kernel's SO_PEERCRED: the rank's process, a
//   process of its process group, or a descendant of it); any other is refused. Every
//   connection a rank opens becomes a stream: control_open {stream, rank} goes to the
//   coordinator, then the bytes travel in control_data frames (control_frames.h). One
//   listener per connection rather than per rank: a socket file is a new inode, and making
//   and deleting one per rank was among the agent's largest costs per trial (ext4's inode
//   allocation; bench/RESULTS.md).
// - On the coordinator, a control_open connects to the coordinator's own control socket
//   (the CAIRN_CONTROL the coordinator gave that rank, `target`), and the bytes are pumped
//   both ways.
//
// Event-driven: receive() waits in one poll() on the TLS socket (after draining what
// OpenSSL holds already), the stop and wake descriptors, the listeners and the streams'
// sockets, so a byte a rank writes leaves at once. Each direction of a stream holds at most
// kControlWindowBytes in flight: a side reads from its socket only while the other end has
// acknowledged enough (control_ack once written), so a slow reader holds back its writer
// instead of growing a buffer. Acks go once a quarter window has been written, not per
// chunk: a control message of a few hundred bytes then costs one frame, not two (and one
// wake-up of the other side less), and a writer is still never held back by a reader that
// keeps up (it has three quarters of the window left while the quarter is acknowledged). Closing
// either end closes the other; every stream ends with its relay (the connection).
//
// What the other side sends is checked: an id that names no stream, data for a stream that
// is not open, data over the window, a malformed control frame, a control_open the agent
// should not get or for a rank that is not running: each is refused with one log line (and
// the stream, if any, closed); the connection goes on.
//
// Thread-safety: one thread at a time uses a relay (the connection's; AgentSessions' once
// the session has no connection); `target` and `log` are called on it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/file_util.h"
#include "common/json.h"
#include "common/status.h"
#include "peer/control_frames.h"
#include "peer/peer_connection.h"
#include "peer/rank_messages.h"
#include "peer/session_adoption.h"

namespace cairn {

class ControlRelay {
 public:
  using Log = std::function<void(const std::string&)>;
  // The coordinator's control address ("unix:/path") for a rank of this connection, or ""
  // when the rank is not one of its running ranks.
  using Target = std::function<std::string(int64_t rank)>;

  // The agent's end. Sockets go in `socket_dir` (made 0700), or in a fresh directory under
  // /tmp when a socket's path there would be too long for a Unix address (or the directory
  // is empty).
  static std::unique_ptr<ControlRelay> for_agent(std::filesystem::path socket_dir, Log log);
  // The coordinator's end.
  static std::unique_ptr<ControlRelay> for_coordinator(Target target, Log log);
  ~ControlRelay();
  ControlRelay(const ControlRelay&) = delete;
  ControlRelay& operator=(const ControlRelay&) = delete;

  // Agent: the connection's listener (made at the first call, until close_all); returns its
  // address for CAIRN_CONTROL ("unix:/path").
  Result<std::string> listen();
  // Agent: sets every variable of `launch.paths` of kind "control" to the listener's address,
  // takes them out of `paths`, and expects `launch.rank` (refused when it runs already).
  Status give_control(RemoteLaunch& launch);
  // Agent: the rank expected by give_control runs as process `pid` (its own process group):
  // connections from it, its group or its descendants are its own from now on.
  void rank_started(int64_t rank, int64_t pid);
  // Agent: before a rank's exit is sent, what its streams hold is read and sent (as far as
  // their windows allow), so the coordinator gets a rank's last messages before its exit,
  // as it would from a local rank.
  Status drain_rank(PeerConnection& peer, int64_t rank);
  // Agent: the rank ended (or did not start); connections from its processes are refused from
  // now on. Its open streams end as its sockets close.
  void rank_ended(int64_t rank);

  // Waits until `deadline` for the next message from `peer` that is not a control frame,
  // relaying streams meanwhile. Answers as PeerConnection::receive does; "timed out" also
  // when `wake_fd` (when given) became readable (its bytes are read), or one of `also`
  // (RankHost::exit_fds: left unread).
  Result<std::optional<Json>> receive(PeerConnection& peer, Deadline deadline, int wake_fd = -1,
                                      const std::vector<int>& also = {});

  // Closes every stream and the listener (its socket file removed): the connection is lost,
  // or its ranks are to checkpoint as orphans.
  void close_all();

  size_t open_streams() const { return streams_.size(); }

  // Agent, for a `cairn resume` that adopts the session (session_adoption.h): what was
  // queued for the dead coordinator is dropped and nothing counts as in flight any more;
  // while paused, nothing is read from the ranks (neither new connections nor bytes).
  void forget_peer();
  void set_paused(bool paused) { paused_ = paused; }
  // Opens every stream of `ranks` again towards the new coordinator (control_open with the
  // same id, then the stream's replay: its hello and unanswered requests); the other ranks'
  // streams are closed.
  void adopt(const std::set<int64_t>& ranks);
  // Agent: the next_operation answers the rank was given, over all its streams (a rank that
  // connects again counts on): what session_adopted says of it.
  AnsweredOperations operations_of(int64_t rank) const;

 private:
  struct Stream {
    UniqueFd fd;
    int64_t rank = 0;
    std::string out;       // from the other side, not yet written to the socket
    size_t in_flight = 0;  // sent to the other side, not yet acknowledged
    size_t unacked = 0;    // from the other side, written (or swallowed), not yet acknowledged
    bool closing = false;  // the other side closed: write what is left, then close
    StreamLines lines;     // agent: what a coordinator that adopts the rank needs
  };

  ControlRelay() = default;
  void handle(const Json& message);
  void on_open(const ControlFrame& frame);
  // Reads from / writes to a stream's socket as poll said; false when the stream ended.
  bool pump(int64_t id, Stream& stream, short revents);
  bool write_out(int64_t id, Stream& stream);
  // `bytes` of the other side's data left this end; acknowledged once a quarter window has.
  void credit(int64_t id, Stream& stream, size_t bytes);
  void end_stream(int64_t id, bool tell_peer);
  // Whether `id` names a stream that existed (data may still arrive for it after either
  // side closed it: not an error).
  bool was_open(int64_t id) const;
  Status flush(PeerConnection& peer);
  // Agent: takes the connections waiting on the listener; each becomes a stream of the rank
  // it comes from, or is refused (closed, one log line).
  void accept_ranks();
  // Agent: which expected rank the process `pid` speaks for, if any (the rank's process, a
  // process of its group, or one of its descendants).
  std::optional<int64_t> rank_of_process(int64_t pid) const;

  bool agent_ = false;
  std::filesystem::path socket_dir_;
  std::filesystem::path fallback_dir_;  // made under /tmp when socket_dir_ does not fit
  Target target_;
  Log log_;
  std::map<int64_t, Stream> streams_;
  UniqueFd listener_;                    // agent: every rank's, made at the first launch
  std::filesystem::path listener_path_;  // its socket file, removed with it
  std::map<int64_t, int64_t> ranks_;     // agent: expected or running rank -> pid (0: not yet)
  std::set<int64_t> closed_;             // recently ended streams (bounded)
  int64_t next_stream_ = 1;
  uint64_t id_ = 0;  // this relay's number in the process, for socket names
  std::vector<Json> outgoing_;
  bool paused_ = false;  // agent: a session being adopted (forget_peer)
  // Agent: the operations of a running rank's ended streams, which its next stream counts on
  // from (StreamLines::set_operations). Erased when the rank ends.
  std::map<int64_t, AnsweredOperations> ended_operations_;
};

}  // namespace cairn
