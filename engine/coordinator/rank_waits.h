// What each rank of a multi-rank trial is waiting in, as far as cairn can tell, and whether
// the gang is deadlocked (docs/protocol.md, "Multi-rank trials"). Pure values and functions:
// the coordinator keeps one RankWait per rank and asks these questions after every round of
// events; tests ask them without processes.
//
// Thread-safety: none needed; values only.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cairn {

// The SDK call a rank is blocked in, waiting for cairn's answer.
enum class RankCall {
  kOutside,         // in the trial's own code (or not connected yet): nothing to answer
  kExited,          // the process ended; it will never call again
  kNextOperation,   // next_operation: rank 0's answered by the searcher, the others' with it
  kSync,            // checkpoint_due(step): answered once every rank has sent it
  kCheckpoint,      // checkpoint(step) sent checkpoint_end: answered once the round is whole
  kCheckpointSkip,  // checkpoint_skip: the rank made another call instead of checkpoint(step)
  kKvGet,           // kv_get(key): answered once some rank sets the key
};

struct RankWait {
  using Clock = std::chrono::steady_clock;

  RankCall call = RankCall::kOutside;
  int64_t step = 0;           // kSync, kCheckpoint, kCheckpointSkip
  std::string detail;         // kKvGet: the key; kCheckpointSkip: the SDK call that sent it
  Clock::time_point since{};  // when the current call began (the time of the request)
  // The rank has moved on from every checkpoint at a step <= this without entering it (it
  // made its next SDK call for that step instead): it is not part of those checkpoints.
  int64_t left_through = -1;
  // The step of the rank's latest sync or checkpoint message: what "its next SDK call for
  // that step" refers to when a message carries no step (a report, next_operation).
  int64_t last_step = -1;

  bool blocked() const { return call != RankCall::kOutside; }
  // Waiting on the other ranks (not on the searcher, not ended).
  bool waits_on_gang() const {
    return call == RankCall::kSync || call == RankCall::kCheckpoint ||
           call == RankCall::kCheckpointSkip || call == RankCall::kKvGet;
  }
  // A request from the rank: it is in `call` from `now` on.
  void enter(RankCall c, int64_t s, std::string d, Clock::time_point now) {
    call = c;
    step = s;
    detail = std::move(d);
    since = now;
  }
  // The rank made a call that is not checkpoint(last_step): it has left that checkpoint.
  void moved_on() { left_through = std::max(left_through, last_step); }
  void reached(int64_t s) {
    last_step = std::max(last_step, s);
    left_through = std::max(left_through, s - 1);
  }
};

// Whether `rank`, which did not enter checkpoint(step), can no longer join it.
inline bool left_checkpoint(const RankWait& rank, int64_t step) {
  return rank.call == RankCall::kExited || rank.left_through >= step;
}

// Syncs above this step are the Python SDK's barrier() calls, not checkpoint_due(step).
inline constexpr int64_t kBarrierBase = int64_t{1} << 50;

// "checkpoint(4)", "should_preempt(4)", "kv_get(gloo/0)", "barrier(3)", "exited", "its own code".
std::string describe_rank_wait(const RankWait& wait);

// The line naming every rank's call when the gang is deadlocked: every rank is blocked in
// cairn (or has exited), at least one is alive, and none of their calls can be answered
// without another rank making a call (docs/protocol.md). nullopt otherwise. `waits[r]` is
// rank r's. Errs towards "not deadlocked" (a rank that began a checkpoint and then reported
// counts as having left it): rank_wait_expired bounds what this lets through.
std::optional<std::string> gang_deadlock(const std::vector<RankWait>& waits);

// The rank_wait_timeout line when some rank has waited on the others longer than `limit`:
// "rank 0 waited 600 s in checkpoint(4) while rank 1 stayed outside cairn
// (rank_wait_timeout)" (or, with no rank outside, what each rank waited in). nullopt
// otherwise, or when `limit` is zero.
std::optional<std::string> rank_wait_expired(const std::vector<RankWait>& waits,
                                             std::chrono::seconds limit,
                                             RankWait::Clock::time_point now);

}  // namespace cairn
