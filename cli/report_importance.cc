#include "cli/report_importance.h"

#include <algorithm>
#include <set>

namespace cairn::cli {

std::vector<Importance> hparam_importance(const std::vector<std::map<std::string, Json>>& hparams,
                                          const std::vector<std::optional<double>>& rank) {
  std::vector<size_t> ranked;
  for (size_t i = 0; i < rank.size() && i < hparams.size(); ++i)
    if (rank[i]) ranked.push_back(i);
  std::vector<Importance> out;
  if (ranked.size() < 4) return out;
  double mean = 0;
  for (size_t i : ranked) mean += *rank[i];
  mean /= static_cast<double>(ranked.size());
  double total = 0;
  for (size_t i : ranked) total += (*rank[i] - mean) * (*rank[i] - mean);
  if (total <= 0) return out;

  std::set<std::string> names;
  for (size_t i : ranked)
    for (const auto& [k, v] : hparams[i]) names.insert(k);
  for (const std::string& name : names) {
    // Each ranked trial's group: its value's text, or its bin for a numeric with many values.
    std::vector<std::pair<size_t, Json>> values;
    bool numeric = true;
    std::set<std::string> distinct;
    for (size_t i : ranked) {
      auto it = hparams[i].find(name);
      const Json v = it == hparams[i].end() ? Json(nullptr) : it->second;
      numeric = numeric && v.is_number();
      distinct.insert(v.dump());
      values.emplace_back(i, v);
    }
    if (distinct.size() < 2) continue;
    std::map<size_t, std::string> group;
    if (numeric && distinct.size() > static_cast<size_t>(kImportanceBins)) {
      std::sort(values.begin(), values.end(), [](const auto& a, const auto& b) {
        return a.second.template get<double>() < b.second.template get<double>();
      });
      for (size_t j = 0; j < values.size(); ++j)
        group[values[j].first] = std::to_string(j * kImportanceBins / values.size());
    } else {
      for (const auto& [i, v] : values) group[i] = v.dump();
    }
    std::map<std::string, std::pair<double, int>> sums;  // group → (sum of ranks, count)
    for (size_t i : ranked) {
      auto& s = sums[group[i]];
      s.first += *rank[i];
      s.second += 1;
    }
    double between = 0;
    for (const auto& [g, s] : sums) {
      const double m = s.first / s.second;
      between += s.second * (m - mean) * (m - mean);
    }
    out.push_back({name, between / total, static_cast<int>(sums.size())});
  }
  std::stable_sort(out.begin(), out.end(), [](const Importance& a, const Importance& b) {
    return a.eta_squared > b.eta_squared;
  });
  return out;
}

}  // namespace cairn::cli
