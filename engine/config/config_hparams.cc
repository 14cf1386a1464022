// `hyperparameters`: constants, distributions ({type: int|double|log|categorical|const})
// and nested maps of them, plus the grid searcher's rules over them.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include "engine/config/config_reader.h"
#include "engine/config/config_sections.h"

namespace cairn::config {
namespace {

using Type = HyperparameterSpec::Type;

constexpr int64_t kMaxExactInteger = int64_t{1} << 53;  // minval/maxval are kept as doubles
constexpr double kMaxIntGridValues = 10'000;
constexpr double kMaxGridPoints = 100'000;

// Names users bring from other tools, mapped to ours for a hint.
constexpr std::pair<std::string_view, std::string_view> kTypeHints[] = {
    {"float", "double"},   {"uniform", "double"},     {"integer", "int"},
    {"loguniform", "log"}, {"choice", "categorical"}, {"constant", "const"}};

Type read_type(const ConfigNode& node, const std::string& key) {
  std::string name = read_string(node, key);
  if (name == "const") return Type::kConst;
  if (name == "int") return Type::kInt;
  if (name == "double") return Type::kDouble;
  if (name == "log") return Type::kLog;
  if (name == "categorical") return Type::kCategorical;
  std::optional<std::string> guess =
      closest_match(name, {"const", "int", "double", "log", "categorical"});
  for (auto [theirs, ours] : kTypeHints) {
    if (name == theirs) guess = std::string(ours);
  }
  fail(node, key,
       "must be one of const, int, double, log, categorical, got '" + name + "'" +
           (guess ? "; did you mean '" + *guess + "'?" : ""));
}

std::vector<std::string> keys_of(Type type) {
  switch (type) {
    case Type::kConst:
      return {"type", "val"};
    case Type::kLog:
      return {"type", "minval", "maxval", "base", "count"};
    case Type::kCategorical:
      return {"type", "vals"};
    default:
      return {"type", "minval", "maxval", "count"};
  }
}

// For a key that belongs to other types of spec, which ones, for the message.
std::optional<std::string_view> types_using(std::string_view key) {
  if (key == "val") return "const";
  if (key == "vals") return "categorical";
  if (key == "base") return "log";
  if (key == "minval" || key == "maxval" || key == "count") return "int, double and log";
  return std::nullopt;
}

void reject_foreign_keys(const MapReader& spec, Type type, std::string_view type_name) {
  std::vector<std::string> known = keys_of(type);
  for (const MapEntry& entry : spec.node().entries) {
    if (std::find(known.begin(), known.end(), entry.key) != known.end()) continue;
    std::string key = spec.key_path(entry.key);
    if (auto owners = types_using(entry.key)) {
      fail(entry.key_where, key,
           "only applies to " + std::string(*owners) + " hyperparameters, and this one is " +
               std::string(type_name));
    }
    std::optional<std::string> guess = closest_match(entry.key, known);
    fail(entry.key_where, key,
         std::string("unknown key in a hyperparameter") +
             (guess ? "; did you mean '" + *guess + "'?" : ""));
  }
}

double read_bound(const MapReader& spec, std::string_view key, Type type) {
  const ConfigNode& node = spec.require(key);
  if (type != Type::kInt) return read_number(node, spec.key_path(key));
  int64_t value = read_int(node, spec.key_path(key));
  if (value > kMaxExactInteger || value < -kMaxExactInteger) {
    fail(node, spec.key_path(key), "is too large for an int range (at most 2^53 in size)");
  }
  return static_cast<double>(value);
}

void read_range(const MapReader& spec, HyperparameterSpec& out) {
  out.minval = read_bound(spec, "minval", out.type);
  out.maxval = read_bound(spec, "maxval", out.type);
  if (out.minval > out.maxval) {
    const ConfigNode& minval = *spec.get("minval");
    fail(minval, spec.key_path("minval"),
         minval.text + " is greater than maxval " + spec.get("maxval")->text);
  }
  if (out.type == Type::kLog) {
    out.base = spec.get_number("base").value_or(10);
    if (out.base <= 0 || out.base == 1) {
      fail(*spec.get("base"), spec.key_path("base"),
           "must be greater than 0 and not 1, got " + spec.get("base")->text);
    }
    // minval and maxval are exponents: a value the trial would get as null (infinity) or 0
    // is refused here rather than in every trial.
    for (std::string_view key : {"minval", "maxval"}) {
      const double value = std::pow(out.base, key == "minval" ? out.minval : out.maxval);
      if (!std::isfinite(value) || value == 0)
        fail(*spec.get(key), spec.key_path(key),
             "base^" + spec.get(key)->text + " is " + (value == 0 ? "0" : "infinite") +
                 " as a double; log ranges take exponents, such as -4 for 1e-4");
    }
  } else if (out.type == Type::kDouble && !std::isfinite(out.maxval - out.minval)) {
    fail(*spec.get("maxval"), spec.key_path("maxval"),
         "the range from minval to maxval is too wide for a double");
  }
  if (std::optional<int64_t> count = spec.get_int("count")) {
    out.count = checked_int(*count, *spec.get("count"), spec.key_path("count"), 1);
  }
}

void read_vals(const MapReader& spec, HyperparameterSpec& out) {
  const ConfigNode& vals = spec.require("vals", "give the choices as a list, such as [sgd, adam]");
  if (vals.kind != ConfigNode::Kind::kList) {
    fail(vals, spec.key_path("vals"), "expected a list of choices, got " + describe(vals));
  }
  if (vals.items.empty()) fail(vals, spec.key_path("vals"), "is an empty list; give the choices");
  for (const ConfigNode& item : vals.items) out.vals.push_back(to_json(item));
}

HyperparameterSpec read_distribution(const MapReader& spec) {
  HyperparameterSpec out;
  out.line = spec.node().line;
  const ConfigNode& type_node = spec.require("type");
  out.type = read_type(type_node, spec.key_path("type"));
  reject_foreign_keys(spec, out.type, type_node.text);
  switch (out.type) {
    case Type::kConst:
      // `val: null` is a constant null, unlike a missing `val`.
      if (spec.node().find("val") == nullptr) spec.require("val");
      out.value = to_json(*spec.node().find("val"));
      break;
    case Type::kCategorical:
      read_vals(spec, out);
      break;
    default:
      read_range(spec, out);
      break;
  }
  return out;
}

HyperparameterSpec read_spec(const ConfigNode& node, const std::string& path);

std::map<std::string, HyperparameterSpec> read_children(const ConfigNode& map,
                                                        const std::string& path) {
  std::map<std::string, HyperparameterSpec> children;
  for (const MapEntry& entry : map.entries) {
    children[entry.key] = read_spec(entry.value, join_key(path, entry.key));
  }
  return children;
}

HyperparameterSpec read_spec(const ConfigNode& node, const std::string& path) {
  if (node.kind == ConfigNode::Kind::kNull) {
    fail(node, path, "is empty; give a value, or a spec such as {type: int, minval: 1, maxval: 4}");
  }
  if (node.is_map() && node.find("type") != nullptr)
    return read_distribution(MapReader(node, path));
  // {minval: 1, maxval: 3} without a type would be a nested group of two constants: almost
  // certainly a forgotten `type:`, which would only show when trials get a map for a number.
  if (node.is_map())
    for (const char* key : {"minval", "maxval", "vals"})
      if (node.find(key) != nullptr)
        fail(node, path,
             std::string("has ") + key +
                 " but no type: add `type: int`, `double`, `log` or `categorical` (a nested "
                 "group of constants must not use the keys minval, maxval or vals)");
  HyperparameterSpec out;
  out.line = node.line;
  if (node.is_map()) {
    out.type = Type::kNested;
    out.children = read_children(node, path);
  } else {
    out.value = to_json(node);
  }
  return out;
}

double grid_points(const HyperparameterSpec& spec, const ConfigNode& node,
                   const std::string& path) {
  switch (spec.type) {
    case Type::kConst:
      return 1;
    case Type::kCategorical:
      return static_cast<double>(spec.vals.size());
    case Type::kInt: {
      double values = spec.maxval - spec.minval + 1;
      if (spec.count) return std::min<double>(*spec.count, values);
      if (values > kMaxIntGridValues) {
        fail(node, join_key(path, "count"),
             "is required by the grid searcher when an int range holds more than 10000 values "
             "(this one holds " +
                 std::to_string(static_cast<int64_t>(values)) + ")");
      }
      return values;
    }
    case Type::kDouble:
    case Type::kLog:
      if (!spec.count) {
        fail(node, join_key(path, "count"),
             std::string("is required by the grid searcher for ") +
                 (spec.type == Type::kLog ? "log" : "double") + " hyperparameters");
      }
      return *spec.count;
    case Type::kNested:
      break;
  }
  double points = 1;
  for (const auto& [name, child] : spec.children) {
    points *= grid_points(child, *node.find(name), join_key(path, name));
  }
  return points;
}

}  // namespace

std::map<std::string, HyperparameterSpec> read_hyperparameters(const ConfigNode& node) {
  MapReader must_be_a_map(node, "hyperparameters");
  return read_children(node, "hyperparameters");
}

void check_grid(const ConfigNode* node, const std::map<std::string, HyperparameterSpec>& specs) {
  if (node == nullptr) return;
  double points = 1;
  for (const auto& [name, spec] : specs) {
    points *= grid_points(spec, *node->find(name), join_key("hyperparameters", name));
  }
  if (points > kMaxGridPoints) {
    char shown[64];
    std::snprintf(shown, sizeof shown, "%.0f", points);
    fail(*node, "hyperparameters",
         std::string("the grid has ") + shown +
             " points, more than the limit of 100000; lower some counts or use the random "
             "searcher");
  }
}

}  // namespace cairn::config
