#include "engine/search/replay_searcher.h"

#include <algorithm>

namespace cairn {

Result<ReplayPlan> replay_plan_from_json(const Json& reproduces) {
  ReplayPlan plan;
  try {
    plan.hparams = reproduces.at("hparams");
    plan.seed = reproduces.at("seed").get<uint64_t>();
    plan.lengths = reproduces.at("lengths").get<std::vector<int64_t>>();
  } catch (const Json::exception& e) {
    return Status::Corrupt(std::string("the reproduction plan is damaged: ") + e.what());
  }
  if (plan.lengths.empty() || !std::is_sorted(plan.lengths.begin(), plan.lengths.end()) ||
      plan.lengths.front() < 1)
    return Status::Corrupt("the reproduction plan has no valid training lengths");
  return plan;
}

void adopt_replayed_parent(const Json& reproduces, Json& trial_record) {
  if (!reproduces.is_object() || !reproduces.contains("parent")) return;
  const Json& parent = reproduces["parent"];
  if (!parent.is_object() || !parent.value("checkpoint", Json()).is_string()) return;
  trial_record["parent"] = {{"trial", parent.value("trial", "")},
                            {"step", parent.value("step", int64_t{0})}};
  trial_record["parent_checkpoint"] = parent["checkpoint"];
  trial_record["parent_checkpoint_step"] = parent.value("checkpoint_step", int64_t{0});
}

std::vector<SearcherAction> ReplaySearcher::start() {
  next_ = 1;
  return {SearcherAction::create(1, plan_.hparams, plan_.seed),
          SearcherAction::train(1, plan_.lengths.front())};
}

std::vector<SearcherAction> ReplaySearcher::on_validation(int64_t trial, int64_t length, double) {
  if (close_sent_) return {};
  // Skip lengths already reached (a trial may validate past a boundary after a restart).
  while (next_ < plan_.lengths.size() && plan_.lengths[next_] <= length) ++next_;
  if (length < plan_.lengths[next_ - 1]) return {};
  if (next_ < plan_.lengths.size()) return {SearcherAction::train(trial, plan_.lengths[next_++])};
  close_sent_ = true;
  return {SearcherAction::close(trial)};
}

std::vector<SearcherAction> ReplaySearcher::on_trial_closed(int64_t) {
  closed_ = true;
  return {};
}

}  // namespace cairn
