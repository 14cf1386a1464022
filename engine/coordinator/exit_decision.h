// What the end of a trial's attempt means: pure functions of what the coordinator knows at
// that moment, so that each rule (when a clean exit is a pause, when a failure is restarted
// and after how long) is stated once and unit-tested without processes.
#pragma once

#include <chrono>
#include <optional>
#include <set>
#include <string>

#include "engine/coordinator/trial_process.h"
#include "store/schema.h"

namespace cairn {

// How the ranks of one attempt ended (a trial of one process is a gang of one): the first
// failure decides the attempt, and whether it is permanent needs every rank that failed by
// itself to have declared so. Not thread-safe; one per attempt.
class GangOutcome {
 public:
  // cairn SIGKILLed `rank` while it still ran (to stop the gang, a deadlock, a timeout):
  // its exit then says nothing about why the attempt failed.
  void killed_by_cairn(int rank) { killed_.insert(rank); }
  // `rank` ended with `info`; `declared_permanent`: its exit status declares its failure
  // permanent (permanent_exit_codes). Returns true when this is the attempt's first failure:
  // the caller stops the other ranks, which would wait for ever in their next collective.
  bool rank_ended(int rank, const ExitInfo& info, bool declared_permanent);
  // `rank` could not be started: a failure that is not permanent.
  void start_failed(int rank);

  bool failed() const { return failure_.has_value(); }
  int failed_rank() const { return failed_rank_; }
  // The attempt's exit: its first failure, else the chief's.
  ExitInfo result(const ExitInfo& chief) const { return failure_ ? *failure_ : chief; }
  // Permanent: some rank declared its failure permanent and none failed otherwise (the
  // order in which ranks are reaped is not the order in which they failed).
  bool permanent() const { return failed() && declared_ && !undeclared_; }

 private:
  std::optional<ExitInfo> failure_;
  int failed_rank_ = 0;
  bool declared_ = false, undeclared_ = false;
  std::set<int> killed_;
};

// What the coordinator knows when an attempt ends.
struct AttemptEnd {
  ExitInfo exit;                    // the gang's result (GangOutcome::result)
  bool permanent = false;           // GangOutcome::permanent
  bool canceling = false;           // the experiment is being canceled
  bool pausing = false;             // cairn is stopping (Ctrl-C, pause, SIGTERM)
  bool closed = false;              // the searcher has no more work for the trial
  bool reached_max_length = false;  // its target is searcher.max_length
  bool stop_requested = false;      // cairn asked it to checkpoint and exit
  // searcher.own_length or time_metric: it trains to its own end
  bool own_length = false;
  // It finished its operation (validated its target) or was told "done" while the searcher
  // had not decided: a clean exit gives its slot to others.
  bool released = false;
  bool promoted = false;  // its target is past what it validated: more work awaits it
  int restarts = 0;       // restarts so far
  int max_restarts = 0;
  int failures_in_a_row = 0;  // failed starts without a checkpoint in between
  // A rank was lost with its machine (an agent's connection broke): not the trial's doing.
  bool machine_lost = false;
  // What says a failure would only repeat itself (docs/fault-tolerance.md):
  // a cancel_retries log policy (Determined's log_policies) that a line of this attempt's
  // output matched, by name or pattern; "": none.
  std::string log_policy;
  // The repeated-failure rule: off when the config says retry_repeated_failures.
  bool retry_repeated_failures = false;
  bool ever_reported = false;            // some attempt reported a metric or stored a checkpoint
  std::optional<std::string> last_line;  // the failed rank's last line of output, this attempt
  // repeated_failure_line() of the previous attempt: nullopt unless it failed that way.
  std::optional<std::string> previous_failure_line;
};

// Why a failed trial with restarts left is not restarted.
enum class NoRetry {
  kNone,
  kPermanent,  // it declared the failure permanent (permanent_exit_codes)
  kLogPolicy,  // a line of its output matched a cancel_retries log policy
  // It never reported anything, and failed twice in a row with an exit status (not a
  // signal) and the same last line: a syntax error or a missing module says nothing new
  // the third time.
  kRepeated,
};

enum class AttemptOutcome {
  kCanceled,  // CANCELED
  kFinished,  // closed by the searcher: COMPLETED at max_length, else STOPPED
  kPaused,    // asked to stop, and it did: PAUSED
  kReleased,  // its operation done: QUEUED when promoted, else PAUSED until the searcher decides
  kStopping,  // failed or killed while cairn stopped: PAUSED, not the trial's fault
  // lost with its machine: QUEUED at once, elsewhere, not counted against max_restarts
  kMachineLost,
  kRestart,  // failed: QUEUED, restarted from its latest checkpoint after `backoff`
  kError,    // failed past its restarts, or permanently: ERROR
};

struct AttemptDecision {
  AttemptOutcome outcome = AttemptOutcome::kError;
  schema::TrialState state = schema::TrialState::kError;
  // kRestart: how long to wait. It grows with failures in a row (a crash loop), and starts
  // over once the trial has made progress.
  std::chrono::seconds backoff{0};
  NoRetry no_retry = NoRetry::kNone;  // kError with restarts left: why
};

AttemptDecision decide_attempt_end(const AttemptEnd& end);

// The line the next attempt's failure is compared with (AttemptEnd::previous_failure_line):
// this attempt's last line when it failed with an exit status (not a signal) and the trial
// never reported anything; nullopt otherwise, which breaks the run of repeats.
std::optional<std::string> repeated_failure_line(const AttemptEnd& end);

// What the terminal says of a NoRetry other than kNone and kPermanent (which has its own
// note); "" for those. `log_policy`: AttemptEnd::log_policy.
std::string no_retry_note(NoRetry why, const std::string& log_policy);

// The state an experiment's coordinator leaves it in when its loop ends. `shutting_down`:
// SIGTERM or SIGHUP, not the user's decision to pause, so it stays ACTIVE for `resume --all`.
struct ExperimentEnd {
  bool canceling = false;
  bool pausing = false;
  bool shutting_down = false;
  bool searcher_finished = false;
  int trials = 0;
  int errored = 0;
};
schema::ExperimentState decide_experiment_end(const ExperimentEnd& end);

}  // namespace cairn
