#include "common/metric_order.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "store/best_trial.h"

namespace cairn {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
const double kNan = std::nan("");

}  // namespace

TEST_CASE("MetricOrder: smaller is better") {
  const MetricOrder order(true);
  CHECK(order.smaller_is_better());
  CHECK(order.better(0.1, 0.2));
  CHECK_FALSE(order.better(0.2, 0.1));
  CHECK_FALSE(order.better(0.5, 0.5));  // strict: a tie is not better
  CHECK(order.better(-3, 0));
  CHECK(order.worst() == kInf);
  CHECK(order.key(0.25) == 0.25);
  CHECK(std::string(order.better_word()) == "smaller");
}

TEST_CASE("MetricOrder: larger is better") {
  const MetricOrder order(false);
  CHECK_FALSE(order.smaller_is_better());
  CHECK(order.better(0.9, 0.8));
  CHECK_FALSE(order.better(0.8, 0.9));
  CHECK_FALSE(order.better(0.5, 0.5));
  CHECK(order.worst() == -kInf);
  CHECK(order.key(0.25) == -0.25);
  CHECK(std::string(order.better_word()) == "larger");
}

TEST_CASE("MetricOrder: infinities are ordinary values, NaN is as bad as worst()") {
  for (bool smaller : {true, false}) {
    CAPTURE(smaller);
    const MetricOrder order(smaller);
    const double best_possible = smaller ? -kInf : kInf;
    CHECK(order.better(best_possible, 1e300));
    CHECK(order.better(1e300, order.worst()));
    CHECK(order.better(-1e300, order.worst()));
    CHECK_FALSE(order.better(order.worst(), 0.0));
    CHECK_FALSE(order.better(order.worst(), order.worst()));
    // NaN: never better, and everything but worst() (and NaN) beats it.
    CHECK_FALSE(order.better(kNan, 0.0));
    CHECK_FALSE(order.better(kNan, order.worst()));
    CHECK_FALSE(order.better(order.worst(), kNan));
    CHECK_FALSE(order.better(kNan, kNan));
    CHECK(order.better(0.0, kNan));
    CHECK(order.better(best_possible, kNan));
    CHECK(order.key(kNan) == kInf);
    CHECK(order.key(order.worst()) == kInf);
    CHECK(order.key(best_possible) == -kInf);
  }
}

TEST_CASE("MetricOrder: sorting by key puts the best first, NaN last") {
  std::vector<double> values{0.5, kNan, -1.0, 2.0, kInf, -kInf};
  auto sorted_by = [&](const MetricOrder& order) {
    std::vector<double> v = values;
    std::stable_sort(v.begin(), v.end(),
                     [&](double a, double b) { return order.key(a) < order.key(b); });
    return v;
  };
  const std::vector<double> smaller = sorted_by(MetricOrder(true));
  CHECK(smaller[0] == -kInf);
  CHECK(smaller[1] == -1.0);
  CHECK(smaller[2] == 0.5);
  CHECK(smaller[3] == 2.0);
  // +inf (the worst) and NaN tie at the end, in their input order.
  CHECK(std::isnan(smaller[4]));
  CHECK(smaller[5] == kInf);

  const std::vector<double> larger = sorted_by(MetricOrder(false));
  CHECK(larger[0] == kInf);
  CHECK(larger[1] == 2.0);
  CHECK(larger[2] == 0.5);
  CHECK(larger[3] == -1.0);
  CHECK(std::isnan(larger[4]));
  CHECK(larger[5] == -kInf);
}

TEST_CASE("best_trial: the best best_validation by the order; ties keep the earlier trial") {
  const Json a{{"id", "1.1"}, {"best_validation", {{"acc", 0.7}}}};
  const Json b{{"id", "1.2"}, {"best_validation", {{"acc", 0.9}}}};
  const Json c{{"id", "1.3"}, {"best_validation", {{"acc", 0.9}}}};
  const Json none{{"id", "1.4"}, {"best_validation", {{"loss", 0.1}}}};
  const Json text{{"id", "1.5"}, {"best_validation", {{"acc", "high"}}}};
  const std::vector<const Json*> trials{&a, &none, &b, &c, &text};
  CHECK(best_trial(trials, "acc", MetricOrder(false)) == &b);
  CHECK(best_trial(trials, "acc", MetricOrder(true)) == &a);
  CHECK(best_trial({&none, &text}, "acc", MetricOrder(true)) == nullptr);
  CHECK(best_trial({}, "acc", MetricOrder(true)) == nullptr);
}

}  // namespace cairn
