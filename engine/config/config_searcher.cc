// `searcher`: which search runs, what it optimizes and how long trials train. Every key is
// accepted for every searcher (a searcher ignores the ones it does not use), so that
// `--set searcher.name=random` works on an asha config.
#include <algorithm>
#include <cmath>

#include "engine/config/config_reader.h"
#include "engine/config/config_sections.h"

namespace cairn::config {
namespace {

constexpr std::array<std::string_view, 3> kLengthUnits = {"epochs", "batches", "records"};

struct Length {
  int64_t value = 0;
  std::string unit;  // "" for a plain number
};

// The searcher's canonical name; `tpe_shorthand` says whether it was written `tpe` (random
// search with the TPE sampler).
std::string canonical_name(const MapReader& searcher, bool& tpe_shorthand) {
  const ConfigNode& node =
      searcher.require("name", "one of single, grid, random, hyperband, asha, pbt, tpe");
  std::string name = read_string(node, "searcher.name");
  tpe_shorthand = name == "tpe";
  if (tpe_shorthand) return "random";
  if (name == "adaptive_asha" || name == "async_halving") return "asha";
  std::vector<std::string> names = {"single", "grid", "random", "hyperband", "asha", "pbt", "tpe"};
  if (std::find(names.begin(), names.end(), name) != names.end()) return name;
  std::optional<std::string> guess = closest_match(name, names);
  fail(node, "searcher.name",
       "must be one of single, grid, random, hyperband, asha, pbt, tpe, got '" + name + "'" +
           (guess ? "; did you mean '" + *guess + "'?" : ""));
}

TpeConfig read_tpe(const ConfigNode& node) {
  MapReader tpe(node, "searcher.tpe");
  tpe.reject_unknown(kTpeKeys);
  TpeConfig out;
  out.n_startup_trials = tpe.int_or("n_startup_trials", out.n_startup_trials, 0);
  out.n_ei_candidates = tpe.int_or("n_ei_candidates", out.n_ei_candidates, 1, 10000);
  if (std::optional<double> gamma = tpe.get_number("gamma")) {
    if (!(*gamma > 0 && *gamma <= 1)) {
      fail(*tpe.get("gamma"), "searcher.tpe.gamma",
           "must be greater than 0 and at most 1, got " + tpe.get("gamma")->text);
    }
    out.gamma = *gamma;
  }
  out.max_good = tpe.int_or("max_good", out.max_good, 1);
  if (std::optional<double> weight = tpe.get_number("prior_weight")) {
    if (!(*weight > 0)) {
      fail(*tpe.get("prior_weight"), "searcher.tpe.prior_weight",
           "must be greater than 0, got " + tpe.get("prior_weight")->text);
    }
    out.prior_weight = *weight;
  }
  out.consider_endpoints = tpe.get_bool("consider_endpoints").value_or(out.consider_endpoints);
  out.consider_magic_clip = tpe.get_bool("consider_magic_clip").value_or(out.consider_magic_clip);
  return out;
}

void read_sampler(const MapReader& searcher, bool tpe_shorthand, SearcherConfig& out) {
  std::optional<std::string> sampler = searcher.get_choice("sampler", {"random", "tpe"});
  if (tpe_shorthand && sampler && *sampler != "tpe") {
    fail(*searcher.get("sampler"), "searcher.sampler",
         "is " + *sampler +
             ", but searcher.name tpe means random search with the tpe sampler; write name: "
             "random for random sampling");
  }
  out.sampler = tpe_shorthand ? "tpe" : sampler.value_or("random");
  if (out.sampler == "tpe" && (out.name == "grid" || out.name == "single" || out.name == "pbt")) {
    fail(*searcher.get("sampler"), "searcher.sampler",
         "tpe draws hyperparameters for random, hyperband and asha; the " + out.name +
             (out.name == "pbt" ? " searcher perturbs its population's instead"
                                : " searcher draws none"));
  }
  if (const ConfigNode* tpe = searcher.get("tpe")) out.tpe = read_tpe(*tpe);
}

int64_t read_positive(const ConfigNode& node, const std::string& key) {
  int64_t value = read_int(node, key);
  if (value < 1) fail(node, key, "must be at least 1, got " + std::to_string(value));
  return value;
}

// A length is a plain positive number, or {epochs|batches|records: N}.
Length read_length(const ConfigNode& node, const std::string& key) {
  if (!node.is_map()) return {read_positive(node, key), ""};
  MapReader units(node, key);
  units.reject_unknown(kLengthUnits);
  if (node.entries.size() != 1) {
    fail(node, key, "give one unit, such as {epochs: 81}, or a plain number");
  }
  const MapEntry& entry = node.entries.front();
  return {read_positive(entry.value, join_key(key, entry.key)), entry.key};
}

void read_lengths(const MapReader& searcher, SearcherConfig& out) {
  if (const ConfigNode* metric = searcher.get("time_metric")) {
    out.time_metric = read_string(*metric, "searcher.time_metric");
    if (out.time_metric.empty()) fail(*metric, "searcher.time_metric", "is empty");
    if (const ConfigNode* length = searcher.get("max_length"))
      fail(*length, "searcher.max_length",
           "with time_metric, lengths are in its unit: give max_time instead");
    out.max_length =
        read_positive(searcher.require("max_time", "the time_metric value a trial trains to"),
                      "searcher.max_time");
    if (const ConfigNode* min_node = searcher.get("min_length")) {
      out.min_length = read_positive(*min_node, "searcher.min_length");
      if (out.min_length > out.max_length)
        fail(*min_node, "searcher.min_length",
             std::to_string(out.min_length) + " is greater than max_time " +
                 std::to_string(out.max_length));
    }
    return;
  }
  if (const ConfigNode* max_time = searcher.get("max_time"))
    fail(*max_time, "searcher.max_time", "needs time_metric: the metric it is measured in");
  if (out.name == "single" && searcher.get("max_length") == nullptr &&
      searcher.get("min_length") == nullptr) {
    out.own_length = true;
    out.max_length = SearcherConfig::kOwnLength;
    return;
  }
  Length max = read_length(searcher.require("max_length", "how long a trial trains, such as 81"),
                           "searcher.max_length");
  out.max_length = max.value;
  out.length_unit = max.unit;
  const ConfigNode* min_node = searcher.get("min_length");
  if (min_node == nullptr) return;
  Length min = read_length(*min_node, "searcher.min_length");
  if (!min.unit.empty() && min.unit != max.unit) {
    fail(*min_node, "searcher.min_length",
         "is in " + min.unit + " but max_length is in " +
             (max.unit.empty() ? "the trial's own unit" : max.unit) + "; use the same unit");
  }
  if (min.value > max.value) {
    fail(*min_node, "searcher.min_length",
         std::to_string(min.value) + " is greater than max_length " + std::to_string(max.value));
  }
  out.min_length = min.value;
}

void read_trial_counts(const MapReader& searcher, SearcherConfig& out) {
  if (out.name == "random" || out.name == "asha") {
    searcher.require("max_trials", "the number of trials the " + out.name + " searcher samples");
  }
  out.max_trials = searcher.int_or("max_trials", 0, 1);
  if (out.name == "single") out.max_trials = 1;
  out.max_concurrent_trials = searcher.int_or("max_concurrent_trials", 0, 0);
}

SearcherConfig::Perturbation read_perturbation(const ConfigNode& node, const std::string& key) {
  MapReader rule(node, key);
  static constexpr std::array<std::string_view, 2> kKeys = {"factors", "resample_probability"};
  rule.reject_unknown(kKeys);
  SearcherConfig::Perturbation out;
  if (const ConfigNode* factors = rule.get("factors")) {
    const std::string fkey = join_key(key, "factors");
    if (factors->kind != ConfigNode::Kind::kList || factors->items.empty())
      fail(*factors, fkey, "must be a list of positive numbers, such as [0.8, 1.2]");
    out.factors.clear();
    for (const ConfigNode& f : factors->items) {
      const double v = read_number(f, fkey);
      if (v <= 0) fail(f, fkey, "must be positive, got " + f.text);
      out.factors.push_back(v);
    }
  }
  if (std::optional<double> p = rule.get_number("resample_probability")) {
    if (*p < 0 || *p > 1)
      fail(*rule.get("resample_probability"), join_key(key, "resample_probability"),
           "must be between 0 and 1, got " + rule.get("resample_probability")->text);
    out.resample_probability = *p;
  }
  return out;
}

// pbt's keys: required for it, ignored by the other searchers (like every searcher key).
void read_pbt(const MapReader& searcher, SearcherConfig& out) {
  if (out.name != "pbt") return;
  out.population_size = static_cast<int>(
      read_positive(searcher.require("population_size", "such as 8"), "searcher.population_size"));
  const ConfigNode& size = *searcher.get("population_size");
  if (out.population_size < 2)
    fail(size, "searcher.population_size", "must be at least 2: PBT needs members to compare");
  const ConfigNode& interval =
      searcher.require("perturbation_interval", "the units a generation trains, such as 4");
  out.perturbation_interval = read_positive(interval, "searcher.perturbation_interval");
  if (out.perturbation_interval > out.max_length)
    fail(interval, "searcher.perturbation_interval",
         std::to_string(out.perturbation_interval) + " is greater than max_length " +
             std::to_string(out.max_length));
  if (std::optional<double> q = searcher.get_number("quantile_fraction")) {
    const ConfigNode& at = *searcher.get("quantile_fraction");
    if (*q <= 0 || *q > 0.5)
      fail(
          at, "searcher.quantile_fraction",
          "must be in (0, 0.5] (the bottom and the top quantiles may not overlap), got " + at.text);
    out.quantile_fraction = *q;
  }
  if (std::floor(out.quantile_fraction * out.population_size) < 1)
    fail(searcher.get("quantile_fraction") ? *searcher.get("quantile_fraction") : size,
         "searcher.quantile_fraction",
         "times population_size (" + std::to_string(out.population_size) +
             ") leaves no trial to replace: raise one of them (at least 1 / population_size)");
  if (const ConfigNode* rules = searcher.get("perturbations")) {
    MapReader map(*rules, "searcher.perturbations");
    for (const MapEntry& entry : rules->entries)
      out.perturbations[entry.key] =
          read_perturbation(entry.value, join_key("searcher.perturbations", entry.key));
  }
}

// Determined's keys of the searcher (docs/determined.md). async_halving is one bracket of
// num_rungs rungs: asha with mode aggressive and max_rungs num_rungs.
void read_determined_searcher(const MapReader& searcher, SearcherConfig& out) {
  const ConfigNode* source_trial = searcher.get("source_trial_id");
  const ConfigNode* source_checkpoint = searcher.get("source_checkpoint_uuid");
  if (source_trial && source_checkpoint)
    fail(*source_checkpoint, "searcher.source_checkpoint_uuid",
         "give one warm start: source_trial_id or source_checkpoint_uuid, not both");
  if (source_trial) {
    SearcherConfig::WarmStart warm;
    warm.key = "searcher.source_trial_id";
    warm.where = source_trial->where;
    warm.trial_number = checked_int(read_int(*source_trial, warm.key), *source_trial, warm.key, 1);
    out.warm_start = std::move(warm);
  } else if (source_checkpoint) {
    SearcherConfig::WarmStart warm;
    warm.key = "searcher.source_checkpoint_uuid";
    warm.where = source_checkpoint->where;
    warm.checkpoint = read_string(*source_checkpoint, warm.key);
    if (warm.checkpoint.empty())
      fail(*source_checkpoint, warm.key, "expected a checkpoint's storage id or cairn id");
    out.warm_start = std::move(warm);
  }
  const std::string written = read_string(*searcher.get("name"), "searcher.name");
  // Other searchers ignore num_rungs, as every searcher ignores the keys it does not use.
  if (written == "async_halving") {
    // Determined requires num_rungs; without it, max_rungs (5 unless written) is the count.
    if (const ConfigNode* rungs = searcher.get("num_rungs")) {
      if (const ConfigNode* max_rungs = searcher.get("max_rungs"))
        fail(*max_rungs, "searcher.max_rungs",
             "async_halving's rungs are num_rungs; drop max_rungs");
      out.max_rungs =
          checked_int(read_int(*rungs, "searcher.num_rungs"), *rungs, "searcher.num_rungs", 1);
    }
    if (const ConfigNode* mode = searcher.get("mode"); mode != nullptr && out.mode != "aggressive")
      fail(*mode, "searcher.mode",
           "async_halving is one bracket (mode aggressive); use adaptive_asha for " + out.mode);
    out.mode = "aggressive";
  }
  if (const ConfigNode* brackets = searcher.get("bracket_rungs")) {
    if (brackets->kind != ConfigNode::Kind::kList || brackets->items.empty())
      fail(*brackets, "searcher.bracket_rungs",
           "must be a list of rung counts, one per bracket, such as [4, 3]");
    for (const ConfigNode& item : brackets->items)
      out.bracket_rungs.push_back(checked_int(read_int(item, "searcher.bracket_rungs"), item,
                                              "searcher.bracket_rungs", 1, out.max_rungs));
  }
  out.stop_once = searcher.get_bool("stop_once").value_or(false);
}

}  // namespace

void check_perturbations(const ConfigNode& searcher_node,
                         const std::map<std::string, HyperparameterSpec>& specs) {
  const ConfigNode* rules = searcher_node.find("perturbations");
  if (rules == nullptr || !rules->is_map()) return;
  for (const MapEntry& entry : rules->entries) {
    const std::string key = join_key("searcher.perturbations", entry.key);
    // "group.member" names a member of a nested group.
    const HyperparameterSpec* spec = nullptr;
    const std::map<std::string, HyperparameterSpec>* level = &specs;
    size_t start = 0;
    for (;;) {
      const size_t dot = entry.key.find('.', start);
      auto it = level->find(entry.key.substr(start, dot - start));
      if (it == level->end()) break;
      if (dot == std::string::npos) {
        spec = &it->second;
        break;
      }
      level = &it->second.children;
      start = dot + 1;
    }
    if (spec == nullptr) fail(entry.key_where, key, "names no hyperparameter");
    if (spec->type == HyperparameterSpec::Type::kConst)
      fail(entry.key_where, key, "is a constant: a perturbation cannot change it");
    if (spec->type == HyperparameterSpec::Type::kNested)
      fail(entry.key_where, key,
           "is a group: name its members, such as " + entry.key + "." +
               (spec->children.empty() ? "x" : spec->children.begin()->first));
    // A categorical value is kept or resampled, never multiplied: a factors rule for one
    // would be ignored, so it is refused rather than silently not do what it asks.
    if (spec->type == HyperparameterSpec::Type::kCategorical) {
      if (const ConfigNode* factors = entry.value.find("factors"))
        fail(*factors, key + ".factors",
             "is categorical: factors multiply numbers; use resample_probability");
    }
  }
}

SearcherConfig read_searcher(const ConfigNode& node) {
  MapReader searcher(node, "searcher");
  searcher.reject_unknown(kSearcherKeys);
  SearcherConfig out;
  bool tpe_shorthand = false;
  out.name = canonical_name(searcher, tpe_shorthand);
  out.metric =
      read_string(searcher.require("metric", "the validation metric to optimize, such as val_loss"),
                  "searcher.metric");
  if (out.metric.empty()) fail(*searcher.get("metric"), "searcher.metric", "is empty");
  out.smaller_is_better = searcher.get_bool("smaller_is_better").value_or(true);
  read_lengths(searcher, out);
  read_trial_counts(searcher, out);
  if (std::optional<double> divisor = searcher.get_number("divisor")) {
    if (*divisor <= 1) {
      fail(*searcher.get("divisor"), "searcher.divisor",
           "must be greater than 1, got " + searcher.get("divisor")->text);
    }
    out.divisor = *divisor;
  }
  out.max_rungs = searcher.int_or("max_rungs", 5, 1);
  out.mode =
      searcher.get_choice("mode", {"aggressive", "standard", "conservative"}).value_or("standard");
  read_determined_searcher(searcher, out);
  read_pbt(searcher, out);
  read_sampler(searcher, tpe_shorthand, out);
  return out;
}

}  // namespace cairn::config
