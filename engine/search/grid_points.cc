#include "engine/search/grid_points.h"

namespace cairn {
namespace {

constexpr int64_t kMaxGridPoints = 100'000;

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
