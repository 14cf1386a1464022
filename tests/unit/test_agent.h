// An AgentServer (peer/agent_server.h) serving on 127.0.0.1, at a port the system picked,
// from a thread of its own until destroyed (SIGTERM through a pipe, as a SignalPipe sends
// it): the in-process agent the peer unit tests talk to over a real TLS connection.
#pragma once

#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <functional>
#include <memory>
#include <thread>
#include <utility>

#include "common/file_util.h"
#include "peer/agent_server.h"
#include "peer/cluster_key.h"
#include "peer/peer_address.h"
#include "peer/tls_session.h"

namespace cairn::testing {

class TestAgent {
 public:
  // `hosts` runs ranks (none: launches are refused); `setup` may add to the server before
  // it serves (a request handler).
  TestAgent(const ClusterKey& key, AgentInfo info, RankHostFactory hosts = {},
            const std::function<void(AgentServer&)>& setup = {}) {
    int fds[2];
    REQUIRE(::pipe2(fds, O_NONBLOCK | O_CLOEXEC) == 0);
    signal_read_.reset(fds[0]);
    signal_write_.reset(fds[1]);
    auto listener = listen_on(PeerAddress{"127.0.0.1", 0});
    REQUIRE(listener.ok());
    port_ = local_port(listener->get());
    auto tls = TlsContext::make(TlsContext::Side::kServer, key);
    REQUIRE(tls.ok());
    server_ = std::make_unique<AgentServer>(std::move(*listener), *tls, std::move(info),
                                            std::move(hosts));
    if (setup) setup(*server_);
    thread_ = std::thread([this] { (void)server_->serve(signal_read_.get()); });
  }
  ~TestAgent() {
    const char sig = SIGTERM;
    (void)!::write(signal_write_.get(), &sig, 1);
    thread_.join();
  }
  TestAgent(const TestAgent&) = delete;
  TestAgent& operator=(const TestAgent&) = delete;

  PeerAddress address() const { return PeerAddress{"127.0.0.1", port_}; }

 private:
  UniqueFd signal_read_, signal_write_;
  uint16_t port_ = 0;
  std::unique_ptr<AgentServer> server_;
  std::thread thread_;
};

}  // namespace cairn::testing
