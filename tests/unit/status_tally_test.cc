// The status line's tally (engine/coordinator/status_tally.h): finished trials are added once
// and a redraw walks only the live ones, so a search of 5,000 trials costs its running
// trials per redraw.
#include "engine/coordinator/status_tally.h"

#include <doctest/doctest.h>

#include "engine/coordinator/terminal.h"

namespace cairn {
namespace {

Json record(const std::string& id, int64_t steps, std::optional<double> loss) {
  Json r{{"id", id}, {"steps_completed", steps}};
  if (loss) r["best_validation"] = Json{{"loss", *loss}};
  return r;
}

}  // namespace

TEST_CASE("status tally: finished trials once, live ones at each redraw") {
  StatusTally tally("loss", true);
  std::vector<Json> finished;
  for (int i = 1; i <= 5000; ++i) finished.push_back(record("1." + std::to_string(i), 10, 1.0 + i));
  for (const Json& r : finished) tally.add_finished(r);
  const Json running = record("1.5001", 4, 0.5);
  const Json quiet = record("1.5002", 2, std::nullopt);
  const Json paused = record("1.5003", 3, 3.0);
  const Json queued = record("1.5004", 0, std::nullopt);
  using Kind = LiveTrialStatus::Kind;
  const std::vector<LiveTrialStatus> live = {{Kind::kRunning, &running, 1},
                                             {Kind::kRunning, &quiet, 45},
                                             {Kind::kPaused, &paused, 0},
                                             {Kind::kQueued, &queued, 0}};
  const StatusFacts f = tally.facts(live, 30);
  CHECK(f.done == 5000);
  CHECK(f.running == 2);
  CHECK(f.paused == 1);
  CHECK(f.queued == 1);
  CHECK(f.units_done == 50000 + 9);
  CHECK(f.best == "loss 0.5 (1.5001)");
  CHECK(f.silent_trial == "1.5002");
  CHECK(f.silent_s == 45);
  // Without the live ones: the finished trials' best.
  CHECK(tally.facts({}, 30).best == "loss 2 (1.1)");
  // A trial that finished this round, not yet added, counts as done.
  const StatusFacts g = tally.facts({{Kind::kFinished, &running, 0}}, 30);
  CHECK(g.done == 5001);
  CHECK(g.running == 0);
}

TEST_CASE("status clear: the rows a line takes at the terminal's width now") {
  CHECK(status_clear(0, 80) == "\r\x1b[K");
  CHECK(status_clear(79, 80) == "\r\x1b[K");
  CHECK(status_clear(40, 40) == "\r\x1b[K");
  // 119 columns on a terminal shrunk to 40: three rows, the cursor on the last.
  CHECK(status_clear(119, 40) == "\r\x1b[K\x1b[2A\x1b[J");
  CHECK(status_clear(41, 40) == "\r\x1b[K\x1b[1A\x1b[J");
  CHECK(status_clear(10, 0) == "\r\x1b[K\x1b[9A\x1b[J");
}

}  // namespace cairn
