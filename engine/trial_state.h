// What the coordinator knows of one trial while it drives it. The durable part lives in
// `record` (the trial's JSON record in the store); the rest is about the live process.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <optional>
#include <set>
#include <string>

#include "common/json.h"
#include "engine/coordinator.h"
#include "engine/trial_process.h"

namespace cairn {

struct Coordinator::Trial {
  int64_t index = 0;
  Json record;  // persisted at the end of the loop iteration when `dirty`
  bool dirty = false;
  int64_t target = 0;            // train until this many units (the searcher's current operation)
  int64_t validated_target = 0;  // the target the searcher has been told about
  bool closed = false;           // the searcher has no more work for it
  bool stop_requested = false;
  bool finished = false;  // in a final state; never started again
  std::optional<TrialProcess> process;
  std::optional<ExitInfo> exit;    // set when reaped, handled once its output is drained
  Clock::time_point not_before{};  // restart back-off
  int connection_fd = -1;
  std::optional<int64_t> pending_operation_seq;  // a next_operation waiting for the searcher
  std::set<std::string> staging_dirs;            // checkpoint_begin handed out, not yet ended
  std::string partial_line;                      // output not yet ended by '\n'
  std::filesystem::path output_file;             // where the process writes stdout+stderr
  // A process of this trial left running by a coordinator that died: it was told nothing
  // and will checkpoint (as an orphan) and exit by itself; the trial waits for it.
  std::optional<Json> orphan_process;
  std::deque<std::string> tail;  // the last lines, for failure reports
  int64_t log_seq = 0;
  Clock::time_point last_heard{};
  bool liveness_killed = false;
  int failures_in_a_row = 0;
  // Told "done" while waiting for the searcher: its exit 0 is a pause, even when a
  // promotion arrived between that answer and the exit.
  bool released = false;  // failed starts without a checkpoint in between  // the last message or
                          // output from the running process
  int64_t latest_checkpoint_step = -1;

  bool running() const { return process.has_value(); }
};

}  // namespace cairn
