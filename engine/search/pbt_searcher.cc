#include "engine/search/pbt_searcher.h"

#include <algorithm>
#include <cmath>

#include "common/metric_order.h"
#include "engine/config/hparam_values.h"

namespace cairn {

namespace {

using Type = HyperparameterSpec::Type;

// The rule for `name`: the configured one, else the defaults (resample numeric values never,
// categorical ones with probability 0.25).
SearcherConfig::Perturbation rule_for(const SearcherConfig& config, const std::string& name,
                                      const HyperparameterSpec& spec) {
  auto it = config.perturbations.find(name);
  SearcherConfig::Perturbation rule =
      it == config.perturbations.end() ? SearcherConfig::Perturbation{} : it->second;
  if (rule.resample_probability < 0)
    rule.resample_probability = spec.type == Type::kCategorical ? 0.25 : 0.0;
  return rule;
}

Json perturb_one(const HyperparameterSpec& spec, const SearcherConfig& config,
                 const std::string& name, const Json& value, SplitMix64& rng) {
  if (spec.type == Type::kConst) return spec.value;
  if (spec.type == Type::kNested) {
    Json out = Json::object();
    for (const auto& [key, child] : spec.children)
      out[key] = perturb_one(child, config, name + "." + key,
                             value.is_object() ? value.value(key, Json()) : Json(), rng);
    return out;
  }
  const SearcherConfig::Perturbation rule = rule_for(config, name, spec);
  // Both draws are made for every hyperparameter, so that one rule's outcome never shifts
  // the random stream of the next.
  const double resample = rng.uniform();
  const size_t pick = static_cast<size_t>(rng.next() % std::max<size_t>(rule.factors.size(), 1));
  // The parent's value missing (a config changed since, by --set): drawn afresh.
  if (resample < rule.resample_probability || value.is_null()) return sample_one(spec, rng);
  if (spec.type == Type::kCategorical || !value.is_number()) return value;
  const double factor = rule.factors.empty() ? 1.0 : rule.factors[pick];
  const double x = value.get<double>() * factor;
  if (spec.type == Type::kInt) {
    const double lo = spec.minval, hi = spec.maxval;
    return static_cast<int64_t>(std::clamp(std::round(x), lo, hi));
  }
  const double lo = spec.type == Type::kLog ? std::pow(spec.base, spec.minval) : spec.minval;
  const double hi = spec.type == Type::kLog ? std::pow(spec.base, spec.maxval) : spec.maxval;
  // A range is [minval, maxval) (docs/config.md): a product at or past the top is kept just
  // below it, as a draw would be.
  return std::clamp(x, lo, std::nextafter(hi, lo));
}

}  // namespace

Json perturb_hparams(const std::map<std::string, HyperparameterSpec>& specs,
                     const SearcherConfig& config, const Json& parent, SplitMix64& rng) {
  Json out = Json::object();
  for (const auto& [name, spec] : specs)
    out[name] = perturb_one(spec, config, name, parent.value(name, Json()), rng);
  return out;
}

PbtSearcher::PbtSearcher(const ExperimentConfig& config, uint64_t seed)
    : config_(config.searcher), specs_(config.hyperparameters), seed_(seed) {}

int64_t PbtSearcher::next_length() const {
  return std::min(config_.max_length, length_ + config_.perturbation_interval);
}

std::vector<SearcherAction> PbtSearcher::create_member(Json hparams, int64_t parent) {
  const int64_t index = ++created_;
  members_.push_back({index, hparams, std::nullopt, false});
  std::vector<SearcherAction> out;
  if (parent > 0) {
    parents_[index] = {parent, length_};
    out.push_back(SearcherAction::clone(index, std::move(hparams), trial_seed(seed_, index), parent,
                                        length_));
  } else {
    out.push_back(SearcherAction::create(index, std::move(hparams), trial_seed(seed_, index)));
  }
  return out;
}

std::vector<SearcherAction> PbtSearcher::start() {
  length_ = std::min(config_.max_length, config_.perturbation_interval);
  std::vector<SearcherAction> out;
  for (int i = 0; i < config_.population_size; ++i) {
    for (SearcherAction& a : create_member(sample_hparams(specs_, seed_, created_ + 1), 0))
      out.push_back(std::move(a));
    out.push_back(SearcherAction::train(created_, length_));
  }
  return out;
}

std::vector<SearcherAction> PbtSearcher::on_validation(int64_t trial, int64_t length,
                                                       double metric) {
  auto member = std::find_if(members_.begin(), members_.end(),
                             [&](const Member& m) { return m.trial == trial; });
  if (member == members_.end() || length < length_ || member->metric || member->gone) return {};
  best_.offer(trial, length, metric, MetricOrder(config_.smaller_is_better).key(metric));
  member->metric = metric;
  return next_generation();
}

std::vector<SearcherAction> PbtSearcher::on_trial_closed(int64_t trial) {
  if (!closed_.insert(trial).second || close_sent_.count(trial)) return {};
  auto member = std::find_if(members_.begin(), members_.end(),
                             [&](const Member& m) { return m.trial == trial; });
  if (member == members_.end()) return {};
  // A member that ended by itself (errored past its restarts): ranked last this generation,
  // and so replaced by a clone of a better one.
  member->gone = true;
  return next_generation();
}

SearcherAction PbtSearcher::close(int64_t trial) {
  close_sent_.insert(trial);
  return SearcherAction::close(trial);
}

std::vector<SearcherAction> PbtSearcher::next_generation() {
  for (const Member& m : members_)
    if (!m.metric && !m.gone) return {};
  const MetricOrder order(config_.smaller_is_better);
  // Best first; a member that is gone, and ties, by trial index (stable and replayable).
  std::vector<Member> ranked = members_;
  std::stable_sort(ranked.begin(), ranked.end(), [&](const Member& a, const Member& b) {
    const double ka = a.gone ? HUGE_VAL : order.key(*a.metric);
    const double kb = b.gone ? HUGE_VAL : order.key(*b.metric);
    return ka < kb;
  });
  std::vector<SearcherAction> out;
  const bool any_left =
      std::any_of(ranked.begin(), ranked.end(), [](const Member& m) { return !m.gone; });
  if (length_ >= config_.max_length || !any_left) {
    for (const Member& m : ranked)
      if (!m.gone) out.push_back(close(m.trial));
    members_.clear();
    done_ = true;
    return out;
  }
  const size_t n = static_cast<size_t>(
      std::floor(config_.quantile_fraction * static_cast<double>(ranked.size())));
  // Parents come from the top quantile's members still alive (some are, as ranked puts the
  // ones that are gone last; with more gone than the bottom holds, the best alive ones).
  std::vector<Member> top;
  for (const Member& m : ranked)
    if (!m.gone && (top.size() < n || top.empty())) top.push_back(m);
  std::vector<Member> keep(ranked.begin(), ranked.end() - static_cast<std::ptrdiff_t>(n));
  std::vector<Member> bottom(ranked.end() - static_cast<std::ptrdiff_t>(n), ranked.end());
  members_.clear();
  ++generation_;
  const int64_t next = next_length();
  for (Member m : keep) {
    if (m.gone) continue;
    m.metric.reset();
    members_.push_back(m);
    out.push_back(SearcherAction::train(m.trial, next));
  }
  for (size_t i = 0; i < bottom.size(); ++i) {
    if (!bottom[i].gone) out.push_back(close(bottom[i].trial));
    // Which top member it clones, and the perturbation: from (seed, generation, slot).
    SplitMix64 rng(seed_ * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(generation_) * 1000003 +
                   i);
    const Member& parent = top[rng.next() % top.size()];
    for (SearcherAction& a :
         create_member(perturb_hparams(specs_, config_, parent.hparams, rng), parent.trial))
      out.push_back(std::move(a));
    out.push_back(SearcherAction::train(created_, next));
  }
  length_ = next;
  return out;
}

bool PbtSearcher::finished() const {
  if (!done_) return false;
  for (int64_t trial : close_sent_)
    if (!closed_.count(trial)) return false;
  return true;
}

Json PbtSearcher::describe() const {
  Json lineage = Json::array();
  for (const auto& [trial, from] : parents_)
    lineage.push_back({{"trial", trial}, {"parent", from.first}, {"cloned_at", from.second}});
  Json population = Json::array();
  for (const Member& m : members_) population.push_back(m.trial);
  // generation_ counts the generations that ended; the one training now (or the last one,
  // once done) is 1-based, as docs/search.md numbers them: generation g trains to g · interval.
  return Json{{"searcher", "pbt"},        {"generation", generation_ + 1}, {"length", length_},
              {"population", population}, {"trials_created", created_},    {"lineage", lineage},
              {"best", best_.describe()}};
}

}  // namespace cairn
