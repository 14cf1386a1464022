#include "engine/coordinator/time_metric.h"

#include <doctest/doctest.h>

#include <limits>

namespace cairn {

TEST_CASE("searcher progress is the step, or with time_metric that metric's value") {
  const Json metrics = Json::parse(R"({"val_loss": 0.5, "batches": 96.7, "bad": "12"})");
  CHECK(searcher_progress("", 40, metrics) == 40);
  CHECK(searcher_progress("batches", 40, metrics) == 96);  // rounded down: not reached early
  CHECK(searcher_progress("epochs", 40, metrics) == -1);   // absent: no rung reached
  CHECK(searcher_progress("bad", 40, metrics) == -1);      // not a number
  Json odd = Json::object();
  odd["n"] = -3;
  CHECK(searcher_progress("n", 40, odd) == -1);
  odd["n"] = std::numeric_limits<double>::infinity();
  CHECK(searcher_progress("n", 40, odd) == -1);
  odd["n"] = 1e30;
  CHECK(searcher_progress("n", 40, odd) == int64_t{1} << 62);
}

}  // namespace cairn
