#include "engine/coordinator/exit_decision.h"

#include <algorithm>
#include <csignal>

namespace cairn {

bool GangOutcome::rank_ended(int rank, const ExitInfo& info, bool declared_permanent) {
  if (info.ok()) return false;
  const bool stopped_by_gang = info.signal == SIGKILL && killed_.count(rank) > 0;
  if (!stopped_by_gang) (declared_permanent ? declared_ : undeclared_) = true;
  if (failure_) return false;
  failure_ = info;
  failed_rank_ = rank;
  return true;
}

void GangOutcome::start_failed(int rank) {
  undeclared_ = true;
  if (failure_) return;
  failure_ = ExitInfo{127, 0};
  failed_rank_ = rank;
}

namespace {

// The same failure as the attempt before, which had the same chance to get anywhere.
bool repeats_failure(const AttemptEnd& e) {
  if (e.retry_repeated_failures || !e.previous_failure_line) return false;
  const std::optional<std::string> line = repeated_failure_line(e);
  return line && *line == *e.previous_failure_line;
}

}  // namespace

AttemptDecision decide_attempt_end(const AttemptEnd& e) {
  using schema::TrialState;
  if (e.canceling) return {AttemptOutcome::kCanceled, TrialState::kCanceled};
  // Closed by the searcher: its work is done and recorded. A failure on the way out (a
  // library crashing at interpreter exit, a kill after the last validation) would gain
  // nothing from a restart, which could not even run: closed trials are never scheduled.
  if (e.closed)
    return {AttemptOutcome::kFinished,
            e.reached_max_length ? TrialState::kCompleted : TrialState::kStopped};
  const bool ok = e.exit.ok();
  if (ok && e.stop_requested) return {AttemptOutcome::kPaused, TrialState::kPaused};
  // It finished its operation and the searcher had not decided: it checkpointed and left its
  // slot to others; a promotion (perhaps already made) resumes it from that checkpoint.
  if (ok && e.released)
    return {AttemptOutcome::kReleased, e.promoted ? TrialState::kQueued : TrialState::kPaused};
  // A trial that decides its own length is done when it exits 0 unasked.
  if (ok && e.own_length) return {AttemptOutcome::kFinished, TrialState::kCompleted};
  // Killed while cairn was stopping: not the trial's fault.
  if (e.pausing && !e.permanent) return {AttemptOutcome::kStopping, TrialState::kPaused};
  // Its machine went away (an agent's connection broke): not the trial's failure, so it
  // neither spends a restart nor waits a back-off.
  if (e.machine_lost && !ok) return {AttemptOutcome::kMachineLost, TrialState::kQueued};
  if (e.restarts < e.max_restarts) {
    const NoRetry why = e.permanent             ? NoRetry::kPermanent
                        : !e.log_policy.empty() ? NoRetry::kLogPolicy
                        : repeats_failure(e)    ? NoRetry::kRepeated
                                                : NoRetry::kNone;
    if (why != NoRetry::kNone)
      return {AttemptOutcome::kError, TrialState::kError, std::chrono::seconds(0), why};
    const int backoff_s = std::min(30, 1 << std::min(e.failures_in_a_row, 5));
    return {AttemptOutcome::kRestart, TrialState::kQueued, std::chrono::seconds(backoff_s)};
  }
  return {AttemptOutcome::kError, TrialState::kError, std::chrono::seconds(0)};
}

std::optional<std::string> repeated_failure_line(const AttemptEnd& e) {
  // A signal (a kill, the OOM killer, a segfault) may well not happen again; a trial that
  // reported something got somewhere, and its next attempt starts from there.
  if (e.exit.signal != 0 || e.exit.code == 0 || e.ever_reported || !e.last_line)
    return std::nullopt;
  return e.last_line;
}

std::string no_retry_note(NoRetry why, const std::string& log_policy) {
  switch (why) {
    case NoRetry::kLogPolicy:
      return "a line of its output matched log policy '" + log_policy + "' (cancel_retries)";
    case NoRetry::kRepeated:
      return "it failed twice in a row with the same last line and never reported anything; "
             "a restart would fail the same way (retry_repeated_failures: true restarts it)";
    case NoRetry::kNone:
    case NoRetry::kPermanent:
      break;
  }
  return "";
}

schema::ExperimentState decide_experiment_end(const ExperimentEnd& e) {
  using schema::ExperimentState;
  if (e.canceling) return ExperimentState::kCanceled;
  // ACTIVE and undriven: interrupted.
  if (e.pausing && !e.searcher_finished)
    return e.shutting_down ? ExperimentState::kActive : ExperimentState::kPaused;
  if (e.trials > 0 && e.errored == e.trials) return ExperimentState::kError;
  return ExperimentState::kCompleted;
}

}  // namespace cairn
