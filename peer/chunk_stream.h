// Bulk bytes over a peer connection (code packs, data files): after a request that says
// how many bytes follow, the bytes travel as frames {"type": "chunk", "data": BASE64} of at
// most kShipChunkBytes each (well inside the 1 MiB frame bound once encoded), in order.
//
// Thread-safety: pure functions over the connection, which one thread uses at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "peer/control_frames.h"
#include "peer/peer_connection.h"

namespace cairn {

inline constexpr size_t kShipChunkBytes = 512 * 1024;

// base64_encode / base64_decode: peer/control_frames.h's.

// Sends `bytes` as chunk frames (none when empty).
Status send_chunks(PeerConnection& peer, std::string_view bytes, Deadline deadline);
// Sends what is left of `fd` from its offset, `size` bytes, as chunk frames.
Status send_file_chunks(PeerConnection& peer, int fd, uint64_t size, Deadline deadline);

// Receives chunk frames until `size` bytes have come, handing each piece to `sink`. When the
// sink fails, the rest of the stream is still read (and dropped), so the connection stays
// in step, and the sink's error is returned. A frame that is not a chunk, bad base64, more
// bytes than announced, or the peer closing is kBadInput "broken stream: …": the stream
// cannot be resynchronised. Each frame must come within `per_chunk` of the previous one.
Status receive_chunks(PeerConnection& peer, uint64_t size,
                      const std::function<Status(std::string_view)>& sink,
                      std::chrono::milliseconds per_chunk);

}  // namespace cairn
