// What builtin:mlp asks of the rest of the config, checked with it (SPEC §2: every mistake
// before anything runs) instead of in each trial, where a bad value used to end the
// experiment in ERROR. The hyperparameter rules are the trainer's own (gpu/mlp_hparams.h):
// it is handed the values the search can produce, so the rules live in one place.
#include <algorithm>
#include <cmath>
#include <optional>

#include "engine/config_reader.h"
#include "engine/config_sections.h"
#include "engine/grid_points.h"
#include "gpu/mlp_hparams.h"

namespace cairn::config {
namespace {

using Type = HyperparameterSpec::Type;

// Every combination of the hyperparameters' values is checked up to this many; beyond it,
// each value only with the first value of every other hyperparameter. builtin:mlp's rules
// that tie keys together (features and samples with the dataset) are few, and a config
// that searches over more than a handful of its keys at once is rare.
constexpr size_t kMaxCombinations = 4096;

// One hyperparameter: the values the search can give it, as far as builtin:mlp's rules can
// tell them apart.
struct Axis {
  std::string name;
  const HyperparameterSpec* spec = nullptr;
  const ConfigNode* node = nullptr;  // its value in the config
  std::vector<Json> values;          // never empty
};

// A number strictly between lo and hi (lo < hi) that is not an integer: a continuous range
// yields such values, and an integer hyperparameter refuses them.
std::optional<double> non_integer_between(double lo, double hi) {
  double v = lo + (hi - lo) / 2;
  for (int i = 0; i < 64 && v == std::floor(v); ++i) v = lo + (v - lo) / 2;
  if (v <= lo || v >= hi || v == std::floor(v)) return std::nullopt;
  return v;
}

double log_value(const HyperparameterSpec& spec, double exponent) {
  return std::pow(spec.base, exponent);
}

// The rules are ranges of numbers, so the ends of a range stand for the whole of it, plus,
// for a continuous range, a fractional value inside. A grid searches exactly its points.
std::vector<Json> values_of(const HyperparameterSpec& spec, const ConfigNode& node, bool grid) {
  switch (spec.type) {
    case Type::kConst:
      return {spec.value};
    case Type::kCategorical:
      return spec.vals;
    case Type::kNested:  // the trial gets a map, which no key of builtin:mlp takes
      return {to_json(node)};
    case Type::kInt:
    case Type::kDouble:
    case Type::kLog:
      break;
  }
  if (grid) {
    if (Result<std::vector<Json>> points = grid_values(spec); points.ok()) return *points;
  }
  if (spec.type == Type::kInt)
    return {Json(static_cast<int64_t>(spec.minval)), Json(static_cast<int64_t>(spec.maxval))};
  double lo = spec.minval, hi = spec.maxval;
  if (spec.type == Type::kLog) {
    lo = log_value(spec, spec.minval);
    hi = log_value(spec, spec.maxval);
    if (lo > hi) std::swap(lo, hi);  // base < 1
  }
  std::vector<Json> values = {Json(lo), Json(hi)};
  if (std::optional<double> inside = non_integer_between(lo, hi)) values.emplace_back(*inside);
  return values;
}

bool same_number(const Json& value, double number) {
  return value.is_number() && value.get<double>() == number;
}

// Where `value` of the axis was written: the item of `vals`, or the end of the range it is,
// or else the hyperparameter itself. With what to add to the trainer's message.
std::pair<std::string, std::string> place_of(const Axis& axis, const Json& value) {
  const HyperparameterSpec& spec = *axis.spec;
  const ConfigNode& node = *axis.node;
  if (spec.type == Type::kCategorical) {
    if (const ConfigNode* vals = node.find("vals")) {
      for (const ConfigNode& item : vals->items)
        if (to_json(item) == value) return {item.where, " (one of its vals)"};
    }
    return {node.where, " (one of its vals)"};
  }
  if (spec.type != Type::kInt && spec.type != Type::kDouble && spec.type != Type::kLog)
    return {node.where, ""};
  for (const char* end : {"minval", "maxval"}) {
    const double bound = std::string_view(end) == "minval" ? spec.minval : spec.maxval;
    const double number = spec.type == Type::kLog ? log_value(spec, bound) : bound;
    if (!same_number(value, number)) continue;
    const ConfigNode* at = node.find(end);
    return {at != nullptr ? at->where : node.where,
            std::string(" (its ") + (spec.type == Type::kLog ? "base^" : "") + end + ")"};
  }
  const std::string type = spec.type == Type::kInt   ? "int"
                           : spec.type == Type::kLog ? "log"
                                                     : "double";
  return {node.where, " (a value its " + type + " range can produce)"};
}

// Fails naming the hyperparameter to blame when builtin:mlp refuses `point`.
void check_point(const Json& point, const std::vector<Axis>& axes, const ConfigNode& at) {
  std::string key;
  Result<MlpHparams> parsed = MlpHparams::from_json(point, &key);
  if (parsed.ok()) return;
  const std::string what = "builtin:mlp: " + parsed.status().message();
  auto axis = std::find_if(axes.begin(), axes.end(), [&](const Axis& a) { return a.name == key; });
  // A key the config leaves at its default (samples, for the samples × features limit).
  if (axis == axes.end()) fail(at, "hyperparameters", what);
  auto [where, why] = place_of(*axis, point[key]);
  fail(where, join_key("hyperparameters", key), what + why);
}

void check_hyperparameters(const ConfigNode& root, const ExperimentConfig& config) {
  const ConfigNode* node = root.find("hyperparameters");
  if (node == nullptr || !node->is_map()) return;  // none: builtin:mlp's defaults are valid
  const bool grid = config.searcher.name == "grid";
  std::vector<Axis> axes;
  for (const auto& [name, spec] : config.hyperparameters) {
    const ConfigNode* value = node->find(name);
    if (value == nullptr) continue;  // cannot be: the specs were read from this node
    axes.push_back({name, &spec, value, values_of(spec, *value, grid)});
  }
  Json base = Json::object();
  for (const Axis& axis : axes) base[axis.name] = axis.values.front();
  // Each value on its own first, so that a bad one is named with the others at their first.
  for (const Axis& axis : axes) {
    for (const Json& value : axis.values) {
      Json point = base;
      point[axis.name] = value;
      check_point(point, axes, *node);
    }
  }
  // Then the combinations, for the rules that tie keys together.
  size_t combinations = 1;
  for (const Axis& axis : axes) {
    combinations *= axis.values.size();
    if (combinations > kMaxCombinations) return;
  }
  std::vector<size_t> digit(axes.size(), 0);
  for (size_t n = 0; n < combinations; ++n) {
    Json point = Json::object();
    for (size_t i = 0; i < axes.size(); ++i) point[axes[i].name] = axes[i].values[digit[i]];
    check_point(point, axes, *node);
    for (size_t i = 0; i < axes.size() && ++digit[i] == axes[i].values.size(); ++i) digit[i] = 0;
  }
}

// builtin:mlp counts in epochs only (SPEC §6): a length in batches or records would be
// taken as that many epochs.
void check_length_unit(const ConfigNode& root, const ExperimentConfig& config) {
  const std::string& unit = config.searcher.length_unit;
  if (unit.empty() || unit == "epochs") return;
  const ConfigNode* searcher = root.find("searcher");
  const ConfigNode* length = searcher != nullptr ? searcher->find("max_length") : nullptr;
  if (length == nullptr || length->entries.empty()) return;  // cannot be: the unit came from it
  fail(length->entries.front().key_where, "searcher.max_length." + unit,
       "builtin:mlp trains in epochs, not " + unit +
           "; write the number of epochs, such as max_length: 27 or {epochs: 27}");
}

}  // namespace

void check_builtin_mlp(const ConfigNode& root, const ExperimentConfig& config) {
  if (!is_builtin_entrypoint(config)) return;
  check_length_unit(root, config);
  check_hyperparameters(root, config);
}

}  // namespace cairn::config
