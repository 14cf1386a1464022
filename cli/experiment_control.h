// What resume, pause and kill share: finding out whether an experiment is being driven,
// by which process, and reaching that process.
#pragma once

#include <sys/types.h>

#include <optional>

#include "cli/command.h"
#include "engine/config.h"

namespace cairn::cli {

struct ExperimentStatus {
  Json record;                // the experiment record
  bool driven = false;        // a live process holds its write lock
  std::optional<pid_t> driver;  // that process, when its record names it and it is alive
};

Result<ExperimentStatus> experiment_status(const StoreLayout& store, int64_t id);
// Waits until no process drives the experiment (polling its lock), up to `timeout_s`.
bool wait_until_undriven(const StoreLayout& store, int64_t id, int timeout_s);
// Reads the config stored with the experiment (its text and --set overrides) again.
Result<ExperimentConfig> stored_config(const Json& experiment);

}  // namespace cairn::cli
