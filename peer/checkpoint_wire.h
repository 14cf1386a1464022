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

// Sends the `size` bytes of `fd` (read from its start) as the content of `digest`. Adds the
// content bytes sent to *counted. kIo when the file is shorter than `size` (it changed).
Status send_content(PeerConnection& peer, int fd, const std::string& digest, uint64_t size,
                    uint64_t* counted);

// Receives the content of `digest`, `size` bytes, writing it to `out_fd` and hashing it as it
// comes; with `sync`, fsyncs `out_fd` once it is complete. kBadInput (one line) for a chunk
// that is not the next one expected or content that does not hash to `digest`; kFailed when
// the peer sent an error instead (its reason).
Status receive_content(PeerConnection& peer, const std::string& digest, uint64_t size, int out_fd,
                       bool sync, uint64_t* counted);

// The next frame, which must come within kChunkTime: a closed connection is an error here.
Result<Json> receive_frame(PeerConnection& peer);

}  // namespace cairn
