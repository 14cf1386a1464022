#include "engine/coordinator/exit_decision.h"

#include <doctest/doctest.h>

#include <csignal>

namespace cairn {

using schema::TrialState;

namespace {

const ExitInfo kClean{0, 0};
const ExitInfo kCrash{1, 0};
const ExitInfo kKilled{0, SIGKILL};

AttemptEnd running_trial(ExitInfo exit) {
  AttemptEnd e;
  e.exit = exit;
  e.max_restarts = 3;
  return e;
}

}  // namespace

TEST_CASE("the first rank to fail decides the attempt; ranks cairn killed say nothing") {
  GangOutcome gang;
  CHECK_FALSE(gang.rank_ended(0, kClean, false));
  CHECK_FALSE(gang.failed());
  CHECK(gang.result(kClean).ok());

  gang.killed_by_cairn(0);
  CHECK(gang.rank_ended(2, kCrash, /*declared_permanent=*/true));  // first failure: stop the rest
  CHECK(gang.failed());
  CHECK(gang.failed_rank() == 2);
  CHECK_FALSE(gang.rank_ended(1, kKilled, false));  // killed by itself: a second failure
  CHECK(gang.failed_rank() == 2);
  CHECK(gang.result(kClean).code == 1);
  CHECK_FALSE(gang.permanent());  // rank 1's SIGKILL was not cairn's: not declared
}

TEST_CASE("an attempt fails permanently only when every rank that failed declared it") {
  GangOutcome gang;
  gang.killed_by_cairn(0);
  gang.killed_by_cairn(1);
  CHECK(gang.rank_ended(2, ExitInfo{3, 0}, true));
  CHECK_FALSE(gang.rank_ended(0, kKilled, false));  // stopped by cairn
  CHECK_FALSE(gang.rank_ended(1, kKilled, false));
  CHECK(gang.permanent());

  GangOutcome unstarted;
  unstarted.start_failed(1);
  CHECK(unstarted.failed());
  CHECK(unstarted.failed_rank() == 1);
  CHECK(unstarted.result(kClean).code == 127);
  CHECK_FALSE(unstarted.permanent());
}

TEST_CASE("a clean exit is a pause when asked to stop, a release when its work is done") {
  AttemptEnd e = running_trial(kClean);
  e.stop_requested = true;
  CHECK(decide_attempt_end(e).state == TrialState::kPaused);
  CHECK(decide_attempt_end(e).outcome == AttemptOutcome::kPaused);

  e = running_trial(kClean);
  e.released = true;
  CHECK(decide_attempt_end(e).outcome == AttemptOutcome::kReleased);
  CHECK(decide_attempt_end(e).state == TrialState::kPaused);  // waits for the searcher
  e.promoted = true;
  CHECK(decide_attempt_end(e).state == TrialState::kQueued);  // promoted meanwhile
}

TEST_CASE("a trial that trains to its own end completes when it exits 0 unasked") {
  AttemptEnd e = running_trial(kClean);
  e.own_length = true;
  CHECK(decide_attempt_end(e).outcome == AttemptOutcome::kFinished);
  CHECK(decide_attempt_end(e).state == TrialState::kCompleted);
  e.stop_requested = true;  // asked to stop: still a pause
  CHECK(decide_attempt_end(e).state == TrialState::kPaused);
  e = running_trial(kClean);  // time_metric: stopped at a rung, its operation validated
  e.own_length = true;
  e.released = true;
  CHECK(decide_attempt_end(e).outcome == AttemptOutcome::kReleased);
  e = running_trial(ExitInfo{1, 0});
  e.own_length = true;
  e.max_restarts = 2;
  CHECK(decide_attempt_end(e).outcome == AttemptOutcome::kRestart);  // a failure stays one
}

TEST_CASE("a clean exit before the work is done is a failure, restarted") {
  AttemptDecision d = decide_attempt_end(running_trial(kClean));
  CHECK(d.outcome == AttemptOutcome::kRestart);
  CHECK(d.state == TrialState::kQueued);
}

TEST_CASE("closed trials finish whatever their exit; cancel wins over everything") {
  AttemptEnd e = running_trial(kCrash);
  e.closed = true;
  CHECK(decide_attempt_end(e).outcome == AttemptOutcome::kFinished);
  CHECK(decide_attempt_end(e).state == TrialState::kStopped);
  e.reached_max_length = true;
  CHECK(decide_attempt_end(e).state == TrialState::kCompleted);
  e.canceling = true;
  CHECK(decide_attempt_end(e).state == TrialState::kCanceled);
}

TEST_CASE("failures back off exponentially up to 30 s, then end in ERROR") {
  AttemptEnd e = running_trial(kCrash);
  e.max_restarts = 100;
  const int expected[] = {1, 2, 4, 8, 16, 30, 30};
  for (int n = 0; n < 7; ++n) {
    e.failures_in_a_row = n;
    AttemptDecision d = decide_attempt_end(e);
    CHECK(d.outcome == AttemptOutcome::kRestart);
    CHECK(d.backoff.count() == expected[n]);
  }
  e.restarts = 100;
  CHECK(decide_attempt_end(e).outcome == AttemptOutcome::kError);
  CHECK(decide_attempt_end(e).state == TrialState::kError);

  e.restarts = 0;
  e.permanent = true;
  CHECK(decide_attempt_end(e).outcome == AttemptOutcome::kError);
}

TEST_CASE("a failure whose output matched a cancel_retries log policy is not restarted") {
  AttemptEnd e = running_trial(kCrash);
  CHECK(decide_attempt_end(e).outcome == AttemptOutcome::kRestart);
  e.log_policy = "CUDA OOM";
  AttemptDecision d = decide_attempt_end(e);
  CHECK(d.outcome == AttemptOutcome::kError);
  CHECK(d.no_retry == NoRetry::kLogPolicy);
  CHECK(no_retry_note(d.no_retry, e.log_policy).find("'CUDA OOM'") != std::string::npos);
  // Whatever the exit: a kill after the line still cancels the restarts.
  e.exit = kKilled;
  CHECK(decide_attempt_end(e).no_retry == NoRetry::kLogPolicy);
  // A clean end is no failure, whatever the output said.
  e.exit = kClean;
  e.stop_requested = true;
  CHECK(decide_attempt_end(e).outcome == AttemptOutcome::kPaused);
  // A permanent failure says so first.
  e = running_trial(kCrash);
  e.log_policy = "x";
  e.permanent = true;
  CHECK(decide_attempt_end(e).no_retry == NoRetry::kPermanent);
  CHECK(no_retry_note(NoRetry::kPermanent, "x").empty());
}

TEST_CASE(
    "a failure that repeats the last one's last line, with nothing reported, ends the "
    "trial") {
  AttemptEnd first = running_trial(kCrash);
  first.last_line = "SyntaxError: invalid syntax";
  // The first failure is restarted, and remembered.
  CHECK(decide_attempt_end(first).outcome == AttemptOutcome::kRestart);
  REQUIRE(repeated_failure_line(first).has_value());
  CHECK(*repeated_failure_line(first) == "SyntaxError: invalid syntax");

  AttemptEnd second = first;
  second.restarts = 1;
  second.previous_failure_line = repeated_failure_line(first);
  AttemptDecision d = decide_attempt_end(second);
  CHECK(d.outcome == AttemptOutcome::kError);
  CHECK(d.state == TrialState::kError);
  CHECK(d.no_retry == NoRetry::kRepeated);
  CHECK(no_retry_note(d.no_retry, "").find("retry_repeated_failures") != std::string::npos);

  SUBCASE("another last line is another failure") {
    second.last_line = "ModuleNotFoundError: No module named 'x'";
    CHECK(decide_attempt_end(second).outcome == AttemptOutcome::kRestart);
  }
  SUBCASE("the config can turn the rule off") {
    second.retry_repeated_failures = true;
    CHECK(decide_attempt_end(second).outcome == AttemptOutcome::kRestart);
  }
  SUBCASE("a trial that reported something got somewhere") {
    second.ever_reported = true;
    CHECK(decide_attempt_end(second).outcome == AttemptOutcome::kRestart);
    CHECK_FALSE(repeated_failure_line(second).has_value());
  }
  SUBCASE("a signal may not happen again, and is not remembered") {
    second.exit = kKilled;
    CHECK(decide_attempt_end(second).outcome == AttemptOutcome::kRestart);
    CHECK_FALSE(repeated_failure_line(second).has_value());
  }
  SUBCASE("a failure that printed nothing has no line to compare") {
    second.last_line.reset();
    CHECK(decide_attempt_end(second).outcome == AttemptOutcome::kRestart);
    CHECK_FALSE(repeated_failure_line(second).has_value());
  }
  SUBCASE("only twice in a row: no line remembered, no repeat") {
    second.previous_failure_line.reset();
    CHECK(decide_attempt_end(second).outcome == AttemptOutcome::kRestart);
  }
  SUBCASE("out of restarts it is an error as always, for no other reason") {
    second.restarts = second.max_restarts;
    CHECK(decide_attempt_end(second).no_retry == NoRetry::kNone);
  }
  SUBCASE("a clean exit before the work is done is no repeat") {
    second.exit = kClean;
    CHECK(decide_attempt_end(second).outcome == AttemptOutcome::kRestart);
  }
}

TEST_CASE("a failure while cairn stops is a pause, unless the trial declared it permanent") {
  AttemptEnd e = running_trial(kKilled);
  e.pausing = true;
  CHECK(decide_attempt_end(e).outcome == AttemptOutcome::kStopping);
  CHECK(decide_attempt_end(e).state == TrialState::kPaused);
  e.permanent = true;
  CHECK(decide_attempt_end(e).state == TrialState::kError);
}

TEST_CASE("a rank lost with its machine is requeued at once, without spending a restart") {
  AttemptEnd e = running_trial(kKilled);
  e.machine_lost = true;
  e.restarts = 3;  // none left: a failure would end in ERROR
  e.failures_in_a_row = 4;
  AttemptDecision d = decide_attempt_end(e);
  CHECK(d.outcome == AttemptOutcome::kMachineLost);
  CHECK(d.state == TrialState::kQueued);
  CHECK(d.backoff.count() == 0);
  // Stopping, canceling and a searcher's close still win.
  e.pausing = true;
  CHECK(decide_attempt_end(e).outcome == AttemptOutcome::kStopping);
  e.pausing = false;
  e.closed = true;
  CHECK(decide_attempt_end(e).outcome == AttemptOutcome::kFinished);
  e.closed = false;
  e.canceling = true;
  CHECK(decide_attempt_end(e).outcome == AttemptOutcome::kCanceled);
}

TEST_CASE("trial states round-trip through their stored names") {
  for (TrialState s :
       {TrialState::kQueued, TrialState::kRunning, TrialState::kPaused, TrialState::kCompleted,
        TrialState::kStopped, TrialState::kError, TrialState::kCanceled})
    CHECK(schema::parse_trial_state(schema::trial_state_name(s)) == s);
  CHECK_FALSE(schema::parse_trial_state("running"));
  CHECK(schema::trial_has_ended(TrialState::kStopped));
  CHECK_FALSE(schema::trial_has_ended(TrialState::kPaused));
}

}  // namespace cairn

namespace cairn {

TEST_CASE("an experiment ends canceled, paused, interrupted, errored or completed") {
  using schema::ExperimentState;
  ExperimentEnd e;
  e.trials = 3;
  e.searcher_finished = true;
  CHECK(decide_experiment_end(e) == ExperimentState::kCompleted);
  e.errored = 2;
  CHECK(decide_experiment_end(e) == ExperimentState::kCompleted);  // one trial did not error
  e.errored = 3;
  CHECK(decide_experiment_end(e) == ExperimentState::kError);

  e = ExperimentEnd{};
  e.trials = 3;
  e.pausing = true;
  CHECK(decide_experiment_end(e) == ExperimentState::kPaused);  // Ctrl-C, cairn pause
  e.shutting_down = true;
  CHECK(decide_experiment_end(e) ==
        ExperimentState::kActive);  // SIGTERM: resume --all continues it
  e.searcher_finished = true;       // stopped after the last trial ended: nothing left to resume
  CHECK(decide_experiment_end(e) == ExperimentState::kCompleted);
  e.canceling = true;
  CHECK(decide_experiment_end(e) == ExperimentState::kCanceled);
  CHECK(std::string(schema::experiment_state_name(ExperimentState::kActive)) == "ACTIVE");
}

}  // namespace cairn
