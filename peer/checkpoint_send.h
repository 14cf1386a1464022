// The sending side of a checkpoint exchange once its manifest went out (docs/peers.md
// "Checkpoints over the wire", "Resuming a content"): the agent's answer to the fetch of a
// staged directory (agent_checkpoints.h) and to an orphan's fetch by a `cairn resume`
// (engine/coordinator/remote_orphans.h) are this one piece of code, so both send a content
// that an earlier try cut in the middle from the bytes the receiver kept.
//
// Thread-safety: a function over the connection and directory it is given (one thread per
// connection).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "common/status.h"
#include "peer/checkpoint_manifest.h"
#include "peer/peer_connection.h"

namespace cairn {

struct SentContents {
  size_t wanted = 0;           // contents the receiver asked for
  uint64_t content_bytes = 0;  // content bytes that crossed the wire (on failure too)
  size_t resumed = 0;          // contents sent from an offset (the receiver kept the start)
  uint64_t kept = 0;           // the bytes before those offsets
};

// ", 1 content resumed after 104857600 bytes kept" ("" when none), for the agent's log lines.
std::string resumed_text(size_t count, uint64_t kept);

// Reads the receiver's checkpoint_want, checks it against `manifest` before any file is read
// (parse_checkpoint_want, checkpoint_want.h: a digest the manifest does not name, or names
// twice, an offset beyond a content), and sends each content asked for, from the offset asked,
// read from its file below `dir` (open_beneath: no link followed). Errors, one line each:
// kBadInput: the answer is refused (off the protocol, or no checkpoint_want; the caller
// answers an error); kNotFound: a file vanished since the manifest was made; anything else:
// the connection's (it broke, or the file shrank while it was sent). *sent counts what went.
Status send_wanted_contents(PeerConnection& peer, const WireManifest& manifest,
                            const std::filesystem::path& dir, SentContents* sent);

}  // namespace cairn
