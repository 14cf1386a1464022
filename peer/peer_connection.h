// One authenticated, encrypted connection between two cairns (tls_session.h) carrying
// frames (frame.h). Sockets are non-blocking underneath; every call takes a deadline, and
// may take a "stop" descriptor (a pipe the owner makes readable to end every wait at once,
// e.g. on SIGTERM), so no call blocks for ever on a silent or hostile peer.
//
// OpenSSL writes to the socket with write(2): a process using this must ignore SIGPIPE (the
// agent's SignalPipe and `cairn peers` do), or a peer that closes first kills it.
//
// Thread-safety: one thread at a time per connection.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "common/file_util.h"
#include "common/json.h"
#include "common/status.h"
#include "peer/frame.h"
#include "peer/peer_address.h"
#include "peer/session_journal.h"
#include "peer/tls_session.h"

namespace cairn {

using Deadline = std::chrono::steady_clock::time_point;

// Why a connection could not be made or used, as `cairn peers` reports it.
enum class PeerFailure {
  kNone,
  kUnreachable,      // no TCP connection (refused, timed out, no route, name not found)
  kKeyMismatch,      // the TLS handshake failed: the two ends hold different keys (or none)
  kVersionMismatch,  // authenticated, but the peer speaks another protocol version
  kBroken,           // anything else: a malformed reply, a peer that closed mid-way
};
const char* peer_failure_name(PeerFailure failure);  // "ok", "key_mismatch", …

// A release for a connection (PeerConnection::set_release): a descriptor and a flag, not
// owned.
struct PeerRelease {
  int wake_fd = -1;
  const std::atomic<bool>* released = nullptr;
  const char* reason = nullptr;  // what the error says after "released: " (null: the default)
};

class PeerConnection {
 public:
  // Connects to an agent and completes the handshake as the client. On failure `failure`
  // (when given) says which kind; the error is one line naming the address and, for a key
  // mismatch, our key id. `release` (when given) is set on the connection before the
  // handshake, so a release also ends a handshake that an agent which accepts connections
  // but does not answer (a stopped process) would hold until `deadline`.
  static Result<std::unique_ptr<PeerConnection>> connect(const PeerAddress& address,
                                                         std::shared_ptr<TlsContext> client,
                                                         Deadline deadline,
                                                         PeerFailure* failure = nullptr,
                                                         const PeerRelease* release = nullptr);
  // Completes the handshake as the server on an accepted socket. The error is one line
  // naming what the peer offered ("key id 1f2e… (this agent's is 9a8b…)", "no cluster key
  // offered", "not TLS 1.3: …").
  static Result<std::unique_ptr<PeerConnection>> accept(UniqueFd fd,
                                                        std::shared_ptr<TlsContext> server,
                                                        Deadline deadline, int stop_fd = -1);
  ~PeerConnection();

  const std::string& peer_name() const { return peer_name_; }  // "127.0.0.1:53412"
  void set_stop_fd(int fd) { stop_fd_ = fd; }
  // A second descriptor that ends every wait (sends included) once it is readable while
  // `*released` is true: kFailed "released: …". An agent's session connection is given its
  // session's wake pipe and release flag (agent_sessions.h), so a coordinator that resumes
  // the session on a new connection makes the old one let go at once, even in the middle of
  // a send to a link gone silent whose socket buffers are full. A byte found while
  // `*released` is false is a stale wake-up: read and ignored. Neither is owned; -1/nullptr:
  // none. `reason` (static text; null: "a new connection resumes its session") follows
  // "released: " in the error.
  void set_release(int wake_fd, const std::atomic<bool>* released, const char* reason = nullptr) {
    release_fd_ = wake_fd;
    released_ = released;
    release_reason_ = reason;
  }
  // Counts the frames sent and received from now on, and keeps those sent, for a session
  // that can be resumed on another connection (session_journal.h); nullptr: none. Not owned.
  void set_journal(SessionJournal* journal) { journal_ = journal; }
  // The TCP socket: for its addresses, and for a caller that waits on it with other
  // descriptors (control_relay.h); never read it. Bytes OpenSSL has already read are not
  // visible to a poll() on it: call receive() with a deadline of now until it times out
  // before waiting.
  int fd() const { return fd_.get(); }
  int stop_fd() const { return stop_fd_; }

  Status send(const Json& message, Deadline deadline);
  // Bytes as they are, inside TLS: for tests of the frame layer (a malformed or oversized
  // frame) and for bulk data that is already framed.
  Status send_bytes(std::string_view bytes, Deadline deadline);
  // The next message; nullopt when the peer closed the connection cleanly between frames.
  // Errors: a frame error (frame.h's line), a timeout, the stop descriptor, a broken
  // connection. After an error the connection is unusable, except after a timeout
  // (kFailed "timed out"): nothing was consumed then, and receive may be called again.
  Result<std::optional<Json>> receive(Deadline deadline);
  // Reads exactly `n` bytes of raw payload into `out`: bulk data that follows a message
  // announcing its size (peer/checkpoint_wire.h), outside the frame layer. Errors as
  // receive's; a close before `n` bytes is one.
  Status receive_raw(char* out, size_t n, Deadline deadline);
  // Sends TLS close_notify (best effort, bounded by `deadline`).
  void close(Deadline deadline);

 private:
  PeerConnection(UniqueFd fd, std::unique_ptr<TlsSession> tls, std::string peer_name)
      : fd_(std::move(fd)), tls_(std::move(tls)), peer_name_(std::move(peer_name)) {}
  // Waits until the socket is readable (`write` false) or writable; kFailed on the
  // deadline, the stop descriptor or a release (set_release).
  Status wait(bool write, Deadline deadline);
  Status handshake(Deadline deadline);

  UniqueFd fd_;
  std::unique_ptr<TlsSession> tls_;
  std::string peer_name_;
  int stop_fd_ = -1;
  int release_fd_ = -1;
  const std::atomic<bool>* released_ = nullptr;
  const char* release_reason_ = nullptr;
  FrameDecoder decoder_;
  SessionJournal* journal_ = nullptr;
};

}  // namespace cairn
