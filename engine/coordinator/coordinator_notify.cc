// The coordinator's notifications (`notify:`, docs/config.md "Notifications"): what each
// event says, handed to options_.notifier, which delivers it off this thread.
#include "common/metric_order.h"
#include "engine/coordinator/coordinator.h"
#include "engine/coordinator/notifier.h"
#include "engine/coordinator/notify_payload.h"
#include "engine/coordinator/trial_state.h"
#include "store/best_trial.h"

namespace cairn {

namespace {

NotifyExperiment notify_experiment(const Json& experiment, const std::string& state) {
  NotifyExperiment out;
  out.id = experiment.value("id", int64_t{0});
  out.name = experiment.value("name", "");
  out.state = state;
  out.host = notify_host_name();
  return out;
}

}  // namespace

void Coordinator::notify_end(const std::string& state, const std::string& error) const {
  if (!options_.notifier || !config_.notify.wants(NotifyEvent::kEnd)) return;
  NotifyCounts counts;
  std::vector<const Json*> records;
  for (const auto& [index, trial] : trials_) {
    ++counts.total;
    if (trial->state == schema::TrialState::kError) ++counts.errored;
    if (trial->state == schema::TrialState::kCompleted) ++counts.completed;
    records.push_back(&trial->record);
  }
  const std::string& metric = config_.searcher.metric;
  std::optional<NotifyBest> best;
  if (const Json* record =
          best_trial(records, metric, MetricOrder(config_.searcher.smaller_is_better))) {
    const Json& value = (*record)["best_validation"][metric];
    if (value.is_number()) best = NotifyBest{record->value("id", ""), metric, value.get<double>()};
  }
  Json payload = experiment_end_payload(notify_experiment(experiment_, state), counts, best);
  if (!error.empty()) {
    payload["error"] = error;
    payload["text"] = payload["text"].get<std::string>() + "; stopped early: " + error;
  }
  options_.notifier->notify(NotifyEvent::kEnd, std::move(payload));
}

void Coordinator::notify_trial_error(const Trial& trial, const std::string& why) const {
  if (!options_.notifier || !config_.notify.wants(NotifyEvent::kTrialError)) return;
  options_.notifier->notify(
      NotifyEvent::kTrialError,
      trial_error_payload(notify_experiment(experiment_, "ACTIVE"), trial_id(trial.index), why,
                          trial.record.value("restarts", 0)));
}

void Coordinator::notify_best(const Trial& trial, double value) const {
  if (!options_.notifier || !config_.notify.wants(NotifyEvent::kBestImproved)) return;
  // Every trial's own improvement is handed on; the notifier keeps the experiment's best and
  // its pace (at most one a minute), so the coordinator keeps no state for it.
  Json payload =
      best_improved_payload(notify_experiment(experiment_, "ACTIVE"),
                            NotifyBest{trial_id(trial.index), config_.searcher.metric, value});
  payload["smaller_is_better"] = config_.searcher.smaller_is_better;
  options_.notifier->notify(NotifyEvent::kBestImproved, std::move(payload));
}

}  // namespace cairn
