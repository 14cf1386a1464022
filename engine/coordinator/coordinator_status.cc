// The facts of the live status line (engine/coordinator/status_line.h), gathered when
// terminal_ says a redraw is due: at most a few times a second, and only on a terminal. A
// redraw walks the live trials only: the finished ones are in status_tally_ (status_tally.h),
// and the plan is the searcher's plan(), which walks no trial.
#include <cstdlib>

#include "engine/coordinator/coordinator.h"
#include "engine/coordinator/trial_state.h"
#include "engine/search/searcher.h"

namespace cairn {

namespace {

// kSilenceShownAfter; tests shorten it (CAIRN_TEST_SILENCE_AFTER, seconds).
double silence_shown_after() {
  static const double seconds = [] {
    const char* text = std::getenv("CAIRN_TEST_SILENCE_AFTER");
    return text && std::atof(text) > 0 ? std::atof(text) : kSilenceShownAfter;
  }();
  return seconds;
}

}  // namespace

void Coordinator::tally_finished(const Trial& trial) {
  status_tally_.add_finished(trial.record);
}

void Coordinator::update_status() {
  if (!terminal_.status_due()) return;
  const auto now = Clock::now();
  std::vector<LiveTrialStatus> live;
  live.reserve(live_.size());
  for (int64_t index : live_) {
    auto it = trials_.find(index);
    if (it == trials_.end()) continue;
    const Trial& trial = *it->second;
    LiveTrialStatus entry;
    entry.record = &trial.record;
    if (trial.finished)
      entry.kind = LiveTrialStatus::Kind::kFinished;
    else if (trial.running()) {
      entry.kind = LiveTrialStatus::Kind::kRunning;
      entry.quiet_s = std::chrono::duration<double>(now - trial.last_heard).count();
    } else if (trial.state == schema::TrialState::kPaused)
      entry.kind = LiveTrialStatus::Kind::kPaused;
    else
      entry.kind = LiveTrialStatus::Kind::kQueued;
    live.push_back(entry);
  }
  StatusFacts facts = status_tally_.facts(live, silence_shown_after());
  const SearchPlan plan = searcher_->plan();
  if (plan.trials) facts.total = static_cast<int>(*plan.trials);
  facts.units_planned = plan.units;
  if (!status_baseline_.units) {
    status_baseline_.units = facts.units_done;
    status_baseline_.done = facts.done;
  }
  facts.units_since_start = facts.units_done - *status_baseline_.units;
  facts.done_since_start = facts.done - *status_baseline_.done;
  facts.elapsed_s = std::chrono::duration<double>(now - status_baseline_.start).count();
  terminal_.draw_status(facts);
}

}  // namespace cairn
