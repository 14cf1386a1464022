// Frames: how messages travel inside a peer connection's TLS stream. A frame is a 4-byte
// big-endian length, then that many bytes of one JSON object with a string "type". The
// length is bounded (kMaxFrameBytes) and checked before any of the body is read or buffered,
// and the body is parsed as untrusted JSON (common/untrusted_json.h: nesting bounded), so a
// peer — even an authenticated one — cannot make the other end allocate without bound or
// recurse deeply. This layout is fixed for every protocol version: it is how two versions
// read each other's hello (peer_protocol.h) and refuse each other cleanly.
//
// Thread-safety: FrameDecoder is a value with no sharing; the functions are pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/json.h"
#include "common/status.h"

namespace cairn {

// The largest frame body. Control messages are far smaller; bulk data (code, checkpoints)
// will travel in chunks below it.
inline constexpr uint32_t kMaxFrameBytes = 1u << 20;
inline constexpr size_t kFrameHeaderBytes = 4;

// `message` as a frame. kBadInput when it is not an object with a string "type", or when
// its serialization exceeds kMaxFrameBytes.
Result<std::string> encode_frame(const Json& message);

// Splits a byte stream into messages. Feed it what arrives; take the messages with next().
// After an error the stream is unusable (the decoder keeps returning that error): the
// connection must be closed, as the frame boundaries are lost.
class FrameDecoder {
 public:
  // Bytes as they arrive, in order.
  void feed(std::string_view bytes);
  // The next complete message, nullopt when more bytes are needed, or kBadInput with one
  // line: a frame over the bound (its announced size named), a body that is not JSON or is
  // nested too deep, or not an object with a string "type".
  Result<std::optional<Json>> next();
  // How many bytes the decoder still needs before next() can return a message (at least 1
  // when it returned nullopt): lets a reader ask for no more than a frame's worth.
  size_t wanted() const;
  // Bytes held but not yet returned as messages.
  size_t buffered() const { return buffer_.size() - start_; }
  // Takes up to `n` of the bytes held, as they are: the raw payload that follows a message
  // announcing it (a checkpoint's content, peer/checkpoint_wire.h), which is not a frame.
  // Not after an error.
  size_t take_raw(char* out, size_t n);

 private:
  std::string buffer_;
  size_t start_ = 0;  // consumed prefix of buffer_
  std::optional<Status> error_;
};

}  // namespace cairn
