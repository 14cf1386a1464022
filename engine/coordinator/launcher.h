// Where a trial's rank runs. The coordinator's lifecycle code (start a gang, stop it, turn
// exits into states) talks to ranks only through this interface: the local launcher starts
// processes on this machine; the peers issue adds one that starts them on another machine
// through its agent, without touching the lifecycle code.
//
// Output: whichever machine runs a rank, its stdout and stderr end up appended to a file on
// this machine (RankLaunch::output), which the coordinator follows (output_tail.h). A local
// rank writes the file itself; a remote launcher writes what its agent relays. So output,
// logs and failure reports need nothing from the launcher.
//
// Not thread-safe: the coordinator's event loop is the only caller.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/coordinator/trial_process.h"

namespace cairn {

struct AgentEndpoint;  // peer/checkpoint_client.h
struct RunSource;      // run_shipping.h

// What starting one rank needs. `env` is its complete environment (rank_environment.h);
// `argv` goes to execve as is, never through a shell.
struct RankLaunch {
  std::vector<std::string> argv;
  std::filesystem::path cwd;
  std::map<std::string, std::string> env;
  std::filesystem::path output;  // stdout+stderr are appended here
  // Which machine runs it (slot_pool.h's SlotRef::machine: 0 is this one). A launcher of one
  // machine ignores it; machine_launchers.h routes by it.
  int machine = 0;
  // What `cwd` holds, for a launcher on another machine to ship there (run_shipping.h);
  // null for an experiment without a snapshot.
  std::shared_ptr<const RunSource> source;
  // argv[0] is this cairn binary (builtin:mlp): a launcher on another machine runs the cairn
  // binary there instead, whose path may differ (rank_messages.h "program").
  bool self_program = false;
};

// A started rank, as its launcher names it. `pid` is unique among the launcher's running
// ranks; with `start_time` it identifies a local process beyond pid reuse, which is what a
// resumed coordinator checks to find ranks that outlived their coordinator.
struct LaunchedRank {
  pid_t pid = -1;
  uint64_t start_time = 0;
};

struct RankExit {
  LaunchedRank rank;
  ExitInfo info;
  // The rank was lost with its machine (the connection to its agent broke), which is not the
  // trial's doing: the coordinator restarts the gang elsewhere without charging max_restarts.
  bool machine_lost = false;
};

class Launcher {
 public:
  virtual ~Launcher() = default;
  // What ranks started later will run from (RankLaunch::source): a launcher on another
  // machine may begin getting it there now, so that the first start() waits less. Never
  // blocks.
  virtual void prepare(const std::shared_ptr<const RunSource>& source) { (void)source; }
  // Starts one rank. An error says why it could not start (a missing program, a directory
  // that cannot be created); nothing is left running then.
  virtual Result<LaunchedRank> start(const RankLaunch& launch) = 0;
  // Sends `sig` to the rank and to everything it started. Returns false when the rank had
  // already ended (not yet reported by take_exits): the signal is not what ended it.
  virtual bool signal(const LaunchedRank& rank, int sig) = 0;
  // The ranks that ended since the last call, each once, with how they ended. Never blocks;
  // the coordinator calls it whenever its loop wakes (a local rank's end wakes it through
  // SIGCHLD). Whatever a rank left running is killed before its end is reported.
  virtual std::vector<RankExit> take_exits() = 0;
  // The output files (RankLaunch::output) this launcher made since the last call. A launcher
  // that writes a rank's output itself (a remote rank's, relayed by its agent) makes the file
  // only when the first byte arrives: most short trials print nothing, and a file and its
  // directory per trial were a third of the coordinator's time per trial on an agent. The
  // coordinator starts following each file named here (output_tail.h); the loop is woken as
  // for an exit. A launcher whose ranks write their own files names none.
  virtual std::vector<std::filesystem::path> take_new_outputs() { return {}; }
  // The agent that runs `rank`, to which its checkpoints travel over the wire
  // (peer/checkpoint_client.h); nullptr for a rank of this machine.
  virtual const AgentEndpoint* agent_of(const LaunchedRank& rank) const { return nullptr; }
  // The machine behind this launcher is gone (its agent's connection broke): nothing starts
  // there any more, and its ranks come out of take_exits() with machine_lost. A launcher of
  // this machine is never lost.
  virtual bool lost() const { return false; }
  // Why, in one line, once lost() ("gpu2:7070: no heartbeat for 10 s").
  virtual std::string lost_reason() const { return ""; }
  // Why this machine cannot run this experiment's ranks at all, once a start found out (its
  // data differs from what the experiment recorded, its copy of the code was refused); ""
  // while nothing says so. The coordinator then keeps every trial off it.
  virtual std::string refuses_run() const { return ""; }
  // Asked before a trial is placed on this machine (every time; only the first call may
  // wait): whether it can run the experiment prepare() named. An agent answers its
  // data_check (asked from prepare(), on a thread of its own), so a machine that lacks the
  // data is left out before any start is spent there; Failed with the agent's one line, which
  // refuses_run() then says too. Ok where nothing is known against it (this machine, no
  // data to check, the question could not be asked: the start finds out).
  virtual Status check_run() { return Status::Ok(); }
  // Whether this launcher's machine can open a TCP connection to host:port (bounded, a few
  // seconds): how a gang over machines checks that every machine reaches rank 0 before it
  // starts. A launcher of this machine leaves that to the caller (Ok).
  virtual Status reach(const std::string& host, uint16_t port) {
    (void)host;
    (void)port;
    return Status::Ok();
  }
  // A port free on this launcher's machine, listening there until release_master_port(): the
  // MASTER_PORT of a gang whose rank 0 runs on that machine (peer/master_ports.h). A launcher
  // of this machine leaves that to the caller.
  virtual Result<uint16_t> hold_master_port() { return Status::Failed("not an agent"); }
  virtual void release_master_port(uint16_t port) { (void)port; }
};

}  // namespace cairn
