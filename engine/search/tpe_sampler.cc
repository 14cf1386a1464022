#include "engine/search/tpe_sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <tuple>

#include "engine/config/hparam_values.h"
#include "engine/search/parzen_estimator.h"

namespace cairn {
namespace {

using Type = HyperparameterSpec::Type;

void collect_leaves(const std::map<std::string, HyperparameterSpec>& specs,
                    std::vector<std::string>& path, auto& out) {
  for (const auto& [name, spec] : specs) {  // std::map: sorted
    path.push_back(name);
    if (spec.type == Type::kNested)
      collect_leaves(spec.children, path, out);
    else if (spec.type != Type::kConst)
      out.push_back({path, spec});
    path.pop_back();
  }
}

const Json* value_at(const Json& hparams, const std::vector<std::string>& path) {
  const Json* at = &hparams;
  for (const std::string& key : path) {
    if (!at->is_object()) return nullptr;
    auto it = at->find(key);
    if (it == at->end()) return nullptr;
    at = &*it;
  }
  return at;
}

// Where a value sits in the estimator's space: the number itself (int, double), its exponent
// (log), its index in vals (categorical); nullopt for a value the spec cannot have produced.
std::optional<double> internal_value(const HyperparameterSpec& spec, const Json* value) {
  if (value == nullptr) return std::nullopt;
  if (spec.type == Type::kCategorical) {
    for (size_t i = 0; i < spec.vals.size(); ++i)
      if (spec.vals[i] == *value) return static_cast<double>(i);
    return std::nullopt;
  }
  if (!value->is_number()) return std::nullopt;
  const double x = value->get<double>();
  if (spec.type == Type::kLog) {
    if (!(x > 0)) return std::nullopt;
    return std::log(x) / std::log(spec.base);
  }
  return x;
}

// Of `count` candidates drawn from l, the first with the highest log l − log g. A value
// drawn again (an int or categorical one, whose few values repeat among the candidates)
// takes the score computed for it the first time: the same number, without evaluating both
// mixtures (O(n) each, and for an int a Gaussian mass per component) again.
template <typename Value, typename Estimator>
Value best_candidate(const Estimator& l, const Estimator& g, int count, SplitMix64& rng) {
  Value best{};
  double best_score = -HUGE_VAL;
  std::vector<std::pair<Value, double>> scored;  // at most `count`: a scan is cheap
  for (int i = 0; i < count; ++i) {
    const Value x = l.sample(rng);
    auto known = std::find_if(scored.begin(), scored.end(),
                              [&](const std::pair<Value, double>& s) { return s.first == x; });
    double score;
    if (known != scored.end()) {
      score = known->second;
    } else {
      score = l.log_pdf(x) - g.log_pdf(x);
      if (std::isnan(score)) score = -HUGE_VAL;  // both densities zero: no evidence either way
      scored.emplace_back(x, score);
    }
    if (i == 0 || score > best_score) {
      best = x;
      best_score = score;
    }
  }
  return best;
}

Json assemble_values(const std::map<std::string, HyperparameterSpec>& specs,
                     std::vector<Json>::const_iterator& next) {
  Json out = Json::object();
  for (const auto& [name, spec] : specs) {
    if (spec.type == Type::kConst)
      out[name] = spec.value;
    else if (spec.type == Type::kNested)
      out[name] = assemble_values(spec.children, next);
    else
      out[name] = *next++;
  }
  return out;
}

}  // namespace

TpeSampler::TpeSampler(const std::map<std::string, HyperparameterSpec>& specs,
                       const TpeConfig& settings)
    : specs_(specs), settings_(settings) {
  std::vector<std::string> path;
  collect_leaves(specs_, path, leaves_);
}

int64_t TpeSampler::good_count(int64_t n, const TpeConfig& settings) {
  // ⌈gamma · n⌉ as numpy computes it (np.ceil of the product), then the cap.
  const auto good = static_cast<int64_t>(std::ceil(settings.gamma * static_cast<double>(n)));
  return std::min<int64_t>(good, settings.max_good);
}

Json TpeSampler::propose(const Leaf& leaf, const std::vector<double>& good_x,
                         const std::vector<double>& bad_x, SplitMix64& rng) const {
  const HyperparameterSpec& spec = leaf.spec;
  const ParzenSettings parzen{settings_.prior_weight, settings_.consider_magic_clip,
                              settings_.consider_endpoints};
  switch (spec.type) {
    case Type::kCategorical: {
      auto indices = [](const std::vector<double>& x) {
        return std::vector<int>(x.begin(), x.end());
      };
      const auto choices = static_cast<int>(spec.vals.size());
      const CategoricalParzen l(indices(good_x), choices, parzen);
      const CategoricalParzen g(indices(bad_x), choices, parzen);
      return spec.vals[best_candidate<int>(l, g, settings_.n_ei_candidates, rng)];
    }
    case Type::kInt: {
      const NumericalParzen l(good_x, spec.minval, spec.maxval, 1, parzen);
      const NumericalParzen g(bad_x, spec.minval, spec.maxval, 1, parzen);
      return static_cast<int64_t>(best_candidate<double>(l, g, settings_.n_ei_candidates, rng));
    }
    case Type::kDouble:
    case Type::kLog: {
      const double width = spec.maxval - spec.minval;
      if (!(width > 0)) return range_value(spec, 0);  // one value: nothing to learn
      const NumericalParzen l(good_x, spec.minval, spec.maxval, 0, parzen);
      const NumericalParzen g(bad_x, spec.minval, spec.maxval, 0, parzen);
      const double x = best_candidate<double>(l, g, settings_.n_ei_candidates, rng);
      // Through range_value, so a value is one random sampling could give: inside
      // [minval, maxval), and base^x for log.
      return range_value(spec, std::clamp((x - spec.minval) / width, 0.0, kLargestUniform));
    }
    case Type::kConst:
    case Type::kNested:
      break;
  }
  return nullptr;
}

TpeInternalValues TpeSampler::internal_values(const Json& hparams) const {
  TpeInternalValues out;
  out.reserve(leaves_.size());
  for (const Leaf& leaf : leaves_)
    out.push_back(internal_value(leaf.spec, value_at(hparams, leaf.path)));
  return out;
}

Json TpeSampler::sample(std::vector<TpeObservation> observations, SplitMix64& rng) const {
  std::vector<TpeInternalValues> values;
  values.reserve(observations.size());
  for (const TpeObservation& o : observations) values.push_back(internal_values(o.hparams));
  std::vector<TpePreparedObservation> prepared;
  prepared.reserve(observations.size());
  for (size_t i = 0; i < observations.size(); ++i)
    prepared.push_back({observations[i].trial, &values[i], observations[i].loss});
  return sample_prepared(std::move(prepared), rng);
}

Json TpeSampler::sample_prepared(std::vector<TpePreparedObservation> observations,
                                 SplitMix64& rng) const {
  std::stable_sort(observations.begin(), observations.end(),
                   [](const TpePreparedObservation& a, const TpePreparedObservation& b) {
                     return a.trial < b.trial;
                   });
  const auto n = static_cast<int64_t>(observations.size());
  // The good ones: the lowest losses, ties to the older trial (then to the earlier one in
  // trial order: a strict order, so a partial sort picks the set a full sort would).
  const int64_t good_n = std::min(n, good_count(n, settings_));
  std::vector<size_t> ranked(observations.size());
  std::iota(ranked.begin(), ranked.end(), size_t{0});
  std::partial_sort(ranked.begin(), ranked.begin() + good_n, ranked.end(), [&](size_t a, size_t b) {
    return std::tie(observations[a].loss, observations[a].trial, a) <
           std::tie(observations[b].loss, observations[b].trial, b);
  });
  std::vector<bool> is_good(observations.size(), false);
  for (int64_t i = 0; i < good_n; ++i) is_good[ranked[i]] = true;

  std::vector<Json> values;
  std::vector<double> good_x, bad_x;  // each oldest first
  for (size_t leaf = 0; leaf < leaves_.size(); ++leaf) {
    good_x.clear();
    bad_x.clear();
    for (size_t i = 0; i < observations.size(); ++i)
      if (const std::optional<double>& x = (*observations[i].values)[leaf])
        (is_good[i] ? good_x : bad_x).push_back(*x);
    values.push_back(propose(leaves_[leaf], good_x, bad_x, rng));
  }
  return assemble(values);
}

std::vector<HyperparameterSpec> TpeSampler::leaf_specs() const {
  std::vector<HyperparameterSpec> out;
  out.reserve(leaves_.size());
  for (const Leaf& leaf : leaves_) out.push_back(leaf.spec);
  return out;
}

Json TpeSampler::assemble(const std::vector<Json>& leaf_values) const {
  auto next = std::cbegin(leaf_values);
  return assemble_values(specs_, next);
}

}  // namespace cairn
