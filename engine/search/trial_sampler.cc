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

// Whether BOHB draws trial `trial` at random rather than from the model (with probability
// ρ, BohbSettings::random_fraction): a coin of its own per (experiment seed, trial), so
// neither the TPE stream nor random sampling's changes.
bool bohb_random_pick(uint64_t seed, int64_t trial, double random_fraction) {
  SplitMix64 coin(tpe_stream(seed ^ 0x424f48422d726e64ULL, trial));  // "BOHB-rnd"
  return static_cast<double>(coin.next() >> 11) * 0x1.0p-53 < random_fraction;
}

}  // namespace

TrialSampler::TrialSampler(const ExperimentConfig& config, uint64_t seed, Rule rule)
    : specs_(config.hyperparameters),
      seed_(seed),
      rule_(rule),
      tpe_(config.searcher.sampler == "tpe"),
      settings_(config.searcher.tpe),
      tpe_sampler_(config.hyperparameters, config.searcher.tpe),
      bohb_sampler_(tpe_sampler_.leaf_specs(), BohbSettings{}) {}

std::optional<int64_t> TrialSampler::model_length() const {
  if (!tpe_ || tpe_sampler_.dimensions() == 0) return std::nullopt;
  const auto started = static_cast<size_t>(std::max(settings_.n_startup_trials, 1));
  if (observed_.size() < started) return std::nullopt;
  // BOHB (Falkner et al. 2018, and its reference code, HpBandSter): a length's model needs
  // more than d good and more than d bad results, so at least 2 · N_min of them.
  for (auto it = by_length_.rbegin(); it != by_length_.rend(); ++it) {
    const auto n = static_cast<int64_t>(it->second.size());
    if (rule_ == Rule::kFinal ? n >= 1 : bohb_sampler_.enough(n)) return it->first;
  }
  return std::nullopt;
}

Json TrialSampler::sample(int64_t trial) {
  Json hparams;
  std::optional<int64_t> length = model_length();
  if (length && rule_ == Rule::kLongestRung &&
      bohb_random_pick(seed_, trial, BohbSettings{}.random_fraction))
    length.reset();
  if (length) {
    std::vector<TpePreparedObservation> observations;
    observations.reserve(by_length_.at(*length).size());
    for (const Observation& o : by_length_.at(*length))
      observations.push_back({o.trial, &internal_.at(o.trial), o.loss});
    SplitMix64 rng(tpe_stream(seed_, trial));
    hparams = rule_ == Rule::kLongestRung
                  ? tpe_sampler_.assemble(bohb_sampler_.propose(std::move(observations), rng))
                  : tpe_sampler_.sample_prepared(std::move(observations), rng);
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
