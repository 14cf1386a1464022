#include "engine/coordinator/rank_waits.h"

namespace cairn {

namespace {

std::string at_step(const char* call, int64_t step) {
  return std::string(call) + "(" + std::to_string(step) + ")";
}

// Whether cairn could answer `rank`'s call as the others stand now. The coordinator answers
// eagerly, so for a blocked gang this is false unless something outside the gang decides.
bool answerable(const std::vector<RankWait>& waits, const RankWait& rank) {
  switch (rank.call) {
    case RankCall::kOutside:
    case RankCall::kExited:
    case RankCall::kKvGet:  // a key that were set would have been answered
      return false;
    case RankCall::kNextOperation:
      // Rank 0's the searcher answers; another rank's waits for rank 0's request, which
      // decides the gang's next operation, unless rank 0 has ended (Coordinator::
      // handle_next_operation).
      return &rank == &waits.front() || waits.front().call == RankCall::kNextOperation ||
             waits.front().call == RankCall::kExited;
    case RankCall::kSync:
      return std::all_of(waits.begin(), waits.end(), [&](const RankWait& w) {
        return w.call == RankCall::kSync && w.step == rank.step;
      });
    case RankCall::kCheckpoint:
    case RankCall::kCheckpointSkip:
      return std::all_of(waits.begin(), waits.end(), [&](const RankWait& w) {
        return (w.call == RankCall::kCheckpoint && w.step == rank.step) ||
               left_checkpoint(w, rank.step);
      });
  }
  return false;
}

std::string list_waits(const std::vector<RankWait>& waits) {
  std::string out;
  for (size_t r = 0; r < waits.size(); ++r)
    out +=
        (r ? ", rank " : "rank ") + std::to_string(r) + " " +
        (waits[r].call == RankCall::kExited || waits[r].call == RankCall::kOutside ? "" : "in ") +
        describe_rank_wait(waits[r]);
  return out;
}

}  // namespace

std::string describe_rank_wait(const RankWait& wait) {
  switch (wait.call) {
    case RankCall::kOutside:
      return "its own code";
    case RankCall::kExited:
      return "exited";
    case RankCall::kNextOperation:
      return "operations()";
    case RankCall::kSync:
      // The Python SDK's barrier() n is a sync at step 2^50 + n (docs/protocol.md).
      if (wait.step > kBarrierBase)
        return "barrier(" + std::to_string(wait.step - kBarrierBase) + ")";
      return at_step("checkpoint_due", wait.step);
    case RankCall::kCheckpoint:
      return at_step("checkpoint", wait.step);
    case RankCall::kCheckpointSkip:
      return at_step(wait.detail.empty() ? "checkpoint_skip" : wait.detail.c_str(), wait.step);
    case RankCall::kKvGet:
      return "kv_get(" + wait.detail + ")";
  }
  return "?";
}

std::optional<std::string> gang_deadlock(const std::vector<RankWait>& waits) {
  if (waits.size() < 2) return std::nullopt;
  bool alive = false;
  for (const RankWait& w : waits) {
    if (!w.blocked()) return std::nullopt;  // that rank may still call and unblock the others
    if (w.call != RankCall::kExited) alive = true;
    if (answerable(waits, w)) return std::nullopt;
  }
  if (!alive) return std::nullopt;  // the trial has ended
  return "ranks deadlocked: " + list_waits(waits);
}

std::optional<std::string> rank_wait_expired(const std::vector<RankWait>& waits,
                                             std::chrono::seconds limit,
                                             RankWait::Clock::time_point now) {
  if (limit.count() <= 0) return std::nullopt;
  const RankWait* longest = nullptr;
  size_t longest_rank = 0;
  for (size_t r = 0; r < waits.size(); ++r)
    if (waits[r].waits_on_gang() && now - waits[r].since >= limit &&
        (!longest || waits[r].since < longest->since)) {
      longest = &waits[r];
      longest_rank = r;
    }
  if (!longest) return std::nullopt;
  std::string outside;
  for (size_t r = 0; r < waits.size(); ++r)
    if (!waits[r].blocked()) outside += (outside.empty() ? "" : ", ") + std::to_string(r);
  std::string line = "rank " + std::to_string(longest_rank) + " waited " +
                     std::to_string(limit.count()) + " s in " + describe_rank_wait(*longest);
  if (!outside.empty())
    line += std::string(" while rank") + (outside.find(',') == std::string::npos ? " " : "s ") +
            outside + " stayed outside cairn";
  else
    line += " (" + list_waits(waits) + ")";
  return line + " (rank_wait_timeout)";
}

}  // namespace cairn
