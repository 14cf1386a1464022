#include "engine/coordinator/launcher_choice.h"

#include "engine/coordinator/local_launcher.h"
#include "engine/coordinator/remote_launcher.h"
#include "peer/key_location.h"
#include "peer/peer_address.h"

namespace cairn {

namespace {

// Where the agent could not be had: every start says why.
class UnavailableLauncher final : public Launcher {
 public:
  explicit UnavailableLauncher(Status why) : why_(std::move(why)) {}
  Result<LaunchedRank> start(const RankLaunch&) override { return why_; }
  bool signal(const LaunchedRank&, int) override { return false; }
  std::vector<RankExit> take_exits() override { return {}; }

 private:
  Status why_;
};

constexpr auto kConnectTime = std::chrono::seconds(10);

}  // namespace

std::unique_ptr<Launcher> make_launcher(const std::vector<std::string>& peers,
                                        const std::string& key_file) {
  if (peers.empty()) return std::make_unique<LocalLauncher>();
  auto address = parse_peer_address(peers.front());
  if (!address.ok()) return std::make_unique<UnavailableLauncher>(address.status());
  auto key = find_cluster_key(key_file);
  if (!key.ok()) return std::make_unique<UnavailableLauncher>(key.status());
  auto tls = TlsContext::make(TlsContext::Side::kClient, *key);
  if (!tls.ok()) return std::make_unique<UnavailableLauncher>(tls.status());
  auto remote = RemoteLauncher::connect(*address, *tls, kConnectTime);
  if (!remote.ok()) return std::make_unique<UnavailableLauncher>(remote.status());
  return std::move(*remote);
}

}  // namespace cairn
