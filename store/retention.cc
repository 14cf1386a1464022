#include "store/retention.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "common/metric_order.h"
#include "store/schema.h"

namespace cairn {

namespace {

std::optional<double> metric_value(const Json& metrics, const std::string& name) {
  if (name.empty() || !metrics.is_object()) return std::nullopt;
  auto it = metrics.find(name);
  if (it == metrics.end() || !it->is_number()) return std::nullopt;
  const double v = it->get<double>();
  if (!std::isfinite(v)) return std::nullopt;
  return v;
}

int non_negative(const Json& section, const char* key, int fallback) {
  if (!section.is_object()) return fallback;
  auto it = section.find(key);
  if (it == section.end() || !it->is_number_integer()) return fallback;
  return std::max(0, it->get<int>());
}

// Adds the first `n` of `candidates` (already in preference order) to `keep`.
void keep_first(const std::vector<const CheckpointSummary*>& candidates, int n,
                std::set<std::string>& keep) {
  for (size_t i = 0; i < candidates.size() && static_cast<int64_t>(i) < n; ++i)
    keep.insert(candidates[i]->id);
}

std::vector<const CheckpointSummary*> by_latest(std::vector<const CheckpointSummary*> list) {
  std::sort(list.begin(), list.end(),
            [](const auto* a, const auto* b) { return newer_checkpoint(*a, *b); });
  return list;
}

}  // namespace

std::vector<const CheckpointSummary*> by_best(const std::vector<const CheckpointSummary*>& list,
                                              const RetentionPolicy& policy) {
  const MetricOrder order(policy.smaller_is_better);
  std::vector<std::pair<double, const CheckpointSummary*>> scored;  // (order.key, checkpoint)
  for (const auto* c : list)
    if (auto v = metric_value(c->metrics, policy.metric)) scored.emplace_back(order.key(*v), c);
  std::sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first < b.first;
    if (a.second->steps_completed != b.second->steps_completed)
      return a.second->steps_completed < b.second->steps_completed;
    return a.second->id < b.second->id;
  });
  std::vector<const CheckpointSummary*> out;
  for (const auto& [score, c] : scored) out.push_back(c);
  return out;
}

bool newer_checkpoint(const CheckpointSummary& a, const CheckpointSummary& b) {
  if (a.steps_completed != b.steps_completed) return a.steps_completed > b.steps_completed;
  if (a.registered_last != b.registered_last) return a.registered_last;
  return a.id < b.id;
}

RetentionPolicy RetentionPolicy::from_config(const Json& config) {
  RetentionPolicy p;
  const Json none = Json::object();
  const Json& checkpoint =
      config.is_object() && config.contains("checkpoint") ? config["checkpoint"] : none;
  const Json& searcher =
      config.is_object() && config.contains("searcher") ? config["searcher"] : none;
  p.keep_trial_latest = non_negative(checkpoint, "keep_trial_latest", 1);
  p.keep_trial_best = non_negative(checkpoint, "keep_trial_best", 1);
  p.keep_experiment_best = non_negative(checkpoint, "keep_experiment_best", 0);
  if (searcher.is_object()) {
    if (searcher.contains("metric") && searcher["metric"].is_string())
      p.metric = searcher["metric"].get<std::string>();
    if (searcher.contains("smaller_is_better") && searcher["smaller_is_better"].is_boolean())
      p.smaller_is_better = searcher["smaller_is_better"].get<bool>();
  }
  return p;
}

CheckpointSummary CheckpointSummary::from_record(const Json& record) {
  CheckpointSummary c;
  c.id = record.value("id", "");
  c.trial = record.value("trial_index", int64_t{0});
  c.steps_completed = record.value("steps_completed", int64_t{0});
  if (record.contains("metrics") && record["metrics"].is_object()) c.metrics = record["metrics"];
  return c;
}

RetentionDecision decide_retention(const RetentionPolicy& policy,
                                   const std::vector<CheckpointSummary>& checkpoints,
                                   const std::set<std::string>& pinned) {
  std::map<int64_t, std::vector<const CheckpointSummary*>> by_trial;
  std::vector<const CheckpointSummary*> all;
  for (const auto& c : checkpoints) {
    by_trial[c.trial].push_back(&c);
    all.push_back(&c);
  }
  RetentionDecision d;
  for (const auto& [trial, list] : by_trial) {
    keep_first(by_latest(list), policy.keep_trial_latest, d.keep);
    keep_first(by_best(list, policy), policy.keep_trial_best, d.keep);
  }
  keep_first(by_best(all, policy), policy.keep_experiment_best, d.keep);
  for (const auto& c : checkpoints) {
    if (pinned.count(c.id)) d.keep.insert(c.id);
    if (!d.keep.count(c.id)) d.remove.insert(c.id);
  }
  return d;
}

namespace {

bool may_resume(const Json& trial) {
  const std::string state = trial.value("state", "");
  return state == "QUEUED" || state == "RUNNING" || state == "PAUSED";
}

Result<std::vector<Json>> scan_records(const ExperimentDb& db, const std::string& prefix) {
  return db.scan_json(prefix);
}

// The checkpoints a trial that is not finished would resume from: restore takes the newest
// usable one, so every usable checkpoint at its highest step is kept, and its recorded latest.
std::set<std::string> resume_points(const std::vector<Json>& trials,
                                    const std::vector<CheckpointSummary>& usable) {
  std::set<std::string> pinned;
  for (const Json& trial : trials) {
    // A clone (pbt) starts from its parent's checkpoint, and `reproduce` of it restores that
    // checkpoint again: kept while the clone's record refers to it.
    if (trial.contains("parent_checkpoint") && trial["parent_checkpoint"].is_string())
      pinned.insert(trial["parent_checkpoint"].get<std::string>());
    if (!may_resume(trial)) continue;
    const int64_t index = trial.value("index", int64_t{0});
    const std::string latest =
        trial.contains("latest_checkpoint") && trial["latest_checkpoint"].is_string()
            ? trial["latest_checkpoint"].get<std::string>()
            : std::string();
    int64_t top = -1;
    for (const auto& c : usable)
      if (c.trial == index) top = std::max(top, c.steps_completed);
    for (const auto& c : usable)
      if (c.id == latest || (c.trial == index && c.steps_completed == top)) pinned.insert(c.id);
  }
  return pinned;
}

}  // namespace

Result<std::vector<std::string>> checkpoints_to_delete(const ExperimentDb& db) {
  auto experiment = db.get_json(schema::kExperiment);
  if (!experiment.ok()) return experiment.status();
  if (!experiment->has_value()) return Status::NotFound("the experiment has no record yet");
  const RetentionPolicy policy =
      RetentionPolicy::from_config((**experiment).value("config", Json()));
  auto trials = scan_records(db, schema::kTrialPrefix);
  if (!trials.ok()) return trials.status();
  auto records = scan_records(db, schema::kCheckpointPrefix);
  if (!records.ok()) return records.status();

  std::map<int64_t, std::string> registered_last;  // by trial: its latest_checkpoint
  for (const Json& trial : *trials)
    if (trial.contains("latest_checkpoint") && trial["latest_checkpoint"].is_string())
      registered_last[trial.value("index", int64_t{0})] =
          trial["latest_checkpoint"].get<std::string>();
  std::vector<CheckpointSummary> usable;
  std::vector<std::string> doomed;
  for (const Json& r : *records) {
    if (!schema::checkpoint_is_kept(r)) continue;
    if (r.value("corrupt", false)) {
      doomed.push_back(r.value("id", ""));
      continue;
    }
    CheckpointSummary& c = usable.emplace_back(CheckpointSummary::from_record(r));
    auto latest = registered_last.find(c.trial);
    c.registered_last = latest != registered_last.end() && latest->second == c.id;
  }
  const RetentionDecision decision =
      decide_retention(policy, usable, resume_points(*trials, usable));
  doomed.insert(doomed.end(), decision.remove.begin(), decision.remove.end());
  std::sort(doomed.begin(), doomed.end());
  return doomed;
}

}  // namespace cairn
