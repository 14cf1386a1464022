// The coordinator's notifications (`notify:`, docs/config.md "notify"): what each event says,
// staged by notify_outbox_ into the commit that stores what it reports (notify_outbox.h), and
// delivered by options_.notifier off this thread.
#include "common/metric_order.h"
#include "engine/coordinator/coordinator.h"
#include "engine/coordinator/notifier.h"
#include "engine/coordinator/notify_payload.h"
#include "engine/coordinator/trial_state.h"
#include "store/best_trial.h"
#include "store/schema.h"

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

void Coordinator::notify_end(const std::string& state, const std::string& error) {
  // The run's end names the best: a best_improved still waiting for its slot is dropped when
  // the experiment ends for good (a paused or interrupted one keeps it for its resume).
  if (schema::experiment_has_ended(state)) notify_outbox_.drop_waiting(batch_);
  if (!notify_outbox_.wants(NotifyEvent::kEnd)) return;
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
  if (error.empty()) {
    // Rides the commit that stores the end (finish()).
    notify_outbox_.stage(NotifyEvent::kEnd, std::move(payload), batch_);
    return;
  }
  // Stopped by an error of its own (perhaps the store's): no commit reports this one.
  payload["error"] = error;
  payload["text"] = payload["text"].get<std::string>() + "; stopped early: " + error;
  notify_outbox_.send_now(NotifyEvent::kEnd, std::move(payload));
}

void Coordinator::notify_trial_error(const Trial& trial, const std::string& why) {
  if (!notify_outbox_.wants(NotifyEvent::kTrialError)) return;
  // Rides the round's commit, which stores the trial's ERROR.
  notify_outbox_.stage(
      NotifyEvent::kTrialError,
      trial_error_payload(notify_experiment(experiment_, "ACTIVE"), trial_id(trial.index), why,
                          trial.record.value("restarts", 0)),
      batch_);
}

void Coordinator::notify_best(const Trial& trial, double value) {
  if (!notify_outbox_.wants(NotifyEvent::kBestImproved)) return;
  // The outbox keeps the experiment's best notified and its pace in the store
  // (notify_outbox.h): a resume neither repeats nor forgets them.
  notify_outbox_.best(
      best_improved_payload(notify_experiment(experiment_, "ACTIVE"),
                            NotifyBest{trial_id(trial.index), config_.searcher.metric, value}),
      value, batch_);
}

void Coordinator::notify_due() {
  notify_outbox_.tick(batch_);
}

}  // namespace cairn
