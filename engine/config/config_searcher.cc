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

std::string canonical_name(const MapReader& searcher) {
  const ConfigNode& node = searcher.require("name", "one of single, grid, random, hyperband, asha");
  std::string name = read_string(node, "searcher.name");
  if (name == "adaptive_asha" || name == "async_halving") return "asha";
  std::vector<std::string> names = {"single", "grid", "random", "hyperband", "asha"};
  if (std::find(names.begin(), names.end(), name) != names.end()) return name;
  std::optional<std::string> guess = closest_match(name, names);
  fail(node, "searcher.name",
       "must be one of single, grid, random, hyperband, asha, got '" + name + "'" +
           (guess ? "; did you mean '" + *guess + "'?" : ""));
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

}  // namespace

SearcherConfig read_searcher(const ConfigNode& node) {
  MapReader searcher(node, "searcher");
  searcher.reject_unknown(kSearcherKeys);
  SearcherConfig out;
  out.name = canonical_name(searcher);
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
  return out;
}

}  // namespace cairn::config
