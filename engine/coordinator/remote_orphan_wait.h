// A resume's wait for trials' ranks still running on agents (docs/peers.md "Orphans on an
// agent"): the trials whose orphaned ranks still run are waited for here, on a thread of its
// own, while the coordinator's loop starts the other trials; a trial waited for starts only
// once every agent of its placement said its ranks no longer run there (or the wait ended
// without that: then the caller restarts it from its latest registered checkpoint, the agent
// having killed what was left at its own bound).
//
// Each round (every `ask_every`), the agents still to answer are asked at once, each about
// all its trials on one connection (remote_orphans.h ask_remote_orphans).
//
// Thread-safety: settled() may be called from any thread; the asking runs on the object's
// own thread, which the destructor stops and joins (within one round's ask time).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/coordinator/remote_orphans.h"

namespace cairn {

class RemoteOrphanWait {
 public:
  enum class State {
    kWaiting,   // the trial's ranks still run there
    kAnswered,  // they no longer do: `listing` is what the agent holds
    kFailed,    // the agent could not be asked (`why`)
    kTimedOut,  // they still ran at the wait's bound
  };
  struct Entry {
    int64_t trial = 0;     // the trial's index
    std::string trial_id;  // "1.3"
    std::string machine;   // the agent's name in the placement
    AgentEndpoint agent;
    State state = State::kWaiting;
    OrphanListing listing;
    std::string why;
  };

  // Starts asking about `entries` (each kWaiting) as `owner`, until each is answered, failed,
  // or `give_up` passes.
  RemoteOrphanWait(std::vector<Entry> entries, std::string owner,
                   std::chrono::milliseconds ask_time, std::chrono::milliseconds ask_every,
                   std::chrono::steady_clock::time_point give_up);
  ~RemoteOrphanWait();
  RemoteOrphanWait(const RemoteOrphanWait&) = delete;
  RemoteOrphanWait& operator=(const RemoteOrphanWait&) = delete;

  // The entries of trial `index` once none of them is kWaiting; nullopt while one is.
  std::optional<std::vector<Entry>> settled(int64_t index) const;

 private:
  void run();

  const std::string owner_;
  const std::chrono::milliseconds ask_time_, ask_every_;
  const std::chrono::steady_clock::time_point give_up_;
  mutable std::mutex mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;
  std::vector<Entry> entries_;  // guarded by mu_ (the thread copies what it asks about)
  std::thread thread_;
};

}  // namespace cairn
