// The workdirs `cairn reproduce` checks a record out into (.cairn/reproduce/<trial>-<n>/).
//
// Each belongs to the re-run experiment whose record names it as its workdir. While that
// experiment may still run (active, paused, interrupted) its trials need the directory; once
// it has ended for good (COMPLETED, ERROR, CANCELED) nothing reads it again — its code and
// data are recorded in the store, and another `cairn reproduce` checks them out afresh — so
// `cairn gc` removes it. Except when the re-run's data was too large to keep in the store: the
// workdir then holds the links to where that data lives, which a reproduce of the re-run
// follows. Only a directory directly inside .cairn/reproduce/ is ever removed: a workdir
// anywhere else is the user's.
#pragma once

#include <cstdint>
#include <string>

#include "common/json.h"
#include "common/status.h"
#include "store/store_location.h"

namespace cairn {

struct RemovedWorkdir {
  std::string path;    // empty when nothing was removed
  uint64_t bytes = 0;  // of the regular files in it
};

// Removes the reproduce workdir of the experiment whose record is `experiment` when the
// experiment has ended. The caller holds the experiment open for writing, so that no
// `cairn resume` can start on it meanwhile.
Result<RemovedWorkdir> remove_ended_reproduce_workdir(const StoreLayout& store,
                                                      const Json& experiment);

}  // namespace cairn
