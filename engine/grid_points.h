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
#include "engine/config.h"

namespace cairn {

// The values one hyperparameter takes on the grid (docs/search.md):
// int: every integer of [minval, maxval], or with count N, min(N, range size) evenly spaced
// integers, each rounded to the nearest (halves away from zero), both ends included;
// double: N evenly spaced values, both ends included; log: base^x for N evenly spaced
// exponents x; with N = 1, the midpoint of the range (of the exponents for log);
// categorical: every value in order; const: itself.
// kBadInput ("count: …") for a double or log without count.
// REQUIRES: `spec` is not kNested.
Result<std::vector<Json>> grid_values(const HyperparameterSpec& spec);

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
