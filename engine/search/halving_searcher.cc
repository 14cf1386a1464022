#include "engine/search/halving_searcher.h"

#include <algorithm>
#include <cmath>

#include "common/metric_order.h"
#include "engine/search/hparam_sampler.h"

namespace cairn {

HalvingSearcher::HalvingSearcher(std::string name, const ExperimentConfig& config, uint64_t seed,
                                 int concurrency, std::vector<BracketPlan> plan)
    : name_(std::move(name)),
      config_(config.searcher),
      sampler_(config, seed, TrialSampler::Rule::kLongestRung),
      seed_(seed),
      concurrency_(std::max(concurrency, 1)) {
  for (BracketPlan& bracket_plan : plan) {
    Bracket b;
    for (const RungPlan& rung : bracket_plan.rungs) b.rungs.emplace_back(rung.length);
    b.training.assign(b.rungs.size(), 0);
    planned_ += bracket_plan.trials;
    b.plan = std::move(bracket_plan);
    brackets_.push_back(std::move(b));
  }
}

HalvingSearcher::Trial* HalvingSearcher::find(int64_t trial) {
  if (trial < 1 || trial > static_cast<int64_t>(trials_.size())) return nullptr;
  return &trials_[trial - 1];
}

std::vector<SearcherAction> HalvingSearcher::start() {
  plan_.reset();
  Actions out;
  create_while_room(out);
  return out;
}

void HalvingSearcher::create_while_room(Actions& out) {
  while (busy_ < concurrency_ && static_cast<int64_t>(trials_.size()) < planned_) {
    const int index = next_bracket();
    Bracket& b = brackets_[index];
    ++b.created;
    ++b.training[0];
    ++busy_;
    trials_.push_back(Trial{index, 0, true, false, false});
    const auto trial = static_cast<int64_t>(trials_.size());
    out.push_back(SearcherAction::create(trial, sampler_.sample(trial), trial_seed(seed_, trial)));
    out.push_back(SearcherAction::train(trial, b.rungs[0].length()));
  }
}

std::vector<SearcherAction> HalvingSearcher::on_validation(int64_t trial, int64_t length,
                                                           double metric) {
  plan_.reset();
  Trial* t = find(trial);
  if (t == nullptr || !t->training) return {};
  Bracket& b = brackets_[t->bracket];
  Rung& rung = b.rungs[t->rung];
  if (length < rung.length()) return {};  // not a rung boundary: nothing to decide
  t->training = false;
  --busy_;
  --b.training[t->rung];
  const double loss = MetricOrder(config_.smaller_is_better).key(metric);
  best_.offer(trial, rung.length(), metric, loss);
  rung.add(trial, metric, loss);
  sampler_.observe(trial, rung.length(), loss);
  Actions out;
  if (t->rung == b.last_rung()) {  // max_length reached: the trial is complete
    rung.mark_closed(trial);
    close({trial}, out);
  }
  on_rung_changed(t->bracket, t->rung, out);
  create_while_room(out);
  return out;
}

std::vector<SearcherAction> HalvingSearcher::on_trial_closed(int64_t trial) {
  plan_.reset();
  Trial* t = find(trial);
  if (t == nullptr || t->closed) return {};
  t->closed = true;
  ++closed_;
  Actions out;
  Bracket& b = brackets_[t->bracket];
  if (t->training) {  // it errored out on its way to the rung: the rung's worst
    t->training = false;
    --busy_;
    --b.training[t->rung];
    b.rungs[t->rung].add_errored(trial);
    // BOHB (HpBandSter's new_result): a run that ended without a result is a +inf loss at
    // the budget it was given, so the model learns where configurations fail.
    sampler_.observe(trial, b.rungs[t->rung].length(), HUGE_VAL);
    on_rung_changed(t->bracket, t->rung, out);
  } else if (!t->close_sent) {  // it ended while waiting: never promote it
    b.rungs[t->rung].mark_errored(trial);
    on_rung_changed(t->bracket, t->rung, out);
  }
  create_while_room(out);
  return out;
}

void HalvingSearcher::promote(int bracket, int rung, const std::vector<int64_t>& trials,
                              Actions& out) {
  Bracket& b = brackets_[bracket];
  for (int64_t trial : trials) {
    Trial& t = trials_[trial - 1];
    t.rung = rung + 1;
    t.training = true;
    ++busy_;
    ++b.training[rung + 1];
    out.push_back(SearcherAction::train(trial, b.rungs[rung + 1].length()));
  }
}

void HalvingSearcher::close(const std::vector<int64_t>& trials, Actions& out) {
  for (int64_t trial : trials) {
    trials_[trial - 1].close_sent = true;
    out.push_back(SearcherAction::close(trial));
  }
}

std::vector<SearcherAction> HalvingSearcher::set_concurrency(int concurrency) {
  plan_.reset();
  concurrency_ = std::max(concurrency, 1);
  Actions out;
  create_while_room(out);
  return out;
}

bool HalvingSearcher::finished() const {
  return static_cast<int64_t>(trials_.size()) == planned_ && closed_ == planned_;
}

bool HalvingSearcher::rung_settled(const Bracket& b, int r) const {
  // Rung 0 takes every trial the bracket creates; a higher rung takes promotions from the
  // one below, which can happen while that rung can still grow (a trial trains toward it)
  // or holds a trial waiting for its decision.
  for (int below = 0; below <= r; ++below) {
    if (below == 0) {
      if (!b.all_created()) return false;
      continue;
    }
    if (b.training[below - 1] > 0) return false;
    for (const RungEntry& entry : b.rungs[below - 1].ranked())
      if (entry.state == RungEntry::State::kWaiting) return false;
  }
  return true;
}

SearchPlan HalvingSearcher::plan() const {
  if (plan_) return *plan_;
  int64_t units = 0;
  for (const Bracket& b : brackets_) {
    int64_t previous = 0;
    for (int r = 0; r <= b.last_rung(); ++r) {
      const int64_t sent = b.rungs[r].size() + b.training[r];
      const int64_t count =
          rung_settled(b, r) ? sent : std::max<int64_t>(sent, b.plan.rungs[r].trials);
      units += count * std::max<int64_t>(b.rungs[r].length() - previous, 0);
      previous = b.rungs[r].length();
    }
  }
  plan_ = SearchPlan{planned_, units};
  return *plan_;
}

Json HalvingSearcher::describe() const {
  Json brackets = Json::array();
  for (size_t i = 0; i < brackets_.size(); ++i) {
    const Bracket& b = brackets_[i];
    Json rungs = Json::array();
    for (size_t r = 0; r < b.rungs.size(); ++r) {
      Json rung{{"length", b.rungs[r].length()},
                {"expected", b.plan.rungs[r].trials},
                {"training", b.training[r]}};
      rung.update(b.rungs[r].describe());
      rungs.push_back(std::move(rung));
    }
    brackets.push_back(Json{{"bracket", i + 1},
                            {"trials_planned", b.plan.trials},
                            {"trials_created", b.created},
                            {"rungs", std::move(rungs)}});
  }
  Json out{{"searcher", name_},
           {"trials_planned", planned_},
           {"trials_created", trials_.size()},
           {"trials_closed", closed_},
           {"best", best_.describe()}};
  sampler_.describe(out);
  out["brackets"] = std::move(brackets);
  return out;
}

}  // namespace cairn
