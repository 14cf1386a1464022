// File contents on a peer connection (docs/peers.md "Checkpoints over the wire"): an object
// of the checkpoint's manifest (checkpoint_manifest.h) travels as chunks, in order, at least
// one per object (an empty file is one empty chunk). A chunk is a frame
//   {"type": "checkpoint_chunk", "sha256": D, "offset": O, "bytes": N}
// followed by N raw content bytes, N at most kChunkBytes (1 MiB, the frame bound): the
// content is not JSON-escaped or base64-encoded, which would cost more than TLS itself. The
// receiver checks every chunk header against what it asked for (digest, offset, the
// manifest's size) before it reads the bytes, and the content against its SHA-256 before
// it keeps anything.
//
// Thread-safety: pure functions over the connection they are given (one thread at a time).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "peer/peer_connection.h"

namespace cairn {

inline constexpr size_t kChunkBytes = 1 << 20;
// Each frame of a transfer has this long to arrive or leave: a stalled peer ends the
// transfer, however large the checkpoint.
inline constexpr auto kChunkTime = std::chrono::seconds(60);

// Sends the `size` bytes of `fd` from byte `from` on (0: all of it; an earlier try's receiver
// kept the bytes before `from`, checkpoint_want's "offsets") as the content of `digest`.
// Adds the content bytes sent to *counted. kIo when the file is shorter than `size` (it
// changed). REQUIRES: from <= size (the caller checked the untrusted offset:
// parse_checkpoint_want, checkpoint_want.h). A resume at `size` sends one empty chunk there.
Status send_content(PeerConnection& peer, int fd, const std::string& digest, uint64_t size,
                    uint64_t* counted, uint64_t from = 0);

// Receives the content of `digest`, `size` bytes, writing it to `out_fd` and hashing it as it
// comes; with `sync`, fsyncs `out_fd` once it is complete. kBadInput (one line) for a chunk
// that is not the next one expected or content that does not hash to `digest`; kFailed when
// the peer sent an error instead (its reason).
//
// `kept`: `out_fd` already holds the content's first `kept` bytes (an earlier try's, whose
// connection broke; the sender was asked for the rest). The first chunk then starts at
// `kept` — the kept bytes are read back and hashed with the rest, so the digest compared is
// the whole content's — or at 0, from a sender that predates resuming (it ignores the
// request's offsets): the kept bytes are dropped and the content received whole. *counted
// counts the bytes that crossed the wire only.
Status receive_content(PeerConnection& peer, const std::string& digest, uint64_t size, int out_fd,
                       bool sync, uint64_t* counted, uint64_t kept = 0);

// The next frame, which must come within kChunkTime: a closed connection is an error here.
Result<Json> receive_frame(PeerConnection& peer);

}  // namespace cairn
