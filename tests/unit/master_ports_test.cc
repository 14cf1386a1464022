// MASTER_PORT held by rank 0's agent (peer/master_ports.h): a held port listens on this
// machine — a connection to it completes — until it is released, and can then be bound by
// rank 0; the agent's requests answer it, and refuse nothing else.
#include <doctest/doctest.h>

#include "peer/master_ports.h"
#include "peer/peer_address.h"
#include "peer/route_probe.h"

namespace cairn {
namespace {

TEST_CASE("master ports: held listening until released, then free to bind") {
  MasterPorts ports;
  auto port = ports.hold();
  REQUIRE(port.ok());
  CHECK(*port > 0);
  CHECK(ports.held() == 1);
  // The others' probe reaches it while it is held.
  CHECK(probe_tcp(PeerAddress{"127.0.0.1", *port}, kProbeTimeout).ok());
  CHECK_FALSE(listen_on(PeerAddress{"127.0.0.1", *port}).ok());  // not free: held
  CHECK(ports.release(*port));
  CHECK_FALSE(ports.release(*port));
  CHECK(ports.held() == 0);
  // Rank 0 binds it now.
  auto rank0 = listen_on(PeerAddress{"", *port});
  CHECK(rank0.ok());
  auto other = ports.hold();
  REQUIRE(other.ok());
  CHECK(*other != *port);
}

TEST_CASE("master ports: the agent's requests") {
  MasterPorts ports;
  auto held = answer_master_port(ports, Json{{"type", "master_port"}}, "test");
  REQUIRE(held.has_value());
  CHECK((*held)["type"] == "master_port");
  const uint64_t port = (*held)["port"].get<uint64_t>();
  CHECK(probe_tcp(PeerAddress{"127.0.0.1", static_cast<uint16_t>(port)}, kProbeTimeout).ok());
  auto released =
      answer_master_port(ports, Json{{"type", "master_port_release"}, {"port", port}}, "test");
  REQUIRE(released.has_value());
  CHECK((*released)["held"] == true);
  // A port it no longer holds, or no port: answered, nothing released.
  for (const Json& bad : {Json(port), Json("x"), Json(-1), Json(70000)}) {
    auto again =
        answer_master_port(ports, Json{{"type", "master_port_release"}, {"port", bad}}, "test");
    REQUIRE(again.has_value());
    CHECK((*again)["held"] == false);
  }
  CHECK_FALSE(answer_master_port(ports, Json{{"type", "status"}}, "test").has_value());
}

}  // namespace
}  // namespace cairn
