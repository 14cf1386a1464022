// What resume, pause and kill share: finding out whether an experiment is being driven,
// by which process, and reaching that process; and where a recorded workdir is now
// (resume, and reproduce for data too large to keep).
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>

#include "cli/command.h"
#include "engine/config/config.h"

namespace cairn::cli {

struct ExperimentStatus {
  Json record;                  // the experiment record
  bool driven = false;          // a live process holds its write lock
  std::optional<pid_t> driver;  // that process, when its record names it and it is alive
};

Result<ExperimentStatus> experiment_status(const StoreLayout& store, int64_t id);
// Waits until no process drives the experiment (polling its lock), up to `timeout_s`.
// `still_waiting` (if any) is called after 10 s, then every 30 s, for progress messages.
bool wait_until_undriven(const StoreLayout& store, int64_t id, int timeout_s,
                         const std::function<void()>& still_waiting = {});
// The path of the running cairn executable (re-executed for builtin:mlp). In run.cc.
std::string self_executable();
// Starts a new session (no terminal) with stdin from /dev/null and stdout+stderr appended to
// `log_file`: how a detached coordinator runs. In run.cc.
void start_session_with_output(const std::filesystem::path& log_file);

// Where the recorded workdir is now, when the project moved (or was copied) together with
// its store (the usual layout: .cairn/ inside the project): the same place relative to the
// store's parent. Empty when the store has not moved, the workdir was not below the store's
// parent, the record does not say where the store was, or nothing is at the new place.
std::filesystem::path moved_workdir(const Json& experiment, const StoreLayout& store);

// For the commands that drive an experiment (run, resume, reproduce), before their first
// output: a reader that closes stdout (`cairn run x.yaml | head -1`) must not kill the
// coordinator half-way, so SIGPIPE is ignored and the output is discarded (EPIPE) while the
// experiment goes on, as it does when the terminal closes (docs/fault-tolerance.md). In run.cc.
void keep_driving_without_stdout();

// The --slots its `run` was given (recorded with the experiment), 0 when none: resume and
// reproduce have no --slots of their own, and the machine's default may be too few for
// slots_per_trial.
int recorded_slots(const Json& experiment);

// Reads the config stored with the experiment (its text and --set overrides) again.
// When the project moved (or was copied) with its store, the workdir is taken at its new
// place and *moved_note says so.
Result<ExperimentConfig> stored_config(const Json& experiment, const StoreLayout& store,
                                       std::string* moved_note = nullptr);

}  // namespace cairn::cli
