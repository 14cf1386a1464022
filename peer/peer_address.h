// Peer addresses as users write them — "host:port", "host" (port 7070), "[::1]:7070" — and
// the sockets behind them: listening, connecting within a deadline, naming the other end.
//
// Thread-safety: pure functions and values; the socket functions use only their arguments.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/file_util.h"
#include "common/status.h"

namespace cairn {

inline constexpr uint16_t kDefaultAgentPort = 7070;

struct PeerAddress {
  std::string host;  // as written, without brackets
  uint16_t port = kDefaultAgentPort;
  std::string text() const;  // "host:port", "[v6]:port"
};

// kBadInput with one line naming `text` when it is not [host][:port] with a port 0..65535.
// An empty host (":7070") means every address when listening, and port 0 any free port.
Result<PeerAddress> parse_peer_address(const std::string& text);

// A comma-separated list ("a:7070,b"), empty items skipped; the first bad one is the error.
Result<std::vector<PeerAddress>> parse_peer_list(const std::string& text);

// Whether every address `host` resolves to is a loopback address (127/8, ::1). kBadInput when
// it does not resolve. An empty host (every interface) is not loopback.
Result<bool> is_loopback_host(const std::string& host);

// A listening TCP socket (SO_REUSEADDR, close-on-exec, non-blocking) on `address`'s first
// resolved address; "" listens on every IPv6 and IPv4 address.
Result<UniqueFd> listen_on(const PeerAddress& address, int backlog = 64);

// The port a listening socket got (for port 0).
uint16_t local_port(int fd);

// A connected, non-blocking TCP socket to `address`, trying each resolved address until
// `deadline`. kFailed with one line ("cannot connect to host:port: Connection refused",
// "… timed out after 5 s") otherwise.
Result<UniqueFd> connect_to(const PeerAddress& address,
                            std::chrono::steady_clock::time_point deadline);

// "127.0.0.1:53412", "[::1]:53412": the other end of a connected socket.
std::string remote_name(int fd);

// The numeric hosts of this end and of the other end of a connected socket ("10.0.0.2",
// "fe80::1": no port, no brackets); "" when the socket has none.
std::string local_host(int fd);
std::string remote_host(int fd);

}  // namespace cairn
