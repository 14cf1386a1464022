// What builtin:mlp asks of the rest of the config, checked with it (SPEC §2: every mistake
// before anything runs) instead of in each trial, where a bad value used to end the
// experiment in ERROR. The hyperparameter rules are the trainer's own (trainer/mlp_hparams.h):
// it is handed the values the search can produce, so the rules live in one place.
#include <algorithm>
#include <cmath>
#include <optional>

#include "engine/config/config_reader.h"
#include "engine/config/config_sections.h"
#include "engine/config/hparam_values.h"
#include "trainer/mlp_hparams.h"

namespace cairn::config {
namespace {

using Type = HyperparameterSpec::Type;

// One hyperparameter: the values the search can give it, as far as builtin:mlp's rules can
// tell them apart.
struct Axis {
  std::string name;
  const HyperparameterSpec* spec = nullptr;
  const ConfigNode* node = nullptr;  // its value in the config
  std::vector<Json> values;          // never empty
  // For a random, hyperband or asha search of a double or log range: its value at the largest
  // exponent drawn, which is below maxval, so that a message can say where it came from.
  std::optional<Json> top;
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

bool is_continuous(const HyperparameterSpec& spec) {
  return spec.type == Type::kDouble || spec.type == Type::kLog;
}

// The rules are ranges of numbers, so the ends of a range stand for the whole of it, plus,
// for a continuous range, a fractional value inside. A grid searches exactly its points;
// the other searchers draw a continuous range's values from [minval, maxval)
// (engine/config/hparam_values.h), so its ends are the values drawn at the ends of [0, 1).
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
  double lo = range_value(spec, 0), hi = range_value(spec, kLargestUniform);
  if (lo > hi) std::swap(lo, hi);  // a log range with base < 1
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
  if (spec.type != Type::kInt && !is_continuous(spec)) return {node.where, ""};
  if (axis.top && *axis.top == value) {
    const ConfigNode* at = node.find("maxval");
    return {at != nullptr ? at->where : node.where,
            spec.type == Type::kLog ? " (base^x for the largest x below its maxval that the "
                                      "search draws)"
                                    : " (the largest value below its maxval that the search "
                                      "draws)"};
  }
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

bool is_interdependent(const std::string& name) {
  return std::find(kMlpInterdependentKeys.begin(), kMlpInterdependentKeys.end(), name) !=
         kMlpInterdependentKeys.end();
}

// builtin:mlp judges most keys on their own value alone, so each of their values is checked
// with every other key at its first value; the few it judges together (kMlpInterdependentKeys:
// dataset, features, samples) are checked in every combination of their values. That covers
// every combination the search can produce without taking the product over all keys. It
// stays small: a range has at most three values here, so the combined keys give the number
// of datasets searched times nine, and a grid's points the grid already keeps to 100,000.
void check_hyperparameters(const ConfigNode& root, const ExperimentConfig& config) {
  const ConfigNode* node = root.find("hyperparameters");
  if (node == nullptr || !node->is_map()) return;  // none: builtin:mlp's defaults are valid
  const bool grid = config.searcher.name == "grid";
  std::vector<Axis> axes;
  for (const auto& [name, spec] : config.hyperparameters) {
    const ConfigNode* value = node->find(name);
    if (value == nullptr) continue;  // cannot be: the specs were read from this node
    Axis axis{name, &spec, value, values_of(spec, *value, grid), std::nullopt};
    if (!grid && is_continuous(spec) && spec.minval < spec.maxval) {
      // The end nearest maxval: the larger value, or for a log range with base < 1 the smaller.
      axis.top = Json(range_value(spec, kLargestUniform));
    }
    axes.push_back(std::move(axis));
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
  // Then every combination of the keys judged together, the others at their first value.
  std::vector<const Axis*> tied;
  for (const Axis& axis : axes)
    if (is_interdependent(axis.name)) tied.push_back(&axis);
  std::vector<size_t> digit(tied.size(), 0);
  for (bool more = true; more;) {
    Json point = base;
    for (size_t i = 0; i < tied.size(); ++i) point[tied[i]->name] = tied[i]->values[digit[i]];
    check_point(point, axes, *node);
    more = false;
    for (size_t i = 0; i < tied.size() && !more; ++i) {
      if (++digit[i] < tied[i]->values.size())
        more = true;
      else
        digit[i] = 0;
    }
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
