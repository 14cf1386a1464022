// The peers of `cairn run` and `cairn resume` (docs/peers.md "Placement"): `--peers`, else
// the config's `resources.peers`, each asked for its status (key, version, slots) before an
// experiment is created or resumed, all at once and bounded (10 s).
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "engine/config/config.h"
#include "engine/coordinator/machine_resources.h"
#include "peer/peer_address.h"

namespace cairn::cli {

struct RunPeers {
  std::vector<std::string> addresses;  // "host:port", in the order listed
  std::vector<PeerSlots> slots;        // what each answered (0 slots: it did not)
  std::vector<std::string> agents;     // each one's agent id ("" when it did not answer)
  // Without require_all, one line per peer that did not answer ("cannot connect to …; its
  // slots are not used until it answers"), not printed: the coordinator that goes on says
  // the same when it connects, so a caller prints them only when it stops before that.
  std::vector<std::string> warnings;
};

// `listed` is --peers as given ("" when not given); the config's resources.peers otherwise.
// `require_all` (run): a peer that does not answer with our key and version is an error
// (exit 2, nothing created). Otherwise (resume) it is one of RunPeers::warnings, and the
// coordinator keeps trying it.
Result<RunPeers> check_run_peers(const std::string& listed, const ExperimentConfig& config,
                                 const std::string& key_file, bool require_all);

// --peers without its "auto" items (comma-separated, blanks trimmed), and whether there was
// one: `cairn peers` and `cairn run` read the list the same way.
std::string peers_without_auto(const std::string& peers, bool* has_auto);

// "10.0.0.5:7070" for every IPv4 address `address` resolves to: how a discovered peer that
// was also listed is recognised (and taken once, as listed).
std::vector<std::string> numeric_peer_names(const PeerAddress& address);

// The same for addresses already parsed (a resume's recorded peers).
Result<RunPeers> check_peer_addresses(const std::vector<std::string>& addresses,
                                      const std::string& key_file, bool require_all);

}  // namespace cairn::cli
