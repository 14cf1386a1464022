// The same-user rule of keyless peers (docs/peers.md "No key"). Without a cluster key both
// ends use the public no-key, which authenticates nothing, so a keyless agent listens on
// loopback only and each end checks that the other is its own user (socket_owner.h): the
// agent refuses a coordinator of another user, and a coordinator refuses another user's
// agent (which could be squatting the port to receive its code, data and checkpoints). With
// that, a keyless agent may run ranks and keep checkpoints: nothing crosses users.
//
// Thread-safety: functions of their arguments; used from each connection's own thread.
#pragma once

#include <string>

#include "common/status.h"
#include "peer/peer_address.h"
#include "peer/peer_connection.h"
#include "peer/tls_session.h"

namespace cairn {

// The agent's side, before the TLS handshake of an accepted connection `fd`: "" when the
// agent holds a key (the handshake decides) or the coordinator is this agent's user, else
// why not (one line).
std::string keyless_coordinator_refusal(const TlsContext& tls, int fd);

// The agent's side, after the handshake, for a connection refused above: logs the line,
// reads the coordinator's hello (bounded: so closing does not reset the refusal away), sends
// a refusal with code "other_user" and closes.
void refuse_other_user(PeerConnection& peer, const std::string& name, const std::string& why);

// The coordinator's side (`keyless`: it has no key), after the handshake and before
// anything is sent: Ok with a key,
// or when the keyless agent at the other end is this user's; else kFailed with one line
// naming `address`.
Status check_keyless_agent(bool keyless, const PeerConnection& peer, const PeerAddress& address);

}  // namespace cairn
