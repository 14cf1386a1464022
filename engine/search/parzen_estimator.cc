#include "engine/search/parzen_estimator.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>

#include "engine/search/truncated_normal.h"

namespace cairn {
namespace {

// The mixture weights: the observations' (oldest first), then the prior's, normalized.
std::vector<double> mixture_weights(size_t observations, double prior_weight) {
  std::vector<double> weights = tpe_observation_weights(observations);
  weights.push_back(prior_weight);
  const double sum = std::accumulate(weights.begin(), weights.end(), 0.0);
  for (double& w : weights) w /= sum;
  return weights;
}

// The component a uniform draw picks: the first whose cumulative weight exceeds it.
size_t pick(const std::vector<double>& weights, double u) {
  double cumulative = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    cumulative += weights[i];
    if (u < cumulative) return i;
  }
  return weights.size() - 1;  // rounding left the total a hair below u
}

// log Σ exp(terms), −inf when every term is.
double log_sum_exp(const std::vector<double>& terms) {
  const double top = *std::max_element(terms.begin(), terms.end());
  if (!std::isfinite(top)) return top;
  double sum = 0;
  for (double t : terms) sum += std::exp(t - top);
  return top + std::log(sum);
}

}  // namespace

std::vector<double> tpe_observation_weights(size_t n) {
  std::vector<double> weights(n, 1.0);
  constexpr size_t kFlat = 25;
  if (n < kFlat) return weights;
  // numpy's linspace(1/n, 1, n − 25): the ramp's ends exact, the steps evenly spaced.
  const size_t ramp = n - kFlat;
  const double first = 1.0 / static_cast<double>(n);
  const double step = ramp > 1 ? (1.0 - first) / static_cast<double>(ramp - 1) : 0.0;
  for (size_t i = 0; i < ramp; ++i) weights[i] = static_cast<double>(i) * step + first;
  if (ramp > 1) weights[ramp - 1] = 1.0;
  return weights;
}

NumericalParzen::NumericalParzen(const std::vector<double>& observations, double low, double high,
                                 double step, const ParzenSettings& settings)
    : low_(low),
      high_(high),
      step_(step),
      lower_(step > 0 ? low - step / 2 : low),
      upper_(step > 0 ? high + step / 2 : high) {
  const size_t n = observations.size();
  weights_ = mixture_weights(n, settings.prior_weight);
  const double range = upper_ - lower_;
  mus_ = observations;
  mus_.push_back(0.5 * (lower_ + upper_));  // the prior

  // Each component's bandwidth: the larger gap to its neighbours in sorted order, the ends
  // of the range counting as neighbours (ties keep their given order, so the result never
  // depends on the sort's implementation).
  std::vector<size_t> order(mus_.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return mus_[a] < mus_[b]; });
  std::vector<double> sorted{lower_};
  for (size_t i : order) sorted.push_back(mus_[i]);
  sorted.push_back(upper_);
  const size_t m = mus_.size();
  std::vector<double> sorted_sigmas(m);
  for (size_t k = 0; k < m; ++k)
    sorted_sigmas[k] = std::max(sorted[k + 1] - sorted[k], sorted[k + 2] - sorted[k + 1]);
  if (!settings.consider_endpoints && m >= 2) {
    // The outermost components look inward only: the gap to a range end says nothing about
    // where good values are.
    sorted_sigmas[0] = sorted[2] - sorted[1];
    sorted_sigmas[m - 1] = sorted[m] - sorted[m - 1];
  }
  const double max_sigma = range;
  const double min_sigma =
      settings.consider_magic_clip ? range / std::min(100.0, 1.0 + static_cast<double>(m)) : 1e-12;
  sigmas_.assign(m, 0);
  for (size_t k = 0; k < m; ++k)
    sigmas_[order[k]] = std::clamp(sorted_sigmas[k], min_sigma, max_sigma);
  sigmas_[n] = range;  // the prior is wide whatever its neighbours

  for (size_t i = 0; i < m; ++i) {
    log_weights_.push_back(std::log(weights_[i]));
    log_mass_.push_back(
        normal_log_mass((lower_ - mus_[i]) / sigmas_[i], (upper_ - mus_[i]) / sigmas_[i]));
    log_norm_.push_back(0.5 * std::log(2 * std::numbers::pi) + std::log(sigmas_[i]) + log_mass_[i]);
  }
}

double NumericalParzen::sample(SplitMix64& rng) const {
  const size_t i = pick(weights_, rng.uniform());
  const double mu = mus_[i], sigma = sigmas_[i];
  const double z = truncated_normal_at((lower_ - mu) / sigma, (upper_ - mu) / sigma, rng.uniform());
  const double x = mu + sigma * z;
  if (step_ <= 0) return std::clamp(x, low_, high_);
  // numpy's round: halves to even, as nearbyint does in the default rounding mode.
  return std::clamp(std::nearbyint((x - low_) / step_) * step_ + low_, low_, high_);
}

double NumericalParzen::log_pdf(double x) const {
  std::vector<double> terms(mus_.size());
  for (size_t i = 0; i < mus_.size(); ++i) {
    const double mu = mus_[i], sigma = sigmas_[i];
    double log_p;
    if (step_ <= 0) {
      const double z = (x - mu) / sigma;
      log_p = x < lower_ || x > upper_ ? -HUGE_VAL : -0.5 * z * z - log_norm_[i];
    } else {
      const double from = std::max(x - step_ / 2, lower_);
      const double to = std::min(x + step_ / 2, upper_);
      log_p = normal_log_mass((from - mu) / sigma, (to - mu) / sigma) - log_mass_[i];
    }
    terms[i] = log_weights_[i] + log_p;
  }
  return log_sum_exp(terms);
}

CategoricalParzen::CategoricalParzen(const std::vector<int>& observations, int choices,
                                     const ParzenSettings& settings) {
  const size_t n = observations.size();
  weights_ = mixture_weights(n, settings.prior_weight);
  const double base = settings.prior_weight / static_cast<double>(n + 1);
  probabilities_.assign(n + 1, std::vector<double>(static_cast<size_t>(choices), base));
  for (size_t i = 0; i < n; ++i) probabilities_[i][static_cast<size_t>(observations[i])] += 1;
  for (std::vector<double>& row : probabilities_) {
    const double sum = std::accumulate(row.begin(), row.end(), 0.0);
    for (double& p : row) p /= sum;
  }
}

int CategoricalParzen::sample(SplitMix64& rng) const {
  const std::vector<double>& row = probabilities_[pick(weights_, rng.uniform())];
  // Optuna's rule: the number of cumulative probabilities below the draw.
  const double u = rng.uniform();
  double cumulative = 0;
  int below = 0;
  for (double p : row) {
    cumulative += p;
    if (cumulative < u) ++below;
  }
  return std::min(below, static_cast<int>(row.size()) - 1);
}

double CategoricalParzen::log_pdf(int choice) const {
  double p = 0;
  for (size_t i = 0; i < weights_.size(); ++i) p += weights_[i] * probabilities_[i][choice];
  return std::log(p);
}

}  // namespace cairn
