// One push of a checkpoint per agent per restore, and one scan of it for all agents
// (docs/peers.md "Restoring a gang"). When a data-parallel trial starts from a checkpoint
// with ranks on agents, each of those ranks waits, on a thread of its own
// (remote_launcher.cc restore_then_launch), for the checkpoint to be on its agent before its
// launch. Of the ranks on one agent only the first pushes it (sending what the agent
// lacks); the others wait for that push and launch with the same restored directory — as the
// ranks on this machine share the one copy restored from the store. And the checkpoint is
// hashed here once for the restore (scan_for_restore), whichever agent's push comes first.
//
// A restore is named by the trial, its attempt and the local checkpoint directory: a later
// attempt of the trial scans and pushes again (its checkpoint may differ, and the agent's
// restored copy of an earlier attempt may be gone). Only the latest restore of each trial
// is kept.
//
// Thread-safety: every member may be called from any thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <string>

#include "common/status.h"
#include "peer/checkpoint_client.h"
#include "peer/checkpoint_manifest.h"

namespace cairn {

// The result of one piece of work per restore, shared by every caller of that restore.
template <typename T>
class OncePerRestore {
 public:
  using Work = std::function<Result<T>()>;

  // The first caller for (`trial`, `attempt`, `checkpoint`) runs `work` on its own thread;
  // later callers for the same restore wait for it (bounded by the work's own timeouts)
  // and get the same result, failures included.
  Result<T> get(const std::string& trial, int64_t attempt, const std::string& checkpoint,
                const Work& work) {
    std::promise<Result<T>> promise;
    {
      std::unique_lock lock(mutex_);
      auto it = latest_.find(trial);
      if (it != latest_.end() && it->second.attempt == attempt &&
          it->second.checkpoint == checkpoint) {
        std::shared_future<Result<T>> result = it->second.result;
        lock.unlock();
        return result.get();
      }
      latest_[trial] = Entry{attempt, checkpoint, promise.get_future().share()};
      ++runs_;
    }
    Result<T> done = work();
    promise.set_value(done);
    return done;
  }
  // How many times a `work` ran.
  int64_t runs() const {
    std::lock_guard lock(mutex_);
    return runs_;
  }

 private:
  struct Entry {
    int64_t attempt = 0;
    std::string checkpoint;
    std::shared_future<Result<T>> result;
  };
  mutable std::mutex mutex_;
  std::map<std::string, Entry> latest_;  // by trial
  int64_t runs_ = 0;
};

// One agent's pushes (a RemoteLauncher holds one).
using RestorePushes = OncePerRestore<PushedCheckpoint>;

// The manifest of `dir` (scan_checkpoint_dir: every file hashed) for `trial`'s `attempt`,
// scanned once in this process however many agents restore it.
Result<WireManifest> scan_for_restore(const std::string& trial, int64_t attempt,
                                      const std::filesystem::path& dir);

}  // namespace cairn
