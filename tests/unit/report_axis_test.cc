#include "cli/report_axis.h"

#include <doctest/doctest.h>

#include "cli/report_importance.h"

namespace cairn::cli {

namespace {
Extent extent(double a, double b) {
  Extent e;
  e.add(a);
  e.add(b);
  return e;
}
}  // namespace

TEST_CASE("report axis: linear ticks are round steps with clean labels") {
  Axis a(extent(0.03, 0.97), Scale::kLinear);
  CHECK(a.lo() == doctest::Approx(0));
  CHECK(a.hi() == doctest::Approx(1));
  std::vector<std::string> labels;
  for (double t : a.ticks()) labels.push_back(a.label(t));
  CHECK(labels == std::vector<std::string>{"0", "0.2", "0.4", "0.6", "0.8", "1"});
  Axis b(extent(1200, 9100), Scale::kLinear);
  CHECK(b.label(b.ticks()[1]) == "2000");
  CHECK(b.label(b.ticks()[5]) == "10000");
  Axis tiny(extent(0.00012, 0.00031), Scale::kLinear);
  CHECK(tiny.label(tiny.ticks()[1]) == "0.00015");
  Axis one(extent(5, 5), Scale::kLinear);  // a single value gets room around it
  CHECK(one.lo() < 5);
  CHECK(one.hi() > 5);
  CHECK(one.fraction(5) == doctest::Approx(0.5));
}

TEST_CASE("report axis: log axes span whole decades, labelled compactly") {
  Axis a(extent(0.0012, 0.09), Scale::kLog);
  CHECK(a.scale() == Scale::kLog);
  CHECK(a.lo() == doctest::Approx(0.001));
  CHECK(a.hi() == doctest::Approx(0.1));
  CHECK(a.fraction(0.01) == doctest::Approx(0.5));
  std::vector<std::string> labels;
  for (double t : a.ticks()) labels.push_back(a.label(t));
  CHECK(labels ==
        std::vector<std::string>{"0.001", "0.002", "0.005", "0.01", "0.02", "0.05", "0.1"});
  Axis wide(extent(1e-9, 1e3), Scale::kLog);
  CHECK(wide.ticks().size() <= 9);
  CHECK(wide.label(1e-9) == "1e-9");
  CHECK(Axis(extent(-1, 10), Scale::kLog).scale() == Scale::kLinear);  // no log of ≤ 0
}

TEST_CASE("report axis: a metric is drawn on a log axis when it spans two decades") {
  CHECK(spans_decades(extent(0.01, 1)));
  CHECK_FALSE(spans_decades(extent(0.02, 1)));
  CHECK_FALSE(spans_decades(extent(-1, 1000)));
  CHECK_FALSE(spans_decades(Extent{}));
}

TEST_CASE("report importance: η² of metric ranks, per hyperparameter alone") {
  // opt decides the rank completely; seedish is noise; constant never shows.
  std::vector<std::map<std::string, Json>> hp;
  std::vector<std::optional<double>> rank;
  const char* opts[] = {"adam", "adam", "adam", "sgd", "sgd", "sgd"};
  const int noise[] = {1, 2, 1, 2, 1, 2};
  for (int i = 0; i < 6; ++i) {
    hp.push_back({{"opt", opts[i]}, {"seedish", noise[i]}, {"constant", 3}});
    rank.push_back(i + 1);
  }
  auto imp = hparam_importance(hp, rank);
  REQUIRE(imp.size() == 2);
  CHECK(imp[0].name == "opt");
  CHECK(imp[0].eta_squared == doctest::Approx(27.0 / 35.0));
  CHECK(imp[1].name == "seedish");
  CHECK(imp[1].eta_squared < 0.1);
  // Fewer than 4 ranked trials: no estimate.
  rank = {1, 2, 3, std::nullopt, std::nullopt, std::nullopt};
  CHECK(hparam_importance(hp, rank).empty());
}

TEST_CASE("report importance: many numeric values are binned by count") {
  std::vector<std::map<std::string, Json>> hp;
  std::vector<std::optional<double>> rank;
  for (int i = 0; i < 20; ++i) {
    hp.push_back({{"lr", 0.001 * (i + 1)}});
    rank.push_back(i + 1);  // lr orders the ranks exactly
  }
  auto imp = hparam_importance(hp, rank);
  REQUIRE(imp.size() == 1);
  CHECK(imp[0].groups == kImportanceBins);
  CHECK(imp[0].eta_squared > 0.9);
}

}  // namespace cairn::cli
