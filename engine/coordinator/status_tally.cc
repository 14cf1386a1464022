#include "engine/coordinator/status_tally.h"

#include "common/metric_order.h"
#include "common/number_text.h"

namespace cairn {

void StatusTally::offer(const Json& record, std::optional<double>& best,
                        std::string& best_id) const {
  const Json& validated = record.contains("best_validation") ? record["best_validation"] : Json();
  if (!validated.is_object() || !validated.contains(metric_) || !validated[metric_].is_number())
    return;
  const double v = validated[metric_].get<double>();
  if (!best || MetricOrder(smaller_is_better_).better(v, *best)) {
    best = v;
    best_id = record.value("id", "");
  }
}

void StatusTally::add_finished(const Json& record) {
  ++done_;
  units_ += record.value("steps_completed", int64_t{0});
  offer(record, best_, best_id_);
}

StatusFacts StatusTally::facts(const std::vector<LiveTrialStatus>& live,
                               double silence_after) const {
  StatusFacts facts;
  facts.done = done_;
  facts.units_done = units_;
  std::optional<double> best = best_;
  std::string best_id = best_id_;
  for (const LiveTrialStatus& trial : live) {
    const Json& record = *trial.record;
    facts.units_done += record.value("steps_completed", int64_t{0});
    offer(record, best, best_id);
    switch (trial.kind) {
      case LiveTrialStatus::Kind::kFinished:  // finished this round, not yet added
        ++facts.done;
        break;
      case LiveTrialStatus::Kind::kRunning:
        ++facts.running;
        if (trial.quiet_s > silence_after && trial.quiet_s > facts.silent_s) {
          facts.silent_s = trial.quiet_s;
          facts.silent_trial = record.value("id", "");
        }
        break;
      case LiveTrialStatus::Kind::kPaused:
        ++facts.paused;
        break;
      case LiveTrialStatus::Kind::kQueued:
        ++facts.queued;
        break;
    }
  }
  if (best) facts.best = metric_ + " " + format_number(*best) + " (" + best_id + ")";
  return facts;
}

}  // namespace cairn
