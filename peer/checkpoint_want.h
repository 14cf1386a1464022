// The contents one side of a checkpoint transfer asks the other for (docs/peers.md
// "Checkpoints over the wire"): {"type": "checkpoint_want", "digests": [D, …],
// "offsets"?: {D: N, …}}. `digests` names contents of the manifest the exchange is about,
// each once; `offsets` (optional, new in cairn 0.1 without a protocol change: an older peer
// ignores it and sends every content whole, which the receiver accepts, checkpoint_wire.h)
// asks for content D from byte N on: the asking side kept the first N bytes of D from an
// earlier try whose connection broke in the middle of it ("Checkpoint transfers over a
// dropped link"). A digest not in `offsets` is sent from its start.
//
// The answer is untrusted input for the side that sends the contents: parse_checkpoint_want
// refuses, with one line, a digest the manifest does not name or names twice, an offset for a
// digest not asked for, and an offset that is not an integer or lies beyond the content's
// size (an offset equal to the size asks for nothing more: one empty chunk at that offset).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "peer/checkpoint_manifest.h"

namespace cairn {

struct WantedContent {
  std::string sha256;
  uint64_t from = 0;  // the first byte to send (0: all of it)
};

// The message asking for `wanted` (offsets only for those that have one).
Json checkpoint_want_message(const std::vector<WantedContent>& wanted);

struct WantedFile {
  const WireFile* file = nullptr;  // into the manifest given to parse_checkpoint_want
  uint64_t from = 0;               // <= file->size
};

// The contents `m` asks for, in its order, checked against `manifest` (which must outlive
// the result). kBadInput with one line on the first fault.
Result<std::vector<WantedFile>> parse_checkpoint_want(const Json& m, const WireManifest& manifest);

}  // namespace cairn
