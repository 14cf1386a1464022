// The grid searcher's points: the cartesian product of every hyperparameter's values, keys
// in sorted order with nested maps flattened (also sorted), the first key varying slowest —
// the order of nested for loops. A point is computed from its index, so a grid of 100,000
// points costs memory only for each hyperparameter's own values.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "engine/config/config.h"
#include "engine/config/hparam_values.h"

namespace cairn {

class HyperparameterGrid {
 public:
  // kBadInput naming the key ("hyperparameters.lr.count: …") for a hyperparameter the grid
  // cannot enumerate, or a grid of more than 100,000 points.
  static Result<HyperparameterGrid> build(const std::map<std::string, HyperparameterSpec>& specs);

  int64_t size() const { return size_; }
  // The point at `index` (0-based, < size()), shaped like sample_hparams' output.
  Json point(int64_t index) const;

 private:
  struct Axis {
    std::vector<std::string> path;  // nested keys, outermost first
    std::vector<Json> values;
  };
  std::vector<Axis> axes_;
  int64_t size_ = 1;
};

}  // namespace cairn
