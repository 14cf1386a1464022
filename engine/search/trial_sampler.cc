#include "engine/search/trial_sampler.h"

#include <algorithm>
#include <cmath>

#include "engine/search/hparam_sampler.h"

namespace cairn {
namespace {

// The start of trial `trial`'s TPE stream: a function of (experiment seed, trial) alone, and
// unrelated to the keys of sample_hparams and trial_seed.
uint64_t tpe_stream(uint64_t seed, int64_t trial) {
  SplitMix64 key(seed ^ 0x5450452d73747265ULL);  // "TPE-stre"
  return key.next() ^ (0xd1342543de82ef95ULL * static_cast<uint64_t>(trial));
}

}  // namespace

TrialSampler::TrialSampler(const ExperimentConfig& config, uint64_t seed, Rule rule)
    : specs_(config.hyperparameters),
      seed_(seed),
      rule_(rule),
      tpe_(config.searcher.sampler == "tpe"),
      settings_(config.searcher.tpe),
      tpe_sampler_(config.hyperparameters, config.searcher.tpe) {}

std::optional<int64_t> TrialSampler::model_length() const {
  if (!tpe_ || tpe_sampler_.dimensions() == 0) return std::nullopt;
  const auto started = static_cast<size_t>(std::max(settings_.n_startup_trials, 1));
  if (observed_.size() < started) return std::nullopt;
  const size_t enough = rule_ == Rule::kFinal ? 1 : tpe_sampler_.dimensions() + 1;
  for (auto it = by_length_.rbegin(); it != by_length_.rend(); ++it)
    if (it->second.size() >= enough) return it->first;
  return std::nullopt;
}

Json TrialSampler::sample(int64_t trial) {
  Json hparams;
  if (std::optional<int64_t> length = model_length()) {
    std::vector<TpePreparedObservation> observations;
    observations.reserve(by_length_.at(*length).size());
    for (const Observation& o : by_length_.at(*length))
      observations.push_back({o.trial, &internal_.at(o.trial), o.loss});
    SplitMix64 rng(tpe_stream(seed_, trial));
    hparams = tpe_sampler_.sample_prepared(std::move(observations), rng);
    ++model_trials_;
    last_fit_ = Fit{trial, *length, static_cast<int64_t>(by_length_.at(*length).size())};
  } else {
    hparams = sample_hparams(specs_, seed_, trial);
    ++random_trials_;
  }
  if (tpe_) {  // random sampling never looks back
    internal_[trial] = tpe_sampler_.internal_values(hparams);
  }
  return hparams;
}

void TrialSampler::observe(int64_t trial, int64_t length, double loss) {
  if (!tpe_ || !internal_.count(trial)) return;  // random sampling needs no history
  by_length_[length].push_back({trial, std::isnan(loss) ? HUGE_VAL : loss});
  observed_.insert(trial);
}

void TrialSampler::describe(Json& out) const {
  out["sampler"] = tpe_ ? "tpe" : "random";
  if (!tpe_) return;
  Json last = nullptr;
  if (last_fit_)
    last = Json{{"trial", last_fit_->trial},
                {"length", last_fit_->length},
                {"observations", last_fit_->observations}};
  out["tpe"] = Json{
      {"model_trials", model_trials_}, {"random_trials", random_trials_}, {"last_model", last}};
}

}  // namespace cairn
