// A data-parallel trial's checkpoint written on several machines (docs/peers.md "A
// checkpoint round over machines"): each machine's ranks write their files into a directory
// of their own machine, and the checkpoint is the union of those parts. Ranks write distinct
// names (docs/sdk.md: rank 0 alone, or each rank its own shard), so a union is what the
// shared directory of a one-machine round would have held. Where two parts name the same
// file, it must hold the same bytes on both (every rank wrote the same metadata file, say):
// different content under one name has no meaning cairn could pick (one machine's write
// would silently win), so the checkpoint is refused with one line naming both machines.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "store/checkpoint_files.h"

namespace cairn {

struct CheckpointPart {
  std::string machine;  // how messages name it: "local", "10.0.0.2:7070"
  std::vector<CheckpointFile> files;
};

// The files of the whole checkpoint, sorted by path, each once. kBadInput (one line) when two
// parts hold different content under one path, or one part's file is another's directory.
Result<std::vector<CheckpointFile>> merge_checkpoint_parts(
    const std::vector<CheckpointPart>& parts);

}  // namespace cairn
