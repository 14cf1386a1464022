#include "cli/run_peers.h"

#include <signal.h>

#include "peer/agent_client.h"
#include "peer/key_location.h"

namespace cairn::cli {

Result<std::vector<std::string>> check_run_peers(const std::string& peers,
                                                 const std::string& key_file) {
  auto list = parse_peer_list(peers);
  if (!list.ok()) return Status::BadInput("--peers: " + list.status().message());
  if (list->empty()) return std::vector<std::string>();
  if (list->size() > 1)
    return Status::BadInput(
        "--peers: one agent only for now (placement over several machines is not built yet; "
        "docs/peers.md)");
  ::signal(SIGPIPE, SIG_IGN);  // the coordinator's SignalPipe does the same
  auto key = find_cluster_key(key_file);
  if (!key.ok()) return key.status();
  auto tls = TlsContext::make(TlsContext::Side::kClient, *key);
  if (!tls.ok()) return tls.status();
  const AgentStatus status = query_agent_status(
      list->front(), *tls, std::chrono::steady_clock::now() + std::chrono::seconds(10));
  if (status.failure != PeerFailure::kNone) return Status::BadInput("--peers: " + status.error);
  return std::vector<std::string>{list->front().text()};
}

}  // namespace cairn::cli
