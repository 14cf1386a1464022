// Checkpoints of ranks that run on an agent move over the wire (peer/checkpoint_client.h)
// on threads of their own, never on the coordinator's event loop: a 256 MiB checkpoint must
// not hold up control traffic. The loop hands a job over with start(); the job's thread
// opens its own connection to the agent, does the work, stores the result and sends this
// process SIGCHLD (as RemoteLauncher does for a rank's end), which wakes the loop; the loop
// then take()s the results and registers, acknowledges or refuses (coordinator_remote_
// checkpoints.cc).
//
// A fetch writes only the contents the object store lacks, makes them durable
// (ObjectStore::adopt_all, with the checkpoint's manifest as its trailer) and only then tells
// the agent it may drop its copy; the result carries the stored manifest.
//
// Thread-safety: start, take and the staged-directory table are for the loop's thread only;
// the destructor waits for every job (each bounded by the wire's timeouts).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <list>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/json.h"
#include "peer/checkpoint_client.h"
#include "store/checkpoint_files.h"
#include "store/object_store.h"

namespace cairn {

struct CheckpointJob {
  // kStage: a fresh directory on the agent for a checkpoint; kFetch: a checkpoint written
  // there into the object store; kPush: a stored checkpoint (`manifest`) written into the
  // local directory `path`, every file verified against its hash, and then, when `to_agent`,
  // sent to `agent` (a fetched checkpoint, coordinator_fetch.cc: copying gigabytes must not
  // hold up the loop either); kRound: a data-parallel trial's checkpoint round whose
  // ranks ran on several machines (checkpoint_round_job.cc): every agent's part is fetched,
  // this machine's part adopted, and the union stored as one manifest, only when every part
  // is durable here.
  enum class Kind { kStage, kFetch, kPush, kRound };
  Kind kind = Kind::kStage;
  AgentEndpoint agent;
  int64_t trial_index = 0;
  std::string trial;            // its id ("1.2")
  int64_t attempt = 0;          // which attempt of the trial asked (its record's "attempts")
  int rank = 0;                 // the rank that asked
  pid_t chief = 0;              // the launcher's name for the rank that asked (launcher.h)
  int connection = -1;          // the control connection waiting for the answer
  Json seq;                     // the request's seq, for the answer's "re"
  std::string path;             // kFetch: the staged directory on the agent; kPush: the local one
  CheckpointManifest manifest;  // kPush: what to write into `path`
  bool to_agent = false;        // kPush: and then to `agent`
  int64_t step = 0;             // kFetch
  Json metadata;                // kFetch, kRound; kPush: the answer to send, less the agent's path
  // kStage for a round's part (coordinator_remote_rounds.cc): the round of `step` on
  // machine `machine`, answered to the ranks that wait in the round, not to `connection`.
  bool round_part = false;
  int machine = 0;
  // kRound.
  struct Part {
    std::string machine;  // its name ("10.0.0.2:7070")
    AgentEndpoint agent;
    std::string path;  // the directory staged there
  };
  std::vector<Part> parts;
  std::string local_dir;  // this machine's part (and skipping ranks' generator states)
  struct Waiter {
    int fd = -1;
    Json seq;
    int rank = 0;
  };
  std::vector<Waiter> waiters;  // every rank to answer once the round is decided
};

struct CheckpointJobResult {
  CheckpointJob job;
  Status status;
  std::string staged_path;      // kStage; kPush: the directory on the agent (`to_agent`)
  CheckpointManifest manifest;  // kFetch, kRound: as stored
  uint64_t new_bytes = 0;       // kFetch, kRound: bytes new to the object store
  uint64_t content_bytes = 0;   // kFetch, kRound: content bytes that crossed the wire
};

class CheckpointTransfers {
 public:
  CheckpointTransfers(ObjectStore& objects, std::filesystem::path staging)
      : objects_(objects), staging_(std::move(staging)) {}
  ~CheckpointTransfers();
  CheckpointTransfers(const CheckpointTransfers&) = delete;
  CheckpointTransfers& operator=(const CheckpointTransfers&) = delete;

  void start(CheckpointJob job);
  // The jobs that finished since the last call.
  std::vector<CheckpointJobResult> take();
  // Whether a job of the trial is still running (not yet taken): its next attempt waits, so
  // a checkpoint its last attempt completed is registered before the restart reads the
  // latest one.
  bool busy(int64_t trial_index) const {
    auto it = in_flight_.find(trial_index);
    return it != in_flight_.end() && it->second > 0;
  }

  // Directories staged on agents and handed to a trial, not yet ended or aborted.
  std::map<int64_t, std::set<std::string>>& staged() { return staged_; }

 private:
  CheckpointJobResult run(const CheckpointJob& job);
  CheckpointJobResult run_round(const CheckpointJob& job);  // checkpoint_round_job.cc

  ObjectStore& objects_;
  std::filesystem::path staging_;
  std::mutex mutex_;
  std::vector<CheckpointJobResult> done_;
  struct Worker {
    std::thread thread;
    bool finished = false;  // under mutex_
  };
  std::list<Worker> workers_;
  std::map<int64_t, std::set<std::string>> staged_;
  std::map<int64_t, int> in_flight_;  // jobs started and not yet taken, by trial
};

}  // namespace cairn
