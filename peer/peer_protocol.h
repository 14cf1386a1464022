// The peer protocol's version and its first exchange (docs/protocol.md "Peers"). After the
// TLS handshake the connecting side sends a hello frame, the agent answers with its own
// hello or with a refusal; nothing else is sent before. A hello is
//   {"type": "hello", "protocol": 1, "cairn": "0.1.0", "role": "coordinator"|"agent"}
// and its layout — like the frame layout (frame.h) — never changes, so two cairns of
// different protocol versions always understand enough of each other to refuse cleanly.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

#include "common/json.h"
#include "common/status.h"

namespace cairn {

// Bumped whenever a message changes meaning; peers of different versions refuse each other.
inline constexpr int64_t kPeerProtocolVersion = 1;

// This build's hello.
Json hello_message(const std::string& role);

// What a received hello says: the peer's protocol and cairn version.
struct PeerHello {
  int64_t protocol = 0;
  std::string cairn_version;
};

// The hello in `message`. kBadInput with one line when it is not a hello; kFailed with one
// line when its protocol is not kPeerProtocolVersion ("protocol version 2, this cairn speaks
// 1 (cairn 0.2.0 here 0.1.0): …"); `hello`, when given, is filled in either case so the
// caller can name the peer's version.
Status check_hello(const Json& message, PeerHello* hello = nullptr);

// A refusal sent instead of a reply: {"type": "refused", "reason": …}; its reason is one
// line. The agent adds "code" ("version_mismatch", "bad_request", "bad_frame") and, refusing
// a hello, its own "protocol" and "cairn" version.
Json refusal_message(const std::string& reason);

}  // namespace cairn
