// The checkpoint transfers of one agent, let go together when its session finds the link
// silent (docs/peers.md "Checkpoint transfers over a dropped link"). A link gone silent — a
// NAT that forgot the connections, a cable pulled and put back — shows no end to either side:
// a transfer waiting for its next frame would notice only at the wire's 60 s timeout. The
// session's heartbeats notice within half the heartbeat timeout; when its connection is
// replaced for silence (remote_launcher.cc), release_all() ends every wait of the transfer
// connections open then (PeerConnection::set_release), each of which fails as the link's and
// is tried again on a new connection (checkpoint_retry.h). Connections opened later are not
// affected.
//
// The agent has one per coordinator session for its side of the same transfers
// (agent_sessions.h AgentSession::transfers): released when that session's connection ends
// (dropped, silent, claimed by a new connection, ended), so the agent's thread lets go then
// too instead of holding the staged directory until the 60 s timeout.
//
// Thread-safety: every member may be called from any thread; a Registration is used by the
// thread of the one connection it was made for.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <set>

#include "common/file_util.h"
#include "peer/peer_connection.h"

namespace cairn {

class LinkWatch {
 public:
  // One connection's release: a pipe and a flag of its own, until destroyed (after the
  // connection it was given to).
  class Registration {
   public:
    ~Registration();
    Registration(const Registration&) = delete;
    Registration& operator=(const Registration&) = delete;
    PeerRelease release() const {
      return PeerRelease{wake_read_.get(), &released_, watch_->reason_};
    }

   private:
    friend class LinkWatch;
    explicit Registration(std::shared_ptr<LinkWatch> watch) : watch_(std::move(watch)) {}
    std::shared_ptr<LinkWatch> watch_;
    UniqueFd wake_read_, wake_write_;
    std::atomic<bool> released_{false};
  };

  // `reason` (static text) is what a released wait's error says after "released: "; null:
  // PeerConnection's default ("a new connection resumes its session").
  explicit LinkWatch(const char* reason = nullptr) : reason_(reason) {}

  // Makes `peer` end its waits at the next release_all(); nullptr (and nothing changes)
  // when no pipe can be made.
  static std::unique_ptr<Registration> watch(const std::shared_ptr<LinkWatch>& watch,
                                             PeerConnection& peer);
  // A registration for a connection still to be made: its release() goes to
  // PeerConnection::connect, so a release_all() from now on also ends the handshake (an agent
  // lost while a transfer connects to it: a stopped agent accepts and never answers).
  // nullptr when no pipe can be made.
  static std::unique_ptr<Registration> ahead(const std::shared_ptr<LinkWatch>& watch);
  // Lets go of every connection registered now.
  void release_all();

 private:
  const char* reason_;
  std::mutex mutex_;
  std::set<Registration*> registered_;
};

}  // namespace cairn
