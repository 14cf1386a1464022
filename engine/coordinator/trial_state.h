// What the coordinator knows of one trial while it drives it. The durable part lives in
// `record` (the trial's JSON record in the store); the rest is about the live process.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/json.h"
#include "engine/coordinator/rank_waits.h"
#include "engine/coordinator/trial_process.h"

namespace cairn {

// What the output follower (engine/coordinator/output_tail.h) calls each rank's output: the trial's
// index for its chief, a negative number for the other ranks.
inline int64_t worker_output_key(int64_t trial, int rank) {
  return -(trial * 4096 + rank);
}
inline int64_t output_key_trial(int64_t key) {
  return key >= 0 ? key : -key / 4096;
}
inline int output_key_rank(int64_t key) {
  return key >= 0 ? 0 : static_cast<int>(-key % 4096);
}

// The trial record's field holding how much of rank `rank`'s (> 0) output file is stored
// (rank 0's is "output_offset").
inline std::string worker_offset_field(int rank) {
  return "output_offset_rank" + std::to_string(rank);
}

// What a coordinator that died left running of one trial: {"processes": [{"pid": P,
// "start_time": T}, …] (rank 0 first), "boot_id": B}. Alive while any of them is.
inline bool orphan_alive(const Json& orphan) {
  const std::string boot = orphan.value("boot_id", "");
  for (const Json& p : orphan.value("processes", Json::array()))
    if (same_process_alive(p.value("pid", 0), p.value("start_time", uint64_t{0}), boot))
      return true;
  return false;
}

// A rank other than 0 of a data-parallel trial. Rank 0, the chief, is the Trial's own
// process, output and connection; its reports are the trial's.
struct Worker {
  int rank = 1;
  std::optional<TrialProcess> process;
  std::filesystem::path output_file;
  std::string partial_line;
  std::deque<std::string> tail;  // its last lines, for the report when this rank fails
  int64_t log_seq = 0;
  int connection_fd = -1;
  size_t operations_asked = 0;  // next_operation requests answered in this attempt
};

// How many lines of a rank's output a failure report shows.
inline constexpr size_t kFailureTailLines = 20;

// Keeps the last kFailureTailLines of `line`s.
inline void keep_tail_line(std::deque<std::string>& tail, std::string line) {
  tail.push_back(std::move(line));
  if (tail.size() > kFailureTailLines) tail.pop_front();
}

// A request of one rank that waits for the round to be decided.
struct RoundWaiter {
  int fd = -1;  // the rank's connection
  Json seq;     // the request's
  int rank = 0;
};

// Multi-rank agreement for one step (docs/protocol.md, "Multi-rank trials").
struct RankRound {
  std::set<int> ranks;               // sync: ranks heard from; checkpoint: ranks that ended it
  std::vector<RoundWaiter> waiting;  // to answer when the round is decided
  std::string stop_reason;           // sync: a rank's local stop
  // Checkpoint rounds. A rank takes part when it sends checkpoint_begin; one that makes its
  // next call for the step without it (checkpoint_skip, or any other message) does not.
  std::set<int> begun;                     // ranks that sent checkpoint_begin
  std::string staging_dir;                 // shared by every rank that takes part
  Json metadata = Json::object();          // the chief's
  std::map<std::string, std::string> rng;  // file name → bytes, of ranks that skipped
  std::optional<int> aborted_by;           // a rank sent checkpoint_abort: it fails
};

struct Trial {
  using Clock = std::chrono::steady_clock;

  int64_t index = 0;
  Json record;  // persisted at the end of the round in which Coordinator::mark_dirty named it
  int64_t target = 0;            // train until this many units (the searcher's current operation)
  int64_t validated_target = 0;  // the target the searcher has been told about
  bool closed = false;           // the searcher has no more work for it
  bool stop_requested = false;
  bool finished = false;  // in a final state; never started again
  std::optional<TrialProcess> process;
  std::optional<ExitInfo> exit;    // set when reaped, handled once its output is drained
  Clock::time_point not_before{};  // restart back-off
  int connection_fd = -1;
  std::optional<int64_t> pending_operation_seq;  // a next_operation waiting for the searcher
  std::set<std::string> staging_dirs;            // checkpoint_begin handed out, not yet ended
  std::string partial_line;                      // output not yet ended by '\n'
  std::filesystem::path output_file;             // where the process writes stdout+stderr
  // A process of this trial left running by a coordinator that died: it was told nothing
  // and will checkpoint (as an orphan) and exit by itself; the trial waits for it.
  std::optional<Json> orphan_process;
  std::deque<std::string> tail;  // rank 0's last lines, for failure reports
  // The rank whose failure ended this attempt, and (for a rank > 0, whose Worker is gone by
  // the time the failure is reported) its last lines: a report shows the failing rank's
  // traceback, not rank 0's lines about being stopped.
  int failed_rank = 0;
  std::deque<std::string> failed_rank_tail;
  int64_t log_seq = 0;
  Clock::time_point last_heard{};  // the last message or output from the running process
  bool liveness_killed = false;
  int failures_in_a_row = 0;  // failed starts without a checkpoint in between
  // Told "done" while waiting for the searcher: its exit 0 is a pause, even when a
  // promotion arrived between that answer and the exit.
  bool released = false;
  int64_t latest_checkpoint_step = -1;
  std::set<std::string> metric_warnings;  // non-numeric metrics already reported, as described

  // Data parallel (slots_per_trial > 1): ranks 1..N-1, and what keeps the gang together.
  // Cleared by reset_attempt() whenever the gang starts or ends.
  std::vector<Worker> workers;
  std::optional<ExitInfo> chief_exit;    // rank 0 ended; the trial ends when every rank has
  std::optional<ExitInfo> gang_failure;  // the first rank that failed, this attempt
  // Of the ranks that failed by themselves this attempt: some declared it permanent, some did
  // not (or could not: a rank that never started). Permanent needs the first and not the second.
  bool failure_declared = false, failure_undeclared = false;
  std::set<int> killed_by_cairn;  // ranks cairn SIGKILLed while they still ran, this attempt
  std::vector<Json> operations;   // next_operation answers, in order, this attempt
  size_t operations_asked = 0;    // by the chief
  std::map<int64_t, RankRound> syncs, checkpoint_rounds;  // by step
  // What each rank is waiting in (index: rank), for deadlock detection and rank_wait_timeout.
  std::vector<RankWait> waits;
  // The ranks' rendezvous (Gloo addresses, the NCCL unique id): keys set this attempt, and
  // kv_get requests waiting for a key, as (connection fd, request seq). Per attempt, so a
  // restarted gang never reads an address its dead predecessor published.
  std::map<std::string, std::string> kv;
  std::multimap<std::string, std::pair<int, Json>> kv_waiting;
  // Why cairn killed the gang (a deadlock, rank_wait_timeout): the failure's description.
  // Kept across reset_attempt(); handle_exit() takes it.
  std::optional<std::string> gang_fault;

  int world_size() const { return 1 + static_cast<int>(workers.size()); }
  RankWait& wait_of(int rank) {
    if (waits.size() < static_cast<size_t>(world_size())) waits.resize(world_size());
    return waits[static_cast<size_t>(rank)];
  }
  void reset_attempt() {
    workers.clear();
    chief_exit.reset();
    gang_failure.reset();
    failure_declared = failure_undeclared = false;
    killed_by_cairn.clear();
    operations.clear();
    operations_asked = 0;
    syncs.clear();
    checkpoint_rounds.clear();
    waits.clear();
    kv.clear();
    kv_waiting.clear();
  }
  bool running() const { return process.has_value(); }
};

}  // namespace cairn
