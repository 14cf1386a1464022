// `best_validation`: a trial asks for the experiment's best value of the searcher's metric so
// far (Determined's get_experiment_best_validation, docs/determined.md). The answer is the
// best trial's best validation, by the one ordering `best`, `show` and the summary use
// (store/best_trial.h), over every trial of the experiment, including those of earlier runs.
#include "engine/coordinator/coordinator.h"
#include "engine/coordinator/trial_state.h"
#include "store/best_trial.h"

namespace cairn {

void Coordinator::handle_best_validation(ControlConnection& conn, const Json& msg) {
  std::vector<const Json*> records;
  for (const auto& [index, trial] : trials_) records.push_back(&trial->record);
  const std::string& metric = config_.searcher.metric;
  Json answer{{"type", "best_validation"}, {"re", msg.value("seq", Json(0))}, {"value", nullptr}};
  if (const Json* best =
          best_trial(records, metric, MetricOrder(config_.searcher.smaller_is_better))) {
    const Json& values = best->value("best_validation", Json::object());
    if (values.is_object() && values.contains(metric) && values[metric].is_number())
      answer["value"] = values[metric];
  }
  reply(conn, std::move(answer));
}

}  // namespace cairn
