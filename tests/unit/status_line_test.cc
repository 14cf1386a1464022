#include "engine/coordinator/status_line.h"

#include <doctest/doctest.h>

namespace cairn {

namespace {
StatusFacts asha_midway() {
  StatusFacts f;
  f.done = 3;
  f.running = 2;
  f.paused = 1;
  f.queued = 2;
  f.total = 8;
  f.units_done = 120;
  f.units_planned = 640;
  f.best = "val_loss 0.125 (1.3)";
  f.elapsed_s = 133;
  f.units_since_start = 120;
  f.done_since_start = 3;
  return f;
}
}  // namespace

TEST_CASE("status line: everything, when the terminal is wide") {
  CHECK(render_status_line(asha_midway(), 200) ==
        "trials 3/8 done, 2 running, 1 paused, 2 queued | units 120/640 | best val_loss 0.125 "
        "(1.3) | 2m13s, ~9m36s left");
}

TEST_CASE("status line: narrower terminals drop units, best, the estimate, then words") {
  const StatusFacts f = asha_midway();
  CHECK(render_status_line(f, 100) ==
        "trials 3/8 done, 2 running, 1 paused, 2 queued | best val_loss 0.125 (1.3) | 2m13s, "
        "~9m36s left");
  CHECK(render_status_line(f, 90) ==
        "trials 3/8 done, 2 running, 1 paused, 2 queued | 2m13s, ~9m36s left");
  CHECK(render_status_line(f, 60) == "trials 3/8 done, 2 running, 1 paused, 2 queued | 2m13s");
  CHECK(render_status_line(f, 50) == "trials 3/8 2R 1P 2Q | 2m13s");
  CHECK(render_status_line(f, 30) == "trials 3/8 2R 1P 2Q | 2m13s");
  CHECK(render_status_line(f, 12) == "trials 3/8 ");
  for (int w : {1, 5, 20, 40, 60, 80, 100, 120})
    CHECK(render_status_line(f, w).size() <= static_cast<size_t>(w > 0 ? w - 1 : 0));
}

TEST_CASE("status line: a silent trial shows, and stays when space is short") {
  StatusFacts f = asha_midway();
  f.silent_trial = "1.4";
  f.silent_s = 125;
  CHECK(render_status_line(f, 200).ends_with(" | 1.4 silent 2m05s"));
  CHECK(render_status_line(f, 50) == "trials 3/8 2R 1P 2Q | 2m13s | 1.4 silent 2m05s");
}

TEST_CASE("status line: the estimate comes from units, else from trials, else none") {
  StatusFacts f = asha_midway();
  CHECK(*eta_seconds(f) == doctest::Approx(520 / (120 / 133.0)));
  f.units_planned.reset();
  CHECK(*eta_seconds(f) == doctest::Approx(5 / (3 / 133.0)));
  f.total.reset();
  CHECK_FALSE(eta_seconds(f));
  StatusFacts fresh;  // nothing done yet in this process: no guess
  fresh.units_planned = 100;
  fresh.elapsed_s = 5;
  CHECK_FALSE(eta_seconds(fresh));
  CHECK(render_status_line(fresh, 80) == "trials 0 done, 0 running | units 0/100 | 5s");
}

TEST_CASE("status line: durations") {
  CHECK(format_duration(0) == "0s");
  CHECK(format_duration(59.9) == "59s");
  CHECK(format_duration(65) == "1m05s");
  CHECK(format_duration(7260) == "2h01m");
  CHECK(format_duration(3 * 86400 + 4 * 3600) == "3d04h");
}

}  // namespace cairn
