// Ranks on another machine, through its agent (docs/peers.md "Running ranks"): the Launcher
// of launcher.h over one authenticated connection (peer/agent_client.h). start() sends a
// launch and returns without waiting for the answer (a restore it needs first runs on a
// thread, and the launch is sent when it is durable there); a refused launch ends the rank
// with exit status 127 and the agent's reason in its output. The agent's output frames are appended
// to the rank's local output file (RankLaunch::output), which the coordinator follows as it
// follows a local rank's; the file (and its directory) is made when the first byte arrives,
// and named by take_new_outputs() then. Exit frames become take_exits()'s RankExits.
//
// A remote rank has no local process: its LaunchedRank has a pid below -1 (unique among
// this launcher's ranks; no pid of this machine, so nothing that signals or probes pids can
// touch a local process by mistake) and start_time 0.
//
// The working directory: with RankLaunch::source (an experiment with a snapshot), the
// agent's copy of the run directory, shipped over a connection of its own from prepare()
// on, in the background (run_shipping.h; the first start() of that run waits for what is
// left of it);
// without, "trials/<CAIRN_TRIAL_ID>/rank-<RANK>" below the agent's DIR/work, and argv must
// name what exists on the agent.
//
// The ranks' control channels travel over the same connection (peer/control_relay.h): the
// agent gives the ranks of the connection one socket, tells their connections apart by the
// process they come from, and each connection a rank opens there is connected here to the
// CAIRN_CONTROL the coordinator gave the rank. The variables that
// name this machine's paths are sent as kinds, for the agent to fill in
// (remote_paths.h).
//
// One thread owns the connection (OpenSSL's connection objects are not shared between
// threads); the coordinator's calls hand it work and read its results under a mutex, and wake it
// through a pipe (it waits in poll() on the agent, the control streams and that pipe). When a
// rank ends, that thread sends this process SIGCHLD, which wakes the coordinator's loop as
// a local rank's end does, so take_exits() is called. take_exits() also reaps any local
// child that ended (the local launcher does that for children that are not ranks).
//
// Checkpoints (docs/peers.md "Checkpoints over the wire"): a rank launched with
// CAIRN_LATEST_CHECKPOINT gets that checkpoint restored on the agent first
// (peer/checkpoint_client.h push_checkpoint: only the content the agent's cache lacks
// travels), and the variable names the agent's copy. The restore runs on a thread of its
// own, never on the coordinator's loop: start() returns at once, the launch is sent only once
// the checkpoint is durable on the agent, a restore that fails ends the rank as a refused
// launch does (exit status 127, the reason as its last output line), and a rank signalled
// while its restore runs ends by that signal and is never launched.
//
// Thread-safety: start, signal and take_exits from one thread (the coordinator's loop).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "engine/coordinator/launcher.h"
#include "engine/coordinator/remote_adoption.h"
#include "peer/peer_address.h"
#include "peer/tls_session.h"

namespace cairn {

// A connection that hears nothing from its agent for this long (it answers a heartbeat
// asked every second) is lost: its ranks come out of take_exits() with machine_lost.
// CAIRN_HEARTBEAT_TIMEOUT (seconds) changes it. A connection that breaks is resumed on a
// new one within this time (remote_session.h): nothing is lost then; an agent that answers
// that the session is no more (it was restarted) is lost at once.
inline constexpr std::chrono::milliseconds kDefaultHeartbeatTimeout{10000};

class RemoteLauncher final : public Launcher {
 public:
  // Connects to the agent at `address`, says hello and asks its status, within `timeout`. The error
  // is one line naming the address (a key mismatch, unreachable, another version).
  // `reap_local_children`: whether take_exits() reaps this process's ended children (what
  // the coordinator needs; false where an agent runs in the same process, as in tests).
  static Result<std::unique_ptr<RemoteLauncher>> connect(const PeerAddress& address,
                                                         std::shared_ptr<TlsContext> client,
                                                         std::chrono::milliseconds timeout,
                                                         bool reap_local_children = true);
  // Says goodbye and closes the connection; the agent kills what still runs.
  ~RemoteLauncher() override;

  void prepare(const std::shared_ptr<const RunSource>& source) override;
  Result<LaunchedRank> start(const RankLaunch& launch) override;
  bool signal(const LaunchedRank& rank, int sig) override;
  std::vector<RankExit> take_exits() override;
  // The output files made since the last call: a rank's when its first byte arrived.
  std::vector<std::filesystem::path> take_new_outputs() override;
  // Every rank of this launcher runs on its agent.
  const AgentEndpoint* agent_of(const LaunchedRank& rank) const override;
  bool lost() const override;
  std::string lost_reason() const override;
  std::string refuses_run() const override;
  Status check_run() override;
  // Asks the agent to connect to host:port from its machine (its "probe" request).
  Status reach(const std::string& host, uint16_t port) override;
  // Asks the agent for a port free on its machine, held listening until released (its
  // "master_port" request; peer/master_ports.h). The release travels before any later launch.
  Result<uint16_t> hold_master_port() override;
  void release_master_port(uint16_t port) override;

  // What the agent said it offers when connected (its status answer), and this side's
  // address on the connection (the address the agent's machine reaches this one by).
  struct Offer {
    int slots = 0;
    std::vector<std::string> gpu_names;  // "0", "1", … for its gpu0, gpu1, …; empty: CPU slots
    std::string local_address;           // this end of the connection ("10.0.0.1")
    std::string agent_address;           // the agent's end, as connected ("10.0.0.2")
  };
  const Offer& offer() const;

  // A `cairn resume` (remote_adoption.h): the ranks the agent kept for this experiment after
  // its coordinator died, offered for adoption (empty when none, or when not resuming).
  const std::vector<KeptRank>& kept() const;
  // Takes kept rank `id` as one of this launcher's running ranks without starting anything:
  // its output is appended to `output`, its control streams reach `control`. An error when
  // it is not a kept rank that runs, or was taken already.
  Result<LaunchedRank> adopt(int64_t id, const std::string& control,
                             const std::filesystem::path& output);
  // Tells the agent which kept ranks were taken (it kills the others, then relays on); once,
  // before anything starts on this connection. Nothing when the agent kept nothing.
  void end_adoption();

  struct State;

 private:
  explicit RemoteLauncher(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace cairn
