// The workdirs `cairn reproduce` checks a record out into (.cairn/reproduce/<trial>-<n>/).
//
// Each belongs to the re-run experiment whose record names it as its workdir. While that
// experiment may still run (active, paused, interrupted) its trials need the directory.
// Once it has ended for good (COMPLETED, ERROR, CANCELED) its code and data are in the
// store and another `cairn reproduce` checks them out afresh, so `cairn gc` removes it —
// but only when it is exactly as `reproduce` left it: trials may write outputs into their
// workdir (CAIRN_WORKDIR) and a user may edit or add files, and those are never thrown
// away. `reproduce` records a fingerprint of the finished checkout (every entry's path,
// type, size, inode, modification and change times) in the re-run's record; gc removes the
// directory only when the fingerprint still matches. Also kept: the checkout of a re-run
// whose data was too large to keep in the store (it may hold links to that data, which a
// reproduce of the re-run follows), and anything that is not a real directory directly
// inside .cairn/reproduce/ named for the trial it reproduces.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "common/json.h"
#include "common/status.h"
#include "store/store_location.h"

namespace cairn {

// The fingerprint of a checkout as it is now (hex SHA-256 over its sorted entries).
Result<std::string> checkout_fingerprint(const std::filesystem::path& dir);

struct RemovedWorkdir {
  std::string path;          // the checkout: removed, or kept for `kept_because`
  uint64_t bytes = 0;        // of the regular files removed
  std::string kept_because;  // empty when removed (or when there was nothing to look at)
};

// Removes the reproduce checkout of the experiment whose record is `experiment` when the
// experiment has ended and the checkout is unchanged. The caller holds the experiment open
// for writing, so that no `cairn resume` can start on it meanwhile. path is empty when the
// record names no checkout of its own.
Result<RemovedWorkdir> remove_ended_reproduce_workdir(const StoreLayout& store,
                                                      const Json& experiment);

}  // namespace cairn
