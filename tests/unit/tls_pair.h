// Two ends of an authenticated TLS connection (PeerConnection) in one test process, over
// loopback: `accepted` is the agent's side (PeerConnection::accept), `connected` the
// coordinator's (PeerConnection::connect). Both handshakes complete before the constructor
// returns (bounded: 10 s), or the test fails.
#pragma once

#include <doctest/doctest.h>
#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <memory>
#include <thread>

#include "common/file_util.h"
#include "peer/cluster_key.h"
#include "peer/peer_address.h"
#include "peer/peer_connection.h"

namespace cairn::testing {

struct TlsPair {
  std::unique_ptr<PeerConnection> accepted, connected;

  explicit TlsPair(const ClusterKey& key) {
    using Clock = std::chrono::steady_clock;
    auto listener = listen_on(PeerAddress{"127.0.0.1", 0});
    REQUIRE(listener.ok());
    const uint16_t port = local_port(listener->get());
    auto server = TlsContext::make(TlsContext::Side::kServer, key);
    auto client = TlsContext::make(TlsContext::Side::kClient, key);
    REQUIRE(server.ok());
    REQUIRE(client.ok());
    Result<std::unique_ptr<PeerConnection>> c = Status::Failed("not connected");
    std::thread connecting([&] {
      c = PeerConnection::connect(PeerAddress{"127.0.0.1", port}, *client,
                                  Clock::now() + std::chrono::seconds(10));
    });
    UniqueFd fd;
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (!fd && Clock::now() < deadline) {
      pollfd p{listener->get(), POLLIN, 0};
      ::poll(&p, 1, 50);
      fd.reset(::accept4(listener->get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    }
    auto a =
        fd ? PeerConnection::accept(std::move(fd), *server, Clock::now() + std::chrono::seconds(10))
           : Result<std::unique_ptr<PeerConnection>>(Status::Failed("no connection"));
    connecting.join();
    REQUIRE(c.ok());
    REQUIRE(a.ok());
    accepted = std::move(*a);
    connected = std::move(*c);
  }
};

}  // namespace cairn::testing
