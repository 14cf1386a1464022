#include "engine/coordinator/remote_launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "common/file_util.h"
#include "engine/coordinator/placement_data_check.h"
#include "engine/coordinator/remote_paths.h"
#include "engine/coordinator/remote_session.h"
#include "engine/coordinator/restore_pushes.h"
#include "engine/coordinator/run_shipping.h"
#include "peer/agent_client.h"
#include "peer/checkpoint_client.h"
#include "peer/checkpoint_retry.h"
#include "peer/control_relay.h"
#include "peer/rank_messages.h"
#include "peer/route_probe.h"

namespace cairn {

namespace {

using Clock = std::chrono::steady_clock;

// How long connecting for a checkpoint's restore on the agent may take.
constexpr auto kLaunchTime = std::chrono::seconds(30);
// How often the connection's thread asks the agent for a heartbeat; the agent answers at
// once, so a connection with nothing heard for kHeartbeatTimeout is lost: an agent that
// hangs (SIGSTOP, a machine that froze) or a link that went silent without a reset.
constexpr auto kHeartbeatEvery = std::chrono::seconds(1);
// A session's connection that hears nothing for this long (and for half the heartbeat
// timeout) is replaced by a new one that resumes the session, while the timeout runs: a
// link that went silent (a NAT that forgot the connection, a cable pulled and put back)
// may take new connections when the old one never recovers.
constexpr auto kSilenceBeforeResume = std::chrono::milliseconds(2500);

std::string env_or(const std::map<std::string, std::string>& env, const char* name,
                   const std::string& fallback) {
  auto it = env.find(name);
  return it == env.end() || it->second.empty() ? fallback : it->second;
}

}  // namespace

struct RemoteLauncher::State {
  std::unique_ptr<PeerConnection> peer;
  std::string address;
  AgentEndpoint endpoint;  // for the connections that move checkpoints
  Offer offer;
  std::optional<RunShipper> shipper;  // code and data, over a connection of its own
  std::string run_refused;            // why the agent cannot run this run (refuses_run)
  std::future<Status> data_check;     // prepare()'s data_check, until check_run() takes it
  std::mutex probing;                 // one probe at a time
  std::condition_variable probed;     // a "probe" answer arrived (probe_answer)
  std::optional<Json> probe_answer;   // or a "master_port" answer (one request at a time)

  std::mutex mutex;
  std::deque<Json> outgoing;  // frames for the connection's thread
  std::set<int64_t> pending;  // launches not yet answered
  // Running ranks' output files (RankLaunch::output), each made and opened when its first
  // byte arrives (launcher.h take_new_outputs).
  struct Output {
    std::filesystem::path file;
    UniqueFd fd;
  };
  std::map<int64_t, Output> outputs;
  std::vector<std::filesystem::path> new_outputs;  // made since take_new_outputs()
  std::set<int64_t> running;                       // launched, exit not yet taken
  std::map<int64_t, std::string> control_targets;  // running ranks' CAIRN_CONTROL here
  std::unique_ptr<ControlRelay> control;           // the connection thread's
  UniqueFd wake_read, wake_write;                  // a byte: outgoing frames or stopping
  std::vector<RankExit> exits;
  std::optional<Status> broken;  // the connection failed: every rank is lost
  bool stopping = false;
  bool reap_local_children = true;
  std::chrono::milliseconds heartbeat_timeout = kDefaultHeartbeatTimeout;
  int64_t next_rank = 2;
  std::thread thread;
  // Ranks whose checkpoint is restored on the agent before their launch is sent, each on a
  // thread of its own (restore_then_launch): the coordinator's loop never waits for one.
  std::set<int64_t> restoring;
  struct Restore {
    std::thread thread;
    bool finished = false;  // under mutex
  };
  std::list<Restore> restores;
  RestorePushes pushes;  // one push per restore for the ranks of a gang on this agent
  // The agent's session for this connection (remote_session.h): "" when it has none.
  std::string session_id;
  SessionJournal journal;  // the connection thread's
  // A `cairn resume`'s adoption (remote_adoption.h): the agent's kept ranks, whether its
  // session waits for adopt_ranks, and the ranks taken so far.
  std::vector<KeptRank> kept;
  bool adopting = false;
  std::vector<int64_t> adopted;
  std::vector<int64_t> adopted_output_at;  // each one's output file size when adopted

  void loop();
  void fail_all(const Status& why);
  // Appends to rank `rank`'s output file, making it first (and its directory) if need be;
  // under mutex. A file that cannot be made or written loses those bytes, as a full disk
  // loses a local rank's; the next bytes try again.
  void write_output(int64_t rank, std::string_view bytes);
  void restore_then_launch(RemoteLaunch remote, std::string checkpoint, int64_t attempt);
  // The connection failed (`why`): resumed on a new one if the agent answers before the
  // heartbeat timeout counted from `last_heard`; else every rank is lost (fail_all). Whether
  // the loop goes on.
  bool resume_or_fail(const Status& why, Clock::time_point last_heard);
  void wake() {
    const char byte = 1;
    (void)!::write(wake_write.get(), &byte, 1);
  }
};

void RemoteLauncher::State::fail_all(const Status& why) {
  // On the connection's thread: the relayed control connections end with it, so the
  // coordinator sees its ranks' channels close.
  control->close_all();
  // Its checkpoint transfers stop trying, and those waiting on a connection to it (a hung
  // agent whose kernel still holds the connection open) let go now, not at the wire's
  // timeouts: the trial's next attempt waits for them (checkpoint_retry.h).
  endpoint.lost->store(true);
  endpoint.link_watch->release_all();
  std::lock_guard lock(mutex);
  broken = why;
  pending.clear();
  // A rank on a lost connection (started or still being launched) is gone (the agent kills it):
  // report it killed.
  for (int64_t rank : running) {
    ExitInfo info;
    info.signal = SIGKILL;
    exits.push_back({LaunchedRank{static_cast<pid_t>(-rank), 0}, info, /*machine_lost=*/true});
  }
  running.clear();
  outputs.clear();
  control_targets.clear();
  probed.notify_all();
  if (!exits.empty()) ::kill(::getpid(), SIGCHLD);
}

bool RemoteLauncher::State::resume_or_fail(const Status& why, Clock::time_point last_heard) {
  if (session_id.empty()) {
    fail_all(why);
    return false;
  }
  std::fprintf(stderr, "cairn: agent %s: the connection dropped (%s); resuming it\n",
               address.c_str(), why.message().c_str());
  for (;;) {
    {
      std::lock_guard lock(mutex);
      if (stopping) return false;
    }
    const auto now = Clock::now();
    const auto give_up = last_heard + heartbeat_timeout;
    if (now >= give_up) {
      std::string what = why.message();
      if (what.rfind(address + ": ", 0) == 0) what = what.substr(address.size() + 2);
      fail_all(Status::Failed(
          address + ": " + what + ", and it was not back within " +
          std::to_string(
              std::chrono::duration_cast<std::chrono::seconds>(heartbeat_timeout).count()) +
          " s"));
      return false;
    }
    bool gone = false;
    auto fresh = resume_remote_session(endpoint, session_id, journal,
                                       std::min(give_up, now + std::chrono::seconds(2)), &gone);
    if (fresh.ok()) {
      peer = std::move(*fresh);
      std::fprintf(stderr, "cairn: agent %s: connection resumed\n", address.c_str());
      return true;
    }
    if (gone) {  // the agent answered that the session is no more
      fail_all(Status::Failed(address + ": " + fresh.status().message()));
      return false;
    }
    // Not reachable yet: again shortly, but not past the give-up time, so the agent is
    // counted lost when its timeout runs out, not up to a retry period later (the wake
    // pipe ends the wait when stopping).
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        give_up - Clock::now() + std::chrono::milliseconds(1));
    pollfd p{wake_read.get(), POLLIN, 0};
    (void)::poll(&p, 1, static_cast<int>(std::clamp<int64_t>(left.count(), 0, 200)));
  }
}

void RemoteLauncher::State::loop() {
  auto last_heard = Clock::now();
  auto next_heartbeat = last_heard + kHeartbeatEvery;
  // On a failed connection: resumed (the loop goes on with the new one), or every rank lost.
  auto failed = [&](const Status& why) {
    if (!resume_or_fail(why, last_heard)) return false;
    last_heard = Clock::now();
    return true;
  };
  const auto silence_limit = std::max<std::chrono::milliseconds>(
      kSilenceBeforeResume, std::chrono::milliseconds(heartbeat_timeout.count() / 2));
  for (;;) {
    const auto now = Clock::now();
    if (!session_id.empty() && now - last_heard > silence_limit &&
        now - last_heard <= heartbeat_timeout) {
      const auto silent =
          std::chrono::duration_cast<std::chrono::milliseconds>(now - last_heard).count();
      // The checkpoint transfers through the same link would wait for their frames' 60 s
      // timeout: let go of them too, and they go on on new connections (checkpoint_retry.h).
      endpoint.link_watch->release_all();
      if (failed(Status::Failed(address + ": nothing heard for " + std::to_string(silent / 1000) +
                                "." + std::to_string(silent % 1000 / 100) + " s")))
        continue;
      return;
    }
    if (now - last_heard > heartbeat_timeout)
      return fail_all(Status::Failed(
          address + ": no heartbeat for " +
          std::to_string(
              std::chrono::duration_cast<std::chrono::seconds>(now - last_heard).count()) +
          " s"));
    if (now >= next_heartbeat) {
      next_heartbeat = now + kHeartbeatEvery;
      Json heartbeat{{"type", "heartbeat"}};
      // What this end has received, so the agent stops keeping it (session_journal.h).
      if (!session_id.empty()) heartbeat["received"] = journal.received_count();
      std::lock_guard lock(mutex);
      outgoing.push_back(std::move(heartbeat));
    }
    std::deque<Json> sending;
    {
      std::lock_guard lock(mutex);
      if (stopping) break;
      sending.swap(outgoing);
    }
    Status sent = Status::Ok();
    for (const Json& frame : sending) {
      // After a failure the rest go into the journal unsent: a resume sends them.
      if (sent.ok()) {
        sent = peer->send(frame, Clock::now() + std::chrono::seconds(30));
      } else if (!session_id.empty()) {
        if (auto encoded = encode_frame(frame); encoded.ok())
          journal.sent(frame, std::move(*encoded));
      }
    }
    // A frame that cannot be encoded (over the frame bound) is not a link that dropped.
    if (sent.kind() == ErrorKind::kBadInput)
      return fail_all(Status::Failed(address + ": " + sent.message()));
    if (!sent.ok()) {
      if (failed(Status::Failed(address + ": " + sent.message()))) continue;
      return;
    }
    auto message = control->receive(*peer, next_heartbeat, wake_read.get());
    if (!message.ok() && message.status().message() == "timed out") continue;
    if (!message.ok()) {
      // A frame that breaks the protocol is not a link that dropped.
      if (message.status().kind() == ErrorKind::kBadInput)
        return fail_all(Status::Failed(address + ": " + message.status().message()));
      if (failed(Status::Failed(address + ": " + message.status().message()))) continue;
      return;
    }
    if (!message->has_value()) {
      // A clean close or a link cut between frames look alike here; the agent says goodbye
      // when it stops.
      if (failed(Status::Failed(address + ": the agent closed the connection"))) continue;
      return;
    }
    last_heard = Clock::now();
    if ((**message).value("type", "") == "goodbye")
      return fail_all(Status::Failed(address + ": the agent stopped"));
    const Json& m = **message;
    const std::string type = m["type"].get<std::string>();
    const int64_t rank =
        m.value("rank", Json()).is_number_integer() ? m["rank"].get<int64_t>() : -1;
    std::lock_guard lock(mutex);
    if (type == "probe" || type == "master_port" || (type == "error" && rank < 0)) {
      probe_answer = m;
      probed.notify_all();
    } else if (type == "launched") {
      pending.erase(rank);
    } else if (type == "error" && pending.count(rank)) {
      pending.erase(rank);
      const std::string reason = m.value("reason", std::string("refused")).substr(0, 500);
      write_output(rank, "cairn: agent " + address + ": " + reason + "\n");
      ExitInfo info;
      info.code = 127;  // as a shell reports a command it could not run
      exits.push_back({LaunchedRank{static_cast<pid_t>(-rank), 0}, info});
      running.erase(rank);
      outputs.erase(rank);
      control_targets.erase(rank);
      ::kill(::getpid(), SIGCHLD);
    } else if (type == "output") {
      if (auto bytes = output_bytes(m); bytes.ok()) write_output(rank, *bytes);
    } else if (type == "exit" && running.count(rank)) {
      ExitInfo info;
      info.code = m.value("code", 0);
      info.signal = m.value("signal", 0);
      exits.push_back({LaunchedRank{static_cast<pid_t>(-rank), 0}, info});
      running.erase(rank);
      outputs.erase(rank);
      control_targets.erase(rank);
      ::kill(::getpid(), SIGCHLD);  // wakes the coordinator's loop (launcher.h)
    }
  }
}

RemoteLauncher::RemoteLauncher(std::unique_ptr<State> state) : state_(std::move(state)) {
  State* s = state_.get();
  // A stream the agent opens for a rank reaches the control socket that rank was given
  // here; a rank that is not running gets none.
  s->control = ControlRelay::for_coordinator(
      [s](int64_t rank) {
        std::lock_guard lock(s->mutex);
        auto it = s->control_targets.find(rank);
        return it == s->control_targets.end() ? std::string() : it->second;
      },
      [s](const std::string& line) {
        std::fprintf(stderr, "cairn: agent %s: %s\n", s->address.c_str(), line.c_str());
      });
  s->thread = std::thread([s] { s->loop(); });
}

RemoteLauncher::~RemoteLauncher() {
  {
    std::lock_guard lock(state_->mutex);
    state_->stopping = true;
  }
  state_->endpoint.lost->store(true);  // a restore trying again gives up
  state_->wake();
  state_->thread.join();
  // Each restore is bounded by the wire's timeouts; what it launches after this is dropped.
  for (State::Restore& r : state_->restores) r.thread.join();
  // A goodbye ends the session at once: the agent kills what still runs, as it would for a
  // coordinator without a session (agent_sessions.h).
  if (!state_->broken)
    (void)state_->peer->send(Json{{"type", "goodbye"}}, Clock::now() + std::chrono::seconds(1));
  state_->peer->close(Clock::now() + std::chrono::seconds(1));
}

Result<std::unique_ptr<RemoteLauncher>> RemoteLauncher::connect(const PeerAddress& address,
                                                                std::shared_ptr<TlsContext> client,
                                                                std::chrono::milliseconds timeout,
                                                                bool reap_local_children) {
  PeerFailure failure;
  auto peer = connect_to_agent(address, client, Clock::now() + timeout, &failure);
  if (!peer.ok()) return peer.status();
  // What it offers (slots, devices), asked once: the placement's view of the machine.
  const auto deadline = Clock::now() + timeout;
  Status asked = (*peer)->send(Json{{"type", "status"}}, deadline);
  auto answer = asked.ok() ? (*peer)->receive(deadline) : Result<std::optional<Json>>(asked);
  if (!answer.ok()) return Status::Failed(address.text() + ": " + answer.status().message());
  if (!answer->has_value() || (**answer).value("type", "") != "status")
    return Status::Failed(address.text() + ": no status answer");
  auto state = std::make_unique<State>();
  if (const char* seconds = std::getenv("CAIRN_HEARTBEAT_TIMEOUT"); seconds && *seconds) {
    const double value = std::strtod(seconds, nullptr);
    if (value > 0 && value < 86400)
      state->heartbeat_timeout = std::chrono::milliseconds(static_cast<int64_t>(value * 1000));
  }
  // Its checkpoint transfers go on over a dropped link as the session does
  // (peer/checkpoint_retry.h), and stop once the agent is lost (fail_all) or this ends.
  state->endpoint =
      AgentEndpoint{address, client, state->heartbeat_timeout,
                    std::make_shared<std::atomic<bool>>(false), std::make_shared<LinkWatch>()};
  const Json& status = **answer;
  const Json slots = status.value("slots", Json::object()).value("total", Json());
  state->offer.slots = slots.is_number_integer() ? std::max<int64_t>(0, slots.get<int64_t>()) : 0;
  for (const Json& device : status.value("devices", Json::array()))
    if (device.is_string() && device.get<std::string>().rfind("gpu", 0) == 0)
      state->offer.gpu_names.push_back(device.get<std::string>().substr(3));
  // A session, so a link that drops loses nothing (remote_session.h): opened before the
  // connection carries anything else.
  auto session = open_adopting_session(**peer, state->journal, state->heartbeat_timeout, deadline,
                                       &state->kept, &state->adopting);
  if (!session.ok()) return Status::Failed(address.text() + ": " + session.status().message());
  state->session_id = *session;
  state->endpoint.session = *session;  // the agent lets go of its transfers with its link
  // Launches never reuse the name of a rank the agent kept (it is one until it ends).
  for (const KeptRank& k : state->kept) state->next_rank = std::max(state->next_rank, k.id + 1);
  state->offer.local_address = local_host((*peer)->fd());
  state->offer.agent_address = remote_host((*peer)->fd());
  state->peer = std::move(*peer);
  state->address = address.text();
  state->shipper.emplace(address, client);
  state->reap_local_children = reap_local_children;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return Status::Io("pipe: " + errno_text());
  state->wake_read.reset(fds[0]);
  state->wake_write.reset(fds[1]);
  return std::unique_ptr<RemoteLauncher>(new RemoteLauncher(std::move(state)));
}

void RemoteLauncher::prepare(const std::shared_ptr<const RunSource>& source) {
  state_->shipper->prefetch(source);
  state_->data_check = start_data_check(state_->endpoint, source);
}

Status RemoteLauncher::check_run() {
  State& s = *state_;
  if (s.data_check.valid()) {
    const Status checked = s.data_check.get();  // once; the future is then empty
    if (checked.kind() == ErrorKind::kFailed) {
      std::lock_guard lock(s.mutex);
      if (s.run_refused.empty()) s.run_refused = checked.message();
    }
  }
  std::lock_guard lock(s.mutex);
  return s.run_refused.empty() ? Status::Ok() : Status::Failed(s.run_refused);
}

Result<LaunchedRank> RemoteLauncher::start(const RankLaunch& launch) {
  State& s = *state_;
  {
    // Lost since its placement: refused before any shipping, whose failure would leave the
    // agent out of the run as one that cannot run it (lost_before_start.h).
    std::lock_guard lock(s.mutex);
    if (s.broken) return *s.broken;
  }
  RemoteLaunch remote;
  // The agent numbers the rank's output from here, so that an adoption can say what this
  // file lacks (remote_adoption.h). No file yet (it is made when the first byte arrives):
  // from 0. A file that cannot be looked at otherwise leaves it unnumbered (-1), as before.
  if (struct stat st{}; ::stat(launch.output.c_str(), &st) == 0)
    remote.output_at = st.st_size;
  else if (errno == ENOENT)
    remote.output_at = 0;
  remote.argv = launch.argv;
  remote.self_program = launch.self_program;
  remote.env = launch.env;
  remote.cwd = "trials/" + env_or(launch.env, "CAIRN_TRIAL_ID", "unnamed") + "/rank-" +
               env_or(launch.env, "RANK", "0");
  // This machine's paths do not travel: the agent fills in its own (remote_paths.h).
  mark_remote_paths(remote.env, remote.paths);
  if (launch.source) {  // the agent's copy of the run directory (run_shipping.h)
    auto cwd = s.shipper->prepare(*launch.source);
    if (!cwd.ok()) {
      std::lock_guard lock(s.mutex);
      s.run_refused = cwd.status().message();
      return cwd.status();
    }
    remote.cwd = *cwd;
  }
  std::unique_lock lock(s.mutex);
  if (s.broken) return *s.broken;
  remote.rank = s.next_rank++;
  s.pending.insert(remote.rank);
  s.outputs[remote.rank].file = launch.output;  // output may come before the answer is read
  s.running.insert(remote.rank);
  if (auto control = launch.env.find("CAIRN_CONTROL"); control != launch.env.end())
    s.control_targets[remote.rank] = control->second;
  if (auto latest = remote.env.find("CAIRN_LATEST_CHECKPOINT");
      latest != remote.env.end() && !latest->second.empty()) {
    // Restored on the agent, for this attempt, before the launch is sent; off this thread.
    const std::string attempt = env_or(launch.env, "CAIRN_ATTEMPT", "");
    const int64_t number =
        attempt.empty() ? remote.rank : std::strtoll(attempt.c_str(), nullptr, 10);
    for (auto it = s.restores.begin(); it != s.restores.end();) {
      if (!it->finished) {
        ++it;
        continue;
      }
      it->thread.join();
      it = s.restores.erase(it);
    }
    s.restoring.insert(remote.rank);
    const int64_t id = remote.rank;
    State::Restore& restore = s.restores.emplace_back();
    restore.thread = std::thread(
        [&s, &restore, remote = std::move(remote), checkpoint = latest->second, number]() mutable {
          s.restore_then_launch(std::move(remote), std::move(checkpoint), number);
          std::lock_guard done(s.mutex);
          restore.finished = true;
        });
    return LaunchedRank{static_cast<pid_t>(-id), 0};
  }
  s.outgoing.push_back(launch_message(remote));
  s.wake();
  // Not waited for: the coordinator's loop goes on while the launch crosses the wire (a
  // round trip per rank would serialize its starts). A refusal comes back as the rank's end
  // (exit status 127, the agent's reason in its output), as a program that cannot be
  // executed ends a local rank.
  return LaunchedRank{static_cast<pid_t>(-remote.rank), 0};
}

void RemoteLauncher::State::restore_then_launch(RemoteLaunch remote, std::string checkpoint,
                                                int64_t attempt) {
  const std::string trial = env_or(remote.env, "CAIRN_TRIAL_ID", "unnamed");
  auto pushed = pushes.get(trial, attempt, checkpoint, [&]() -> Result<PushedCheckpoint> {
    auto manifest = scan_for_restore(trial, attempt, checkpoint);
    if (!manifest.ok()) return manifest.status();
    return push_checkpoint_retrying(endpoint, trial, attempt, checkpoint, *manifest, kLaunchTime);
  });
  std::lock_guard lock(mutex);
  // Killed while it waited (signal()), or its connection was lost: it has ended already.
  if (!restoring.erase(remote.rank) || !running.count(remote.rank) || stopping) return;
  if (!pushed.ok()) {
    // Ends as a launch the agent refused: exit status 127, the reason as its last line.
    write_output(remote.rank, "cairn: cannot restore the checkpoint on " + address + ": " +
                                  pushed.status().message() + "\n");
    ExitInfo info;
    info.code = 127;
    exits.push_back({LaunchedRank{static_cast<pid_t>(-remote.rank), 0}, info});
    pending.erase(remote.rank);
    running.erase(remote.rank);
    outputs.erase(remote.rank);
    control_targets.erase(remote.rank);
    ::kill(::getpid(), SIGCHLD);
    return;
  }
  remote.env["CAIRN_LATEST_CHECKPOINT"] = pushed->path;
  outgoing.push_back(launch_message(remote));
  wake();
}

bool RemoteLauncher::signal(const LaunchedRank& rank, int sig) {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  const int64_t id = -static_cast<int64_t>(rank.pid);
  if (!s.running.count(id)) return false;
  if (s.restoring.count(id)) {
    // Not launched yet: it ends now, by this signal, and is never launched.
    ExitInfo info;
    info.signal = sig;
    s.exits.push_back({LaunchedRank{rank.pid, 0}, info});
    s.pending.erase(id);
    s.running.erase(id);
    s.outputs.erase(id);
    s.control_targets.erase(id);
    ::kill(::getpid(), SIGCHLD);
    return true;
  }
  s.outgoing.push_back(Json{{"type", "signal"}, {"rank", id}, {"signal", sig}});
  s.wake();
  return true;
}

const AgentEndpoint* RemoteLauncher::agent_of(const LaunchedRank&) const {
  return &state_->endpoint;
}

bool RemoteLauncher::lost() const {
  std::lock_guard lock(state_->mutex);
  return state_->broken.has_value();
}

Status RemoteLauncher::reach(const std::string& host, uint16_t port) {
  State& s = *state_;
  std::lock_guard one(s.probing);
  std::unique_lock lock(s.mutex);
  if (s.broken) return *s.broken;
  s.probe_answer.reset();
  s.outgoing.push_back(Json{{"type", "probe"}, {"host", host}, {"port", port}});
  s.wake();
  // The agent's probe is bounded by kProbeTimeout; the answer's trip by a little more.
  const bool answered =
      s.probed.wait_until(lock, Clock::now() + kProbeTimeout + std::chrono::seconds(3),
                          [&] { return s.probe_answer.has_value() || s.broken.has_value(); });
  if (s.broken) return *s.broken;
  if (!answered) return Status::Failed("no answer to a probe");
  if (s.probe_answer->value("reachable", false)) return Status::Ok();
  return Status::Failed(s.probe_answer->value("error", std::string("unreachable")).substr(0, 300));
}

Result<uint16_t> RemoteLauncher::hold_master_port() {
  State& s = *state_;
  std::lock_guard one(s.probing);
  std::unique_lock lock(s.mutex);
  if (s.broken) return *s.broken;
  s.probe_answer.reset();
  s.outgoing.push_back(Json{{"type", "master_port"}});
  s.wake();
  const bool answered = s.probed.wait_until(lock, Clock::now() + std::chrono::seconds(10), [&] {
    return s.probe_answer.has_value() || s.broken.has_value();
  });
  if (s.broken) return *s.broken;
  if (!answered) return Status::Failed("no answer to a master_port request");
  const Json port = s.probe_answer->value("port", Json());
  if (s.probe_answer->value("type", "") != "master_port" || !port.is_number_unsigned() ||
      port.get<uint64_t>() == 0 || port.get<uint64_t>() > 65535)
    return Status::Failed(
        s.probe_answer->value("reason", std::string("no port in the answer")).substr(0, 300));
  return static_cast<uint16_t>(port.get<uint64_t>());
}

void RemoteLauncher::release_master_port(uint16_t port) {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  if (s.broken) return;
  s.outgoing.push_back(Json{{"type", "master_port_release"}, {"port", port}});
  s.wake();
}

std::string RemoteLauncher::refuses_run() const {
  std::lock_guard lock(state_->mutex);
  return state_->run_refused;
}

std::string RemoteLauncher::lost_reason() const {
  std::lock_guard lock(state_->mutex);
  return state_->broken ? state_->broken->message() : std::string();
}

const RemoteLauncher::Offer& RemoteLauncher::offer() const {
  return state_->offer;
}

const std::vector<KeptRank>& RemoteLauncher::kept() const {
  return state_->kept;
}

Result<LaunchedRank> RemoteLauncher::adopt(int64_t id, const std::string& control,
                                           const std::filesystem::path& output) {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  const bool known = std::any_of(s.kept.begin(), s.kept.end(),
                                 [&](const KeptRank& k) { return k.id == id && k.running; });
  if (!s.adopting || !known || s.running.count(id))
    return Status::Failed("rank " + std::to_string(id) + " is not a kept rank to adopt");
  // Made now (the rank may have printed nothing before the kill, so that nothing made it):
  // the adoption numbers the output the agent sends again from this file's size.
  std::error_code ec;
  std::filesystem::create_directories(output.parent_path(), ec);
  UniqueFd file(::open(output.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!file) return Status::Io("cannot open " + output.string() + ": " + errno_text());
  s.outputs[id] = State::Output{output, std::move(file)};
  s.running.insert(id);
  s.control_targets[id] = control;
  s.adopted.push_back(id);
  struct stat st {};
  s.adopted_output_at.push_back(::fstat(s.outputs[id].fd.get(), &st) == 0 ? st.st_size : -1);
  return LaunchedRank{static_cast<pid_t>(-id), 0};
}

void RemoteLauncher::end_adoption() {
  State& s = *state_;
  std::lock_guard lock(s.mutex);
  if (!s.adopting) return;
  s.adopting = false;
  if (s.broken) return;
  s.outgoing.push_back(adopt_ranks_message(s.adopted, s.adopted_output_at));
  s.wake();
}

void RemoteLauncher::State::write_output(int64_t rank, std::string_view bytes) {
  auto it = outputs.find(rank);
  if (it == outputs.end()) return;
  Output& out = it->second;
  if (!out.fd) {
    std::error_code ec;
    std::filesystem::create_directories(out.file.parent_path(), ec);
    out.fd.reset(::open(out.file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
    if (!out.fd) return;
    new_outputs.push_back(out.file);
    ::kill(::getpid(), SIGCHLD);  // wakes the coordinator's loop (launcher.h)
  }
  (void)write_all(out.fd.get(), bytes);
}

std::vector<std::filesystem::path> RemoteLauncher::take_new_outputs() {
  std::lock_guard lock(state_->mutex);
  std::vector<std::filesystem::path> files;
  files.swap(state_->new_outputs);
  return files;
}

std::vector<RankExit> RemoteLauncher::take_exits() {
  // Local children that ended (a helper cairn started): reaped, as the local launcher does.
  State& s = *state_;
  int status = 0;
  while (s.reap_local_children && ::waitpid(-1, &status, WNOHANG) > 0) {
  }
  std::lock_guard lock(s.mutex);
  std::vector<RankExit> exits;
  exits.swap(s.exits);
  return exits;
}

}  // namespace cairn
