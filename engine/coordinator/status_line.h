// The live status line `cairn run` and `resume` keep at the bottom of a terminal (ninja's
// and cargo's kind): what the search has done, how far it is, the best so far, the time, and
// a trial that has gone quiet. Pure: facts in, one line of text out, so every case is
// unit-tested (tests/unit/status_line_test.cc); engine/coordinator/terminal.h draws it.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace cairn {

struct StatusFacts {
  int done = 0;  // trials ended (completed, stopped, errored, canceled)
  int running = 0;
  int paused = 0;            // waiting for a promotion or a resume
  int queued = 0;            // waiting for a slot, or in a restart back-off
  std::optional<int> total;  // trials the searcher plans, when it knows
  int64_t units_done = 0;    // units trained, all trials
  std::optional<int64_t> units_planned;
  std::string best;      // "val_loss 0.125 (1.3)", "" before any validation
  double elapsed_s = 0;  // since this `run` or `resume` started
  // Progress made since then, for the estimate of the time left (a resume's earlier work
  // took no time of this process).
  int64_t units_since_start = 0;
  int done_since_start = 0;
  // The running trial silent the longest, when that is over kSilenceShownAfter.
  std::string silent_trial;
  double silent_s = 0;
};

// Where the search stood when this process began to drive it (the first update), for the
// facts' *_since_start and elapsed time.
struct StatusBaseline {
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  std::optional<int64_t> units;
  std::optional<int> done;
};

// A running trial quiet for longer than this shows in the line.
inline constexpr double kSilenceShownAfter = 30;

// Seconds left: from the units' pace when the plan in units is known, else from the
// trials' pace when their total is; nullopt before any progress or without a plan.
std::optional<double> eta_seconds(const StatusFacts& facts);

// "45s", "3m05s", "2h07m", "3d04h".
std::string format_duration(double seconds);

// The line, plain ASCII, at most `width` - 1 columns (the last column would make some
// terminals wrap). When it does not fit, parts go in this order: units, best, estimate,
// the count words; what is left is cut.
std::string render_status_line(const StatusFacts& facts, int width);

}  // namespace cairn
