// `searcher`: which search runs, what it optimizes and how long trials train. Every key is
// accepted for every searcher (a searcher ignores the ones it does not use), so that
// `--set searcher.name=random` works on an asha config.
#include <algorithm>

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
      searcher.require("name", "one of single, grid, random, hyperband, asha, tpe");
  std::string name = read_string(node, "searcher.name");
  tpe_shorthand = name == "tpe";
  if (tpe_shorthand) return "random";
  if (name == "adaptive_asha" || name == "async_halving") return "asha";
  std::vector<std::string> names = {"single", "grid", "random", "hyperband", "asha", "tpe"};
  if (std::find(names.begin(), names.end(), name) != names.end()) return name;
  std::optional<std::string> guess = closest_match(name, names);
  fail(node, "searcher.name",
       "must be one of single, grid, random, hyperband, asha, tpe, got '" + name + "'" +
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
  if (out.sampler == "tpe" && (out.name == "grid" || out.name == "single")) {
    fail(*searcher.get("sampler"), "searcher.sampler",
         "tpe draws hyperparameters, which the " + out.name +
             " searcher does not; use it with random, hyperband or asha");
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

}  // namespace

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
  read_sampler(searcher, tpe_shorthand, out);
  return out;
}

}  // namespace cairn::config
