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
#include "engine/coordinator/exit_decision.h"
#include "engine/coordinator/launcher.h"
#include "engine/coordinator/rank_waits.h"
#include "engine/coordinator/remote_round.h"
#include "engine/coordinator/trial_process.h"
#include "store/stored_records.h"

namespace cairn {

// What the output follower (engine/coordinator/output_tail.h) calls each rank's output: the trial's
// index for its chief, a negative number for the other ranks.
inline int64_t rank_output_key(int64_t trial, int rank) {
  return rank == 0 ? trial : -(trial * 4096 + rank);
}
inline int64_t output_key_trial(int64_t key) {
  return key >= 0 ? key : -key / 4096;
}
inline int output_key_rank(int64_t key) {
  return key >= 0 ? 0 : static_cast<int>(-key % 4096);
}

// The trial record's fields holding how much of a rank's output file is stored, and how many
// log chunks of it: rank 0's are "output_offset" and "log_seq" (a trial of one process).
inline std::string output_offset_field(int rank) {
  return rank == 0 ? "output_offset" : "output_offset_rank" + std::to_string(rank);
}
inline std::string log_seq_field(int rank) {
  return rank == 0 ? "log_seq" : "log_seq_rank" + std::to_string(rank);
}
// A rank's output file in the trial's work directory.
inline std::filesystem::path rank_output_file(const std::filesystem::path& trial_work, int rank) {
  return trial_work / (rank == 0 ? "output.log" : "output.rank" + std::to_string(rank) + ".log");
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

// One rank of a trial (rank 0, the chief, among them): its process, connection and what it
// waits in, for the current attempt; its output's position in the log, across attempts.
struct Rank {
  int rank = 0;
  // This attempt (reset_attempt clears them).
  std::optional<LaunchedRank> process;  // started and not yet ended
  std::optional<ExitInfo> exit;         // ended, this attempt
  int connection_fd = -1;
  int machine = 0;              // where it runs (slot_pool.h's SlotRef::machine; 0: this machine)
  size_t operations_asked = 0;  // next_operation requests answered in this attempt
  // A rank other than 0 that asked for an operation rank 0 has not asked for yet: its
  // request's seq, answered with rank 0's (Coordinator::answer_deferred_operations).
  std::optional<int64_t> deferred_operation_seq;
  // Its control connection closed (until it connects again), or it ended, in this attempt:
  // rank 0 that has left does not decide the gang's operations (Coordinator::
  // decides_operations).
  bool left = false;
  RankWait wait;  // what it waits in (multi-rank trials)
  // Across attempts.
  std::filesystem::path output_file;
  std::string partial_line;      // output not yet ended by '\n'
  std::deque<std::string> tail;  // its last lines, for the report when this rank fails
  int64_t log_seq = 0;

  void reset_attempt() {
    process.reset();
    exit.reset();
    connection_fd = -1;
    operations_asked = 0;
    deferred_operation_seq.reset();
    left = false;
    wait = RankWait{};
  }
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
  // The parts of ranks on agents, by machine (coordinator_remote_rounds.cc); the ranks of
  // this machine write into staging_dir.
  std::map<int, RemoteRoundPart> remote;
  // Adoption (coordinator_replayed_answers.cc): the round was begun under a killed
  // coordinator (a rank's replay says it was handed a directory), and, for a sync, the
  // answer that coordinator gave some rank, which the others get too.
  bool rebuilt = false;
  std::optional<Json> decided;
  // An adopted rank ended a part of this round that this coordinator cannot know (its
  // agent did not say which directory the killed one named): the round fails with this.
  std::string refused;
};

struct Trial {
  using Clock = std::chrono::steady_clock;

  // Stored as the record's fields of the same names (head(), store/stored_records.h), written
  // when the record is; the record holds no other copy while the trial is driven.
  int64_t index = 0;
  schema::TrialState state = schema::TrialState::kQueued;
  int64_t target = 0;            // train until this many units (the searcher's current operation)
  int64_t validated_target = 0;  // the target the searcher has been told about
  bool closed = false;           // the searcher has no more work for it
  int64_t latest_checkpoint_step = -1;
  // The rest of the record (hparams, seed, metrics, checkpoints, process ids, …), persisted
  // with the fields above at the end of the round in which Coordinator::mark_dirty named it.
  Json record;
  bool stop_requested = false;
  bool finished = false;  // in a final state; never started again
  // Its ranks, rank 0 first (one for a trial of one process; slots_per_trial for a
  // data-parallel one). Which of them run is per attempt: Rank::process.
  std::vector<Rank> ranks;
  bool attempt_running = false;                  // started, and not every rank has ended yet
  Clock::time_point not_before{};                // restart back-off
  std::optional<int64_t> pending_operation_seq;  // rank 0's next_operation waiting for the searcher
  std::set<std::string> staging_dirs;            // checkpoint_begin handed out, not yet ended
  // A process of this trial left running by a coordinator that died: it was told nothing
  // and will checkpoint (as an orphan) and exit by itself; the trial waits for it.
  std::optional<Json> orphan_process;
  // Its ranks left on agents by the previous coordinator still run there: a resume waits for
  // them before the trial is recovered (coordinator_remote_orphans.cc).
  bool remote_orphan_wait = false;
  Clock::time_point last_heard{};  // the last message or output from the running process
  bool liveness_killed = false;
  // A rank of this attempt was lost with its machine (launcher.h's machine_lost): the attempt
  // ends as a relocation, not a failure of the trial. Cleared by reset_attempt().
  bool machine_lost = false;
  // The searcher's rung stopped it (time_metric, stop_at_rung): its ranks are told to stop at
  // their next agreement, and the clean exit is a release, not a pause (stop_requested).
  // Cleared by reset_attempt().
  bool rung_stop = false;
  int failures_in_a_row = 0;  // failed starts without a checkpoint in between
  // Told "done" while waiting for the searcher: its exit 0 is a pause, even when a
  // promotion arrived between that answer and the exit.
  bool released = false;
  std::set<std::string> metric_warnings;  // non-numeric metrics already reported, as described
  // Whether a failure would only repeat itself (exit_decision.h): the cancel_retries log
  // policy a line of this attempt matched ("": none; cleared at each start), whether the
  // trial ever sent a training report, and the previous attempt's repeated_failure_line().
  std::string log_policy_matched;
  bool reported_training = false;

  // This attempt's gang: how its ranks ended, and what keeps them together (multi-rank).
  // Cleared by reset_attempt() when the gang starts.
  GangOutcome outcome;
  std::vector<Json> operations;  // next_operation answers, in order, this attempt
  std::map<int64_t, RankRound> syncs, checkpoint_rounds;  // by step
  // The ranks' rendezvous (Gloo addresses, the NCCL unique id): keys set this attempt, and
  // kv_get requests waiting for a key, as (connection fd, request seq). Per attempt, so a
  // restarted gang never reads an address its dead predecessor published.
  std::map<std::string, std::string> kv;
  std::multimap<std::string, std::pair<int, Json>> kv_waiting;
  // Why cairn killed the gang (a deadlock, rank_wait_timeout): the failure's description.
  // Kept across reset_attempt(); handle_exit() takes it.
  std::optional<std::string> gang_fault;

  schema::TrialRecordHead head() const {
    schema::TrialRecordHead h;
    h.index = index;
    h.state = state;
    h.target_length = target;
    h.validated_target = validated_target;
    h.closed = closed;
    h.latest_checkpoint_steps = latest_checkpoint_step;
    return h;
  }
  int world_size() const { return static_cast<int>(ranks.size()); }
  // The current attempt, as the wire names it (the ranks' CAIRN_ATTEMPT): 0 before the first.
  int64_t attempt() const { return record.value("attempts", int64_t{0}); }
  Rank& chief() { return ranks.front(); }
  const Rank& chief() const { return ranks.front(); }
  bool running() const { return attempt_running; }
  // Every rank of this attempt has ended (or never started).
  bool gang_ended() const {
    for (const Rank& r : ranks)
      if (r.process) return false;
    return true;
  }
  // What each rank waits in, rank 0 first (rank_waits.h).
  std::vector<RankWait> waits() const {
    std::vector<RankWait> out;
    for (const Rank& r : ranks) out.push_back(r.wait);
    return out;
  }
  void reset_attempt() {
    for (Rank& r : ranks) r.reset_attempt();
    outcome = GangOutcome{};
    machine_lost = false;
    rung_stop = false;
    operations.clear();
    syncs.clear();
    checkpoint_rounds.clear();
    kv.clear();
    kv_waiting.clear();
  }
};

}  // namespace cairn
