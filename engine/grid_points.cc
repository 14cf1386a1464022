#include "engine/grid_points.h"

#include <cmath>

namespace cairn {
namespace {

constexpr int64_t kMaxGridPoints = 100'000;
constexpr int64_t kMaxIntValues = 10'000;

// Evenly spaced values of [lo, hi], both ends included; one value is the midpoint.
std::vector<double> spaced(double lo, double hi, int64_t count) {
  if (count == 1) return {(lo + hi) / 2};
  std::vector<double> out;
  for (int64_t i = 0; i < count; ++i)
    out.push_back(i == count - 1 ? hi : lo + (hi - lo) * static_cast<double>(i) / (count - 1));
  return out;
}

std::vector<Json> int_values(const HyperparameterSpec& spec) {
  const auto lo = static_cast<int64_t>(spec.minval);
  const auto hi = static_cast<int64_t>(spec.maxval);
  std::vector<Json> out;
  if (!spec.count) {
    for (int64_t v = lo; v <= hi; ++v) out.emplace_back(v);
    return out;
  }
  // count <= range size makes the spacing at least 1, so rounding never repeats a value.
  const int64_t count = std::min<int64_t>(*spec.count, hi - lo + 1);
  for (double v : spaced(static_cast<double>(lo), static_cast<double>(hi), count))
    out.emplace_back(static_cast<int64_t>(std::llround(v)));
  return out;
}

Status add_axes(const std::string& key, std::vector<std::string> path,
                const HyperparameterSpec& spec, std::vector<std::vector<std::string>>& paths,
                std::vector<std::vector<Json>>& values) {
  if (spec.type == HyperparameterSpec::Type::kNested && !spec.children.empty()) {
    for (const auto& [name, child] : spec.children) {
      std::vector<std::string> child_path = path;
      child_path.push_back(name);
      Status st = add_axes(key + "." + name, std::move(child_path), child, paths, values);
      if (!st.ok()) return st;
    }
    return Status::Ok();
  }
  auto axis = grid_values(spec);
  if (!axis.ok()) return Status::BadInput(key + "." + axis.status().message());
  paths.push_back(std::move(path));
  values.push_back(std::move(*axis));
  return Status::Ok();
}

}  // namespace

Result<std::vector<Json>> grid_values(const HyperparameterSpec& spec) {
  using Type = HyperparameterSpec::Type;
  switch (spec.type) {
    case Type::kConst:
      return std::vector<Json>{spec.value};
    case Type::kNested:  // an empty group: the sampler's {} as well
      return std::vector<Json>{Json::object()};
    case Type::kCategorical:
      return spec.vals;
    case Type::kInt:
      if (!spec.count && spec.maxval - spec.minval + 1 > kMaxIntValues)
        return Status::BadInput("count: is required for an int range of more than 10000 values");
      return int_values(spec);
    case Type::kDouble:
    case Type::kLog:
      break;
  }
  if (!spec.count) return Status::BadInput("count: is required for a double or log grid");
  std::vector<Json> out;
  for (double v : spaced(spec.minval, spec.maxval, *spec.count))
    out.emplace_back(spec.type == Type::kLog ? std::pow(spec.base, v) : v);
  return out;
}

Result<HyperparameterGrid> HyperparameterGrid::build(
    const std::map<std::string, HyperparameterSpec>& specs) {
  std::vector<std::vector<std::string>> paths;
  std::vector<std::vector<Json>> values;
  for (const auto& [name, spec] : specs) {
    Status st = add_axes("hyperparameters." + name, {name}, spec, paths, values);
    if (!st.ok()) return st;
  }
  HyperparameterGrid grid;
  for (size_t i = 0; i < paths.size(); ++i) {
    grid.size_ *= static_cast<int64_t>(values[i].size());
    if (grid.size_ > kMaxGridPoints) {
      return Status::BadInput("hyperparameters: the grid has more than " +
                              std::to_string(kMaxGridPoints) + " points");
    }
    grid.axes_.push_back({std::move(paths[i]), std::move(values[i])});
  }
  return grid;
}

Json HyperparameterGrid::point(int64_t index) const {
  Json out = Json::object();
  // Fill keys in sorted order first so the JSON's key order matches sample_hparams'.
  std::vector<const Json*> chosen(axes_.size());
  for (size_t i = axes_.size(); i-- > 0;) {
    const auto n = static_cast<int64_t>(axes_[i].values.size());
    chosen[i] = &axes_[i].values[index % n];
    index /= n;
  }
  for (size_t i = 0; i < axes_.size(); ++i) {
    Json* node = &out;
    for (const std::string& key : axes_[i].path) node = &(*node)[key];
    *node = *chosen[i];
  }
  return out;
}

}  // namespace cairn
