#include "cli/trial_ref.h"

#include "cli/command.h"

namespace cairn::cli {

Result<TrialRef> load_trial_ref(const StoreLayout& store, const std::string& text) {
  auto id = parse_id(text);
  if (!id.ok()) return id.status();
  auto reader = ExperimentReader::open(store, id->experiment);
  if (!reader.ok()) return reader.status();
  TrialRef ref;
  auto exp = (*reader)->experiment();
  if (!exp.ok()) return exp.status();
  ref.experiment = std::move(*exp);
  int64_t index = id->trial;
  if (index == 0) {
    auto trials = (*reader)->trials();
    if (!trials.ok()) return trials.status();
    if (trials->empty()) return Status::NotFound("experiment " + text + " has no trials yet");
    // Its best trial; the first when none has validated yet.
    const Json* best = best_trial_record(ref.experiment, *trials);
    index = (best ? *best : trials->front()).value("index", int64_t{1});
  }
  auto trial = (*reader)->trial(index);
  if (!trial.ok()) return trial.status();
  ref.trial = std::move(*trial);
  ref.id = trial_id_text(id->experiment, index);
  auto training = (*reader)->metrics(index, schema::MetricKind::kTraining);
  if (!training.ok()) return training.status();
  ref.training = std::move(*training);
  auto validation = (*reader)->metrics(index, schema::MetricKind::kValidation);
  if (!validation.ok()) return validation.status();
  ref.validation = std::move(*validation);
  auto events = (*reader)->db().scan_json(schema::kEventPrefix);
  if (!events.ok()) return events.status();
  for (const Json& e : *events) {
    if (e.value("type", "") != "train" || e.value("trial", int64_t{0}) != index) continue;
    const int64_t length = e.value("length", int64_t{0});
    if (ref.train_lengths.empty() || length > ref.train_lengths.back())
      ref.train_lengths.push_back(length);
  }
  return ref;
}

}  // namespace cairn::cli
