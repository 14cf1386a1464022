// Finding a stored checkpoint anywhere in the store by the names users and scripts give it
// (`cairn export`, `cairn best`, a trial's `fetch_checkpoint`, `searcher.source_*`):
//   - its content id, or a unique prefix of it of at least 4 hex digits ("ab12…");
//   - TRIAL@latest or TRIAL@best ("7.3@latest"): what a restart of the trial resumes from,
//     and what keep_trial_best keeps (store/retention.h);
//   - a Determined storage id: the UUID the `determined` package gave the checkpoint when a
//     script stored it, kept in the record's metadata as "determined_storage_id"
//     (docs/determined.md).
// A checkpoint that retention deleted, or that was found corrupt, is not found: the error
// says which.
//
// Every experiment's database is read as a secondary instance (store/experiment_reader.h),
// so these work while coordinators drive them. Thread-safety: none needed (no shared state).
#pragma once

#include <cstdint>
#include <string>

#include "common/json.h"
#include "common/status.h"
#include "store/store_location.h"

namespace cairn {

struct FoundCheckpoint {
  int64_t experiment = 0;
  Json record;  // the stored checkpoint record
};

Result<FoundCheckpoint> find_checkpoint(const StoreLayout& store, const std::string& ref);

// The latest usable checkpoint (as TRIAL@latest) of the trial with store-wide number
// `number` (store/trial_numbers.h: Determined's integer trial ids).
Result<FoundCheckpoint> latest_checkpoint_of_number(const StoreLayout& store, int64_t number);

}  // namespace cairn
