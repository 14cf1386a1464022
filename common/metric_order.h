// Which of two values of the searcher's metric is better: the one ordering behind the
// searcher's `smaller_is_better` (SPEC §2), shared by the coordinator (a trial's best
// validation, the value a missing metric counts as), the searchers (their loss), retention
// (the best checkpoints), the best trial and the CLI's report. One definition, so that
// they cannot disagree about a direction or about a value that is not a number.
//
// Contract on values that are not finite:
//   - ±inf are ordinary values: with smaller_is_better, -inf is better than every other
//     value and +inf no better than any; the other way round otherwise.
//   - NaN is as bad as worst(): never better than anything, and every value other than
//     NaN and worst() is better than it. (The callers pass finite metrics where a metric
//     was reported; NaN is what a searcher is handed for a missing one.)
// So key() maps every double, NaN included, into one strict weak order: sorting by key()
// puts the best first, and better(a, b) is key(a) < key(b).
//
// A plain value (one bool): copy it freely; every member is const and thread-safe.
#pragma once

#include <cmath>

namespace cairn {

class MetricOrder {
 public:
  explicit constexpr MetricOrder(bool smaller_is_better) : smaller_is_better_(smaller_is_better) {}

  constexpr bool smaller_is_better() const { return smaller_is_better_; }

  // A number that is lower the better `v` is: v itself, or -v when larger is better; NaN
  // becomes +inf, the key of worst().
  double key(double v) const {
    if (std::isnan(v)) return HUGE_VAL;
    return smaller_is_better_ ? v : -v;
  }

  // True when `a` is strictly better than `b`.
  bool better(double a, double b) const { return key(a) < key(b); }

  // The value no other value is worse than: what a missing or non-finite metric counts as.
  constexpr double worst() const { return smaller_is_better_ ? HUGE_VAL : -HUGE_VAL; }

  // The direction in words, for people: "smaller" or "larger" (… "is better").
  constexpr const char* better_word() const { return smaller_is_better_ ? "smaller" : "larger"; }

 private:
  bool smaller_is_better_;
};

}  // namespace cairn
