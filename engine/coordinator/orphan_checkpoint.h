// Orphan checkpoints: what a trial's SDK writes to $CAIRN_ORPHAN_DIR/<step>/ when cairn
// is gone (docs/fault-tolerance.md), for the next `cairn resume` to adopt.
#pragma once

#include <cstdint>
#include <filesystem>

#include "common/status.h"

namespace cairn {

// The step of a finished orphan checkpoint in `dir` of a trial of `world_size` ranks:
// every rank left its marker there (each rank writes its marker last, after syncing its
// files), all for the same step. The ranks of a data-parallel gang stop on their own once cairn is
// gone, possibly at different steps, so a directory some rank did not finish holds a partial
// checkpoint: an error saying which ranks, and it is never offered. A rank that did not take
// part in the checkpoint (docs/protocol.md) leaves a marker with "entered": false; a directory
// where no rank entered is no checkpoint either.
Result<int64_t> orphan_step(const std::filesystem::path& dir, int world_size);

}  // namespace cairn
