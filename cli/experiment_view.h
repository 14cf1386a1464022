// The prelude of the commands that read one experiment (best, checkpoints, logs, metrics,
// report, show, watch): find the store (--store, or the nearest .cairn above the current
// directory) and open the experiment's records for reading. One function, so that every
// command says the same thing when either is missing; it reports, it does not print or
// exit: the command passes the Status to fail() (cli/command.h).
#pragma once

#include <cstdint>
#include <memory>

#include "cli/command.h"
#include "common/status.h"
#include "store/experiment_reader.h"
#include "store/store_location.h"

namespace cairn::cli {

// An experiment opened for reading (a RocksDB secondary instance: no lock taken, works while
// another process drives it), with the store it lives in. Movable, not copyable; not for
// use from several threads at once (ExperimentReader is not).
struct ExperimentView {
  StoreLayout store;
  std::unique_ptr<ExperimentReader> reader;

  ExperimentReader* operator->() const { return reader.get(); }
  ExperimentReader& operator*() const { return *reader; }
};

// Which step of open_experiment_view failed: finding the store, or opening the experiment
// in it (a command may add a hint for the latter: `show` names `cairn ls`).
enum class ViewStep { kStore, kExperiment };

// The store's Status when there is no store (find_store's messages, e.g. "no cairn store
// at …"), else ExperimentReader::open's (e.g. kNotFound "no experiment 7"), unchanged.
// `failed` (if given) is set to the step that failed.
Result<ExperimentView> open_experiment_view(const GlobalOptions& global, int64_t experiment,
                                            ViewStep* failed = nullptr);

}  // namespace cairn::cli
