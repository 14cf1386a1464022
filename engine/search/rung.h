// One rung of successive halving (Hyperband, ASHA): the trials that completed the rung's
// length, ranked best first, and what became of each (promoted, still waiting, closed).
// Ranking is total and deterministic — live before errored, then by loss, then by trial
// index — so ties never depend on arrival order and a replayed search decides the same.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "common/json.h"

namespace cairn {

// A metric as JSON: a number, or null when it is not finite (JSON has no infinities).
Json metric_json(double metric);

struct RungEntry {
  enum class State { kWaiting, kPromoted, kClosed, kErrored };
  int64_t trial = 0;
  double metric = 0;  // as reported
  // What the rung ranks by, lower is better whatever the metric's direction:
  // MetricOrder::key(metric), so a NaN (missing) metric is the worst, +inf.
  double loss = 0;
  State state = State::kWaiting;
};

class Rung {
 public:
  explicit Rung(int64_t length) : length_(length) {}
  int64_t length() const { return length_; }
  // Trials that completed this rung, errored ones included (they count as the worst).
  int64_t size() const { return static_cast<int64_t>(ranked_.size()); }
  const std::vector<RungEntry>& ranked() const { return ranked_; }  // best first

  void add(int64_t trial, double metric, double loss);
  // `trial` ended before it could report here: the worst of the rung, never promoted.
  void add_errored(int64_t trial);
  // A waiting member ended for good: it keeps its place in the count, never promoted.
  void mark_errored(int64_t trial);
  // A member that is done here for good (it reached the top, or the searcher stopped it).
  void mark_closed(int64_t trial);

  // Promotes the waiting entries among the best `count`; returns them, best first.
  std::vector<int64_t> promote_best(int64_t count);
  // Closes every waiting entry (they can never be promoted); returns them, best first.
  std::vector<int64_t> close_waiting();

  // {"length", "completed", "results": [{"trial", "metric", "state"}…], "promoted": […]}
  Json describe() const;

 private:
  void insert(RungEntry entry);
  RungEntry* find(int64_t trial);

  int64_t length_;
  std::vector<RungEntry> ranked_;
  std::vector<int64_t> promoted_;  // in the order they were promoted
};

// The best validation seen so far (for describe): lowest loss, then the longer length,
// then the lower trial index.
class BestValidation {
 public:
  void offer(int64_t trial, int64_t length, double metric, double loss);
  Json describe() const;  // {"trial", "length", "metric"} or null

 private:
  struct Entry {
    int64_t trial, length;
    double metric, loss;
  };
  std::optional<Entry> best_;
};

}  // namespace cairn
