// engine/coordinator/rank_interfaces.h: which MASTER_ADDR a gang over machines may use, and
// the interface named towards it (loopback: none). The gang over real links is
// tests/e2e/test_peers_interfaces.py (IPv4) and test_peers_gang6.py (IPv6).
#include "engine/coordinator/rank_interfaces.h"

#include <doctest/doctest.h>

namespace cairn {

TEST_CASE("rank_interfaces: a link-local MASTER_ADDR is refused for a gang over machines") {
  for (const char* scoped : {"fe80::1", "fe80::e0fb:55ff:fe23:b12b%eth0", "FE80::2%3", "febf::1"}) {
    Status st = check_gang_master_address(scoped, "[fe80::1%eth0]:7070");
    CHECK_FALSE(st.ok());
    CHECK(st.message().find("link-local address " + std::string(scoped)) != std::string::npos);
    CHECK(st.message().find("rank 0's machine ([fe80::1%eth0]:7070)") != std::string::npos);
    CHECK(st.message().find('\n') == std::string::npos);
  }
  // Unique local, global, IPv4 (also IPv4 link-local: no scope), loopback, names: fine.
  for (const char* fine : {"fd81::1", "2001:db8::7", "10.0.0.1", "169.254.3.4", "127.0.0.1", "::1",
                           "fec0::1", "gpu-box-2", ""})
    CHECK(check_gang_master_address(fine, "m").ok());
}

TEST_CASE("rank_interfaces: loopback or no MASTER_ADDR names no interface") {
  for (const char* loopback : {"127.0.0.1", "::1"}) {
    std::map<std::string, std::string> env{{"MASTER_ADDR", loopback}};
    CHECK(set_collective_interfaces(env).ok());
    CHECK(env.count("GLOO_SOCKET_IFNAME") == 0);
    CHECK(env.count("NCCL_SOCKET_IFNAME") == 0);
  }
  std::map<std::string, std::string> none;
  CHECK(set_collective_interfaces(none).ok());
  CHECK(none.empty());
}

}  // namespace cairn
