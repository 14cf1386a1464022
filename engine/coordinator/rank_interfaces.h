// The network interface each rank of a gang split over machines binds its collectives to.
// Gloo and NCCL bind what the host name resolves to unless GLOO_SOCKET_IFNAME /
// NCCL_SOCKET_IFNAME name an interface — on many machines loopback or a docker bridge, and
// the ranks of other machines then wait for ever. torchrun leaves the user to hunt for the
// right name on each machine; cairn asks each machine's routing table: the interface that
// routes to rank 0's machine (MASTER_ADDR). builtin:mlp reads the same variable.
//
// The coordinator sets them for the ranks on its own machine and the agent for the ranks it
// runs (each on its own machine, docs/peers.md "Data parallel across machines"); nothing is
// set when every rank runs on one machine (MASTER_ADDR is loopback then).
//
// Thread-safety: uses only its arguments (and sockets of its own).
#pragma once

#include <map>
#include <string>

#include "common/status.h"

namespace cairn {

inline constexpr const char* kCollectiveInterfaceVariables[] = {"GLOO_SOCKET_IFNAME",
                                                                "NCCL_SOCKET_IFNAME"};

// Sets each of kCollectiveInterfaceVariables that `env` does not set already (the user's
// choice stands) to the interface of this machine that routes to env's MASTER_ADDR.
// Nothing when MASTER_ADDR is unset or a loopback address. An error (one line) when no
// interface of this machine routes there: the rank could not reach rank 0.
Status set_collective_interfaces(std::map<std::string, std::string>& env);

// Whether `master_addr` can be rank 0's address for a gang split over machines: not an IPv6
// link-local address (fe80::/10, with or without a %scope). Such an address only means
// something with an interface of the machine that uses it: the scope cairn knows is the
// coordinator's interface name, and Gloo (builtin:mlp's and PyTorch's) hands each rank's
// own address to the others with its machine's interface index, which names another
// interface, or none, on theirs ("connect: Network is unreachable", or a wait for ever).
// The error is one line naming rank 0's machine and what to give the machines instead
// (docs/peers.md "A gang over IPv6").
Status check_gang_master_address(const std::string& master_addr, const std::string& machine);

}  // namespace cairn
