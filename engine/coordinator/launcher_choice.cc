#include "engine/coordinator/launcher_choice.h"

#include <future>

#include "engine/coordinator/local_launcher.h"
#include "peer/key_location.h"
#include "peer/peer_address.h"

namespace cairn {

namespace {

// An agent that could not be had: nothing starts there, and it counts as lost.
class UnavailableLauncher final : public Launcher {
 public:
  explicit UnavailableLauncher(Status why) : why_(std::move(why)) {}
  Result<LaunchedRank> start(const RankLaunch&) override { return why_; }
  bool signal(const LaunchedRank&, int) override { return false; }
  std::vector<RankExit> take_exits() override { return {}; }
  bool lost() const override { return true; }
  std::string lost_reason() const override { return why_.message(); }

 private:
  Status why_;
};

constexpr auto kConnectTime = std::chrono::seconds(10);

}  // namespace

Result<std::unique_ptr<RemoteLauncher>> reconnect_agent(const std::string& address,
                                                        const std::string& key_file) {
  auto parsed = parse_peer_address(address);
  if (!parsed.ok()) return parsed.status();
  auto key = find_cluster_key(key_file);
  if (!key.ok()) return key.status();
  auto tls = TlsContext::make(TlsContext::Side::kClient, *key);
  if (!tls.ok()) return tls.status();
  return RemoteLauncher::connect(*parsed, *tls, kConnectTime, /*reap_local_children=*/false);
}

Machines connect_machines(MachineInfo local, const std::vector<std::string>& peers,
                          const std::string& key_file) {
  Machines machines;
  machines.launchers = std::make_unique<MachineLaunchers>(std::make_unique<LocalLauncher>());
  machines.info.push_back(std::move(local));
  // All at once: a silent agent costs the bound once, not once per agent.
  std::vector<std::future<Result<std::unique_ptr<RemoteLauncher>>>> connecting;
  for (const std::string& address : peers)
    connecting.push_back(std::async(std::launch::async, reconnect_agent, address, key_file));
  for (size_t i = 0; i < peers.size(); ++i) {
    MachineInfo info;
    info.address = peers[i];
    auto launcher = connecting[i].get();
    if (!launcher.ok()) {
      machines.warnings.push_back(launcher.status().message());
      machines.launchers->add(std::make_unique<UnavailableLauncher>(launcher.status()));
      machines.info.push_back(std::move(info));
      continue;
    }
    const RemoteLauncher::Offer& offer = (*launcher)->offer();
    info.slots = offer.slots;
    info.gpu_names = offer.gpu_names;
    info.reach_address = offer.agent_address;
    if (machines.info[0].reach_address.empty())
      machines.info[0].reach_address = offer.local_address;
    machines.launchers->add(std::move(*launcher));
    machines.info.push_back(std::move(info));
  }
  return machines;
}

}  // namespace cairn
