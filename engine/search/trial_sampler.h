// How a searcher that samples (random, hyperband, asha) draws trial k's hyperparameters:
// `sampler: random` with sample_hparams, a pure function of (experiment seed, k);
// `sampler: tpe` with TpeSampler, fitted on the observations the searcher was told about
// before it created trial k, with random numbers from a stream derived from (experiment
// seed, k) alone. Which observations (docs/search.md, "TPE" and "BOHB"):
//   - kFinal (random search): each trial's metric at max_length; the model is used once at
//     least n_startup_trials trials have one (and at least one has);
//   - kLongestRung (hyperband, asha: BOHB, bohb_sampler.h): every validation at a rung,
//     pooled by length across brackets; once at least n_startup_trials trials have
//     validated at some rung, BOHB's multivariate KDEs are fitted on the longest length with
//     at least 2 · N_min results (N_min = d + 1, d = the searched hyperparameters); and a
//     third of the trials that could come from the model are drawn at random, chosen by a
//     coin that is a function of (experiment seed, k).
// Until then, for those random picks, and whenever there is nothing to search, trial k is
// sampled at random, exactly as `sampler: random` would sample it.
//
// Part of its searcher's state: a pure function of the config, the seed and the calls, so a
// searcher rebuilt by replaying its events samples the same trials. Not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "common/json.h"
#include "engine/config/config.h"
#include "engine/search/bohb_sampler.h"
#include "engine/search/tpe_sampler.h"

namespace cairn {

class TrialSampler {
 public:
  enum class Rule { kFinal, kLongestRung };

  TrialSampler(const ExperimentConfig& config, uint64_t seed, Rule rule);

  // The hyperparameters of trial `trial` (created in index order), from what was observed
  // so far; with tpe, remembered, so that its later observations describe it.
  Json sample(int64_t trial);
  // `trial` validated at `length` with `loss` (lower is better; NaN counts as +inf); in
  // hyperband and asha also a trial that errored out on its way to `length`, with +inf
  // (BOHB's rule for a run without a result). Ignored for a trial this sampler did not create.
  void observe(int64_t trial, int64_t length, double loss);

  // Fields for the searcher's describe(): "sampler", and with tpe "tpe": {"model_trials",
  // "random_trials", "last_model": {"trial", "length", "observations"} or null}.
  void describe(Json& out) const;

 private:
  struct Observation {
    int64_t trial;
    double loss;
  };
  struct Fit {
    int64_t trial, length, observations;
  };
  // The length to fit the model on now, if the model is to be used.
  std::optional<int64_t> model_length() const;

  std::map<std::string, HyperparameterSpec> specs_;
  uint64_t seed_;
  Rule rule_;
  bool tpe_;
  TpeConfig settings_;
  TpeSampler tpe_sampler_;    // converts every trial's values; samples for kFinal
  BohbSampler bohb_sampler_;  // samples for kLongestRung
  // By trial, its hyperparameters as the estimators see them: converted once, when the
  // trial is created, not again for every later trial the model samples.
  std::map<int64_t, TpeInternalValues> internal_;
  std::map<int64_t, std::vector<Observation>> by_length_;  // in arrival order
  std::set<int64_t> observed_;                             // trials with an observation
  int64_t model_trials_ = 0, random_trials_ = 0;
  std::optional<Fit> last_fit_;
};

}  // namespace cairn
