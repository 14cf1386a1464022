// Deleting checkpoints without breaking the ones that remain (SPEC §5; docs/retention.md).
//
// Objects are shared: identical content is stored once, so one object may be named by the
// manifests of several checkpoints, of this experiment or of any other in the store. An
// object is removed only when no *live* checkpoint anywhere in the store names it (live: its
// record is neither "deleting" nor "deleted"); a checkpoint's manifest is itself an object
// and is shared the same way (two checkpoints with identical files have one id).
// A warm-started experiment's source checkpoint (its record's "warm_start", possibly of
// another experiment) is live while that experiment exists, whatever its own record says.
//
// Files go before records, so a crash at any point leaks nothing and breaks nothing:
//   (a) the records are marked "deleting" (and "deleted", which every reader already skips)
//       in one fsynced batch: from then on nothing offers them for restore or export;
//   (b) the objects only they name are removed, the manifest last (while it exists a re-run
//       can still learn which files were the checkpoint's);
//   (c) the records lose "deleting" and gain "deleted_at" and "bytes_reclaimed"; they stay
//       as history.
// Every call finishes the records an earlier, interrupted call left "deleting".
//
// The race with a process that is ingesting a checkpoint right now: it may have moved a new
// object into the store, or found that an object it needs is already there, and not yet
// committed the record that names it. Nothing in the store says so yet; only the object's
// change time (ctime) does: moving a new object into place changes it, and ObjectStore must
// touch an object it finds already there (utimensat) for the same reason. Objects
// changed less than a grace period ago are therefore left alone. `cairn gc` and a
// coordinator deleting its own checkpoints use `ingest_grace()`, which is zero when no other
// experiment of the store is being driven (nobody else can be ingesting) and
// kIngestGrace otherwise. A coordinator must call delete_checkpoints only after the batch
// that registered its latest checkpoints is committed.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "store/experiment_db.h"
#include "store/object_store.h"
#include "store/store_location.h"

namespace cairn {

// Comfortably longer than any ingestion (hashing and moving one checkpoint's files, then one
// loop iteration until its record is committed).
inline constexpr std::chrono::seconds kIngestGrace{3600};

struct DeleteOptions {
  // Objects changed less than this long ago are kept; their checkpoint stays "deleting" and
  // a later call (or a sweep) finishes it.
  std::chrono::seconds fresh_grace{0};
  // For crash tests: return as if the process had died after this step.
  enum class StopAfter { kNothing, kMarking, kRemovingFiles };
  StopAfter stop_after = StopAfter::kNothing;
};

struct DeleteResult {
  int64_t deleted = 0;  // records marked deleted by this call, earlier unfinished ones included
  int64_t pending = 0;  // records left "deleting" because an object was too fresh
  uint64_t bytes_reclaimed = 0;  // sizes of the object files this call removed
};

// Deletes the checkpoints `ids` (ids not in the database, or already deleted, are ignored)
// of experiment `experiment_id`, whose database `db` is open for writing. Other experiments
// are read through secondary instances; a store that cannot be read fully deletes nothing
// and says why.
Result<DeleteResult> delete_checkpoints(ExperimentDb& db, ObjectStore& objects,
                                        const StoreLayout& store, int64_t experiment_id,
                                        const std::vector<std::string>& ids,
                                        const DeleteOptions& options = {});

// zero when no experiment of the store but `collecting` is being driven; else kIngestGrace.
std::chrono::seconds ingest_grace(const StoreLayout& store, int64_t collecting);

struct SweepResult {
  int64_t objects_removed = 0;  // objects and leftover temporary files in objects/
  int64_t staging_removed = 0;  // abandoned directories in staging/
  uint64_t bytes_reclaimed = 0;
};

// Mark and sweep over the whole store: removes every object that no live checkpoint names
// (as a file or as its manifest) and that changed more than `grace` ago, temporary files of
// interrupted object writes older than `grace`, and staging directories of experiments not
// being driven whose newest entry is older than `grace`. Every experiment is only read
// (secondary instances), so it is safe while others run; if one cannot be read nothing is
// removed. Objects a future feature keeps outside checkpoints must be added to the marking
// here before that feature ships.
Result<SweepResult> sweep_unreferenced_objects(const StoreLayout& store,
                                               std::chrono::seconds grace = kIngestGrace);

}  // namespace cairn
