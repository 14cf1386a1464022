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

}  // namespace cairn
