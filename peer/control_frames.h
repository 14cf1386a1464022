// The frames that carry a rank's control channel (docs/protocol.md) through an agent's
// connection (docs/peers.md "The control channel through the agent"). Each connection a
// rank opens on the agent's Unix socket is one *stream*, named by an id the agent picks:
//
//   agent → coordinator   {"type": "control_open", "stream": S, "rank": K}
//   both ways             {"type": "control_data", "stream": S, "data": "<base64>"}
//   both ways             {"type": "control_ack", "stream": S, "bytes": N}
//   both ways             {"type": "control_close", "stream": S}
//
// `data` is at most kControlChunkBytes once decoded (about 87 KiB of base64, far inside a
// frame's bound). `control_ack` returns credit: N bytes of the stream's data were written
// to the socket at that end, so the sender may send N more (each direction of a stream has
// at most kControlWindowBytes in flight). These parsers read what an authenticated but
// possibly buggy or hostile peer sent: every field is checked, nothing is trusted.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/json.h"
#include "common/status.h"

namespace cairn {

inline constexpr size_t kControlChunkBytes = 64 * 1024;
inline constexpr size_t kControlWindowBytes = 256 * 1024;

struct ControlFrame {
  enum class Kind { kOpen, kData, kAck, kClose };
  Kind kind = Kind::kData;
  int64_t stream = 0;  // >= 1
  int64_t rank = 0;    // kOpen: the coordinator's name for the rank (rank_messages.h)
  std::string data;    // kData: decoded, 1..kControlChunkBytes bytes
  int64_t bytes = 0;   // kAck: 1..kControlWindowBytes
};

// Whether `type` is one of the four (such a frame goes to parse_control_frame).
bool is_control_frame_type(std::string_view type);

// The frame in `message`, or kBadInput with one line (a missing or mistyped field, a stream
// id that is not a positive integer, data that is not base64 or is empty or over the chunk
// size, an ack outside 1..window).
Result<ControlFrame> parse_control_frame(const Json& message);

Json control_open_message(int64_t stream, int64_t rank);
Json control_data_message(int64_t stream, std::string_view data);
Json control_ack_message(int64_t stream, int64_t bytes);
Json control_close_message(int64_t stream);

// Standard base64 (RFC 4648 §4, with padding). decode: nullopt-like error on anything else.
std::string base64_encode(std::string_view bytes);
Result<std::string> base64_decode(std::string_view text);

}  // namespace cairn
