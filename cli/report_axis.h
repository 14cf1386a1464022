// The axes of `cairn report`'s charts: linear or logarithmic, their bounds, tick values and
// tick labels. Pure, so the rules are unit-tested (tests/unit/report_axis_test.cc).
//
// The rule for a log axis (man/cairn.1, `cairn report`): a hyperparameter of `type: log` is drawn
// on a log axis; a metric is when every value is positive and the largest is at least 100
// times the smallest (it spans two decades or more). Everything else is linear.
#pragma once

#include <string>
#include <vector>

namespace cairn::cli {

enum class Scale { kLinear, kLog };

// The values an axis must show; empty until add() is called.
struct Extent {
  double lo = 0, hi = 0;
  bool any = false;
  void add(double v);
};

// True when the metric values in `e` call for a log axis (the rule above).
bool spans_decades(const Extent& e);

class Axis {
 public:
  // Bounds round outwards: to powers of ten for a log axis, to a tick for a linear one;
  // one value gets some room on both sides. A log axis needs lo > 0 (else it is linear).
  Axis(Extent values, Scale scale);
  Scale scale() const { return scale_; }
  double lo() const { return lo_; }
  double hi() const { return hi_; }
  // Where `v` falls, 0 at lo and 1 at hi.
  double fraction(double v) const;
  // 3 to about 8 round values within the bounds: 1, 2, 5 × 10^k steps when linear; the powers
  // of ten (and their 2s and 5s when there are few) when log.
  std::vector<double> ticks() const;
  // A tick's label, short and without float noise: 0.3 not 0.30000000000000004, 1e-05 as
  // 1e-5, 20000 as 2e4.
  std::string label(double v) const;

 private:
  double lo_ = 0, hi_ = 1, step_ = 0.2;
  Scale scale_ = Scale::kLinear;
};

}  // namespace cairn::cli
