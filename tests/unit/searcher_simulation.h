// An instant-trial stand-in for the coordinator, for searcher tests: it applies a
// searcher's actions the way the coordinator does — at most `concurrency` trials train at
// once, pending work starts lowest trial index first, a trial that finishes validates with
// a metric that is a fixed function of its hyperparameters and length, a closed trial
// reports back after the current decision — and records everything that happened, every
// call made (for replay) and every answer.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/config/config.h"
#include "engine/search/searcher.h"
#include "test_dir.h"

namespace cairn::testing {

inline ExperimentConfig searcher_config(const std::string& yaml) {
  TestDir dir;
  auto cfg = parse_experiment_config(yaml, "exp.yaml", dir.path(), {}, ConfigUse::kNewExperiment);
  REQUIRE_MESSAGE(cfg.ok(), cfg.status().message());
  return *cfg;
}

inline std::string describe_action(const SearcherAction& a) {
  switch (a.kind) {
    case SearcherAction::Kind::kCreateTrial:
      return "create " + std::to_string(a.trial) + " " + a.hparams.dump() + " seed " +
             std::to_string(a.seed);
    case SearcherAction::Kind::kTrain:
      return "train " + std::to_string(a.trial) + " to " + std::to_string(a.length);
    case SearcherAction::Kind::kClose:
      return "close " + std::to_string(a.trial);
  }
  return "";
}

inline std::vector<std::string> describe_actions(const std::vector<SearcherAction>& actions) {
  std::vector<std::string> out;
  for (const SearcherAction& a : actions) out.push_back(describe_action(a));
  return out;
}

// One call the coordinator made (start is implied first).
struct SearcherCall {
  bool validation = true;  // else on_trial_closed
  int64_t trial = 0, length = 0;
  double metric = 0;
};

inline std::vector<SearcherAction> deliver(Searcher& searcher, const SearcherCall& call) {
  return call.validation ? searcher.on_validation(call.trial, call.length, call.metric)
                         : searcher.on_trial_closed(call.trial);
}

class InstantTrials {
 public:
  using Metric = std::function<double(const Json& hparams, int64_t length)>;

  InstantTrials(Searcher& searcher, int concurrency, Metric metric)
      : searcher_(searcher), concurrency_(concurrency), metric_(std::move(metric)) {}

  // True when `trial` errors out on its way to `length` instead of validating.
  std::function<bool(int64_t trial, int64_t length)> fails = [](int64_t, int64_t) { return false; };

  void run(int64_t max_calls = 1'000'000) {
    const std::vector<SearcherAction> first = searcher_.start();
    answers.push_back(describe_actions(first));
    apply(first);
    while (static_cast<int64_t>(calls.size()) < max_calls) {
      if (!closing_.empty()) {
        const int64_t trial = closing_.front();
        closing_.pop_front();
        call(SearcherCall{false, trial, 0, 0});
        continue;
      }
      start_pending();
      if (running_.empty()) break;
      const int64_t trial = running_.front();
      running_.pop_front();
      const int64_t length = target_[trial];
      units += length - trained[trial];
      trained[trial] = length;
      if (fails(trial, length)) {
        errored.insert(trial);
        errored_at_.push_back({trial, length});
        call(SearcherCall{false, trial, 0, 0});
      } else {
        const double m = metric_(hparams[trial], length);
        validations[trial].push_back({length, m});
        call(SearcherCall{true, trial, length, m});
      }
    }
  }

  // Called after each call's answer was applied (tests that watch the searcher's state).
  std::function<void()> after_call;

  // What happened.
  std::map<int64_t, Json> hparams;                // by trial
  std::map<int64_t, uint64_t> seeds;              // by trial
  std::map<int64_t, std::vector<int64_t>> asked;  // by trial: the lengths of its kTrains
  std::map<int64_t, std::vector<std::pair<int64_t, double>>> validations;  // (length, metric)
  std::map<int64_t, int64_t> trained;  // by trial: units trained so far
  std::set<int64_t> close_sent, closed, errored;
  int64_t units = 0;
  size_t max_outstanding = 0;  // the most trials created and not yet closed at once
  // For replay: calls[i] was answered with answers[i + 1]; answers[0] answered start().
  std::vector<SearcherCall> calls;
  std::vector<std::vector<std::string>> answers;
  // Promotions in order: (trial, from length, to length).
  std::vector<std::tuple<int64_t, int64_t, int64_t>> promotions;
  // For each promotion, the completed (trial, metric) of the rung it left, at that moment;
  // a trial that errored on its way to the rung is there with a NaN metric.
  std::vector<std::vector<std::pair<int64_t, double>>> rung_at_promotion;

 private:
  void call(const SearcherCall& c) {
    calls.push_back(c);
    if (!c.validation) closed.insert(c.trial);
    std::vector<SearcherAction> actions = deliver(searcher_, c);
    answers.push_back(describe_actions(actions));
    apply(actions);
    if (after_call) after_call();
  }

  void apply(const std::vector<SearcherAction>& actions) {
    for (const SearcherAction& a : actions) {
      switch (a.kind) {
        case SearcherAction::Kind::kCreateTrial:
          CHECK(a.trial == static_cast<int64_t>(hparams.size()) + 1);
          hparams[a.trial] = a.hparams;
          seeds[a.trial] = a.seed;
          trained[a.trial] = 0;
          max_outstanding = std::max(max_outstanding, hparams.size() - closed.size());
          break;
        case SearcherAction::Kind::kTrain:
          REQUIRE(hparams.count(a.trial) == 1);
          CHECK_FALSE(closed.count(a.trial));
          CHECK_FALSE(close_sent.count(a.trial));
          CHECK(a.length > trained[a.trial]);  // only ever further, never back
          if (!asked[a.trial].empty()) record_promotion(a.trial, a.length);
          asked[a.trial].push_back(a.length);
          target_[a.trial] = a.length;
          pending_.insert(a.trial);
          break;
        case SearcherAction::Kind::kClose:
          REQUIRE(hparams.count(a.trial) == 1);
          CHECK(close_sent.insert(a.trial).second);
          CHECK_FALSE(pending_.count(a.trial));
          closing_.push_back(a.trial);
          break;
      }
    }
  }

  void record_promotion(int64_t trial, int64_t to) {
    const int64_t from = asked[trial].back();
    promotions.emplace_back(trial, from, to);
    std::vector<std::pair<int64_t, double>> rung;
    for (const auto& [t, vals] : validations)
      for (const auto& [length, m] : vals)
        if (length == from && asked[t].front() == asked[trial].front()) rung.push_back({t, m});
    for (const auto& [t, length] : errored_at_)
      if (length == from && asked[t].front() == asked[trial].front()) rung.push_back({t, NAN});
    rung_at_promotion.push_back(std::move(rung));
  }

  void start_pending() {
    while (static_cast<int>(running_.size()) < concurrency_ && !pending_.empty()) {
      running_.push_back(*pending_.begin());  // lowest trial index first
      pending_.erase(pending_.begin());
    }
  }

  Searcher& searcher_;
  int concurrency_;
  Metric metric_;
  std::set<int64_t> pending_;
  std::deque<int64_t> running_;
  std::deque<int64_t> closing_;
  std::map<int64_t, int64_t> target_;
  std::vector<std::pair<int64_t, int64_t>> errored_at_;  // (trial, length it did not reach)
};

}  // namespace cairn::testing
