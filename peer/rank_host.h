// What runs ranks for one agent connection (rank_messages.h). The agent server (peer/)
// only speaks the protocol; the host that starts processes lives with the code that knows
// how (engine/coordinator/agent_rank_host.h), and the CLI hands the server a factory. An
// agent without a host refuses every launch.
//
// Thread-safety: one host per connection, used by that connection's thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "peer/rank_messages.h"

namespace cairn {

class RankHost {
 public:
  virtual ~RankHost() = default;
  // Starts the rank; an error (one line) when it could not start: nothing runs then.
  virtual Status start(const RemoteLaunch& launch) = 0;
  // Signals the rank's process group; nothing when it has ended or is not known.
  virtual void signal(int64_t rank, int sig) = 0;

  struct Event {
    int64_t rank = 0;
    std::string output;  // at most kOutputChunkBytes, when not empty
    bool ended = false;  // after all of its output
    int code = 0;
    int signal = 0;
  };
  // What happened since the last call: output pieces in order, then each ended rank once.
  // Never blocks.
  virtual std::vector<Event> poll() = 0;
  // Descriptors that become readable when a running rank ends (pidfds) — and, where
  // event_driven(), when it writes output — so the connection waits on them with its socket
  // instead of looking every few milliseconds; empty where the host has none (it is then
  // polled). Valid until the next call of poll().
  virtual std::vector<int> exit_fds() const { return {}; }
  // Whether exit_fds() also wake the connection for every piece of output (and for output
  // left over from the last poll()), so that it need not look every few milliseconds.
  virtual bool event_driven() const { return false; }
  // The rank's process id on this machine (0 when not known), and whether it still runs (not
  // ended, reaped or not): what a `cairn resume` is told of the ranks it may adopt.
  virtual int64_t pid(int64_t rank) const {
    (void)rank;
    return 0;
  }
  virtual bool alive(int64_t rank) const {
    (void)rank;
    return false;
  }
  // Kills every rank still running (the connection is gone) and reaps them.
  virtual void kill_all() = 0;
  // The running ranks are about to be asked to checkpoint as orphans (agent_orphans.h): the
  // directories their CAIRN_ORPHAN_DIR names are made now (they are not at launch). An error
  // is left to the rank's SDK, which makes them too.
  virtual void make_orphan_dirs() {}
};

using RankHostFactory = std::function<std::unique_ptr<RankHost>()>;

}  // namespace cairn
