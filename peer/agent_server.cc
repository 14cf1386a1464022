#include "peer/agent_server.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <list>
#include <thread>

#include "common/build_info.h"
#include "peer/agent_checkpoints.h"
#include "peer/agent_log.h"
#include "peer/control_relay.h"
#include "peer/coordinator_silence.h"
#include "peer/peer_address.h"
#include "peer/peer_connection.h"
#include "peer/peer_protocol.h"
#include "peer/rank_messages.h"
#include "peer/route_probe.h"

namespace cairn {

namespace {

using Clock = std::chrono::steady_clock;

// How long a peer has to finish the TLS handshake and send its hello: a connection that
// says nothing is not kept.
constexpr auto kHandshakeTime = std::chrono::seconds(10);
// A connection idle this long between requests is closed (a coordinator will send
// heartbeats well within it).
constexpr auto kIdleTime = std::chrono::hours(24);
// How often a connection with ranks looks for their output and exits.
constexpr auto kRankPollTime = std::chrono::milliseconds(20);

}  // namespace

Json agent_status_message(const AgentInfo& info, int slots_free) {
  return Json{{"type", "status"},
              {"slots", {{"free", slots_free}, {"total", info.slots_total}}},
              {"devices", info.devices},
              {"version", CAIRN_VERSION},
              {"protocol", kPeerProtocolVersion}};
}

struct AgentServer::Impl {
  UniqueFd listener;
  std::shared_ptr<TlsContext> tls;
  AgentInfo info;
  RankHostFactory hosts;
  std::string no_hosts_reason;
  AgentRequestHandler requests;
  std::atomic<int> ranks_running{0};  // over every connection: what status reports used
  UniqueFd stop_read, stop_write;     // readable once the agent stops: ends every wait

  std::unique_ptr<AgentCheckpoints> checkpoints;  // checkpoints over the wire

  struct Worker {
    std::thread thread;
    std::atomic<bool> done{false};
  };
  std::list<Worker> workers;

  void serve_connection(UniqueFd fd, const std::string& name);
  void reap(bool all) {
    for (auto it = workers.begin(); it != workers.end();) {
      if (all || it->done.load()) {
        it->thread.join();
        it = workers.erase(it);
      } else {
        ++it;
      }
    }
  }
};

AgentServer::AgentServer(UniqueFd listener, std::shared_ptr<TlsContext> tls, AgentInfo info,
                         RankHostFactory hosts, std::string no_hosts_reason)
    : impl_(std::make_unique<Impl>()) {
  impl_->hosts = std::move(hosts);
  impl_->no_hosts_reason = std::move(no_hosts_reason);
  impl_->listener = std::move(listener);
  impl_->tls = std::move(tls);
  impl_->info = std::move(info);
  impl_->checkpoints = std::make_unique<AgentCheckpoints>(
      impl_->info.keep_checkpoints ? impl_->info.dir : std::filesystem::path());
}

AgentServer::~AgentServer() = default;

void AgentServer::set_request_handler(AgentRequestHandler handler) {
  impl_->requests = std::move(handler);
}

void AgentServer::Impl::serve_connection(UniqueFd fd, const std::string& name) {
  const int stop = stop_read.get();
  auto connection = PeerConnection::accept(std::move(fd), tls, Clock::now() + kHandshakeTime, stop);
  if (!connection.ok()) {
    if (connection.status().message() != "TLS handshake: stopping")
      agent_log("refused " + name + ": " + connection.status().message());
    return;
  }
  PeerConnection& peer = **connection;
  auto first = peer.receive(Clock::now() + kHandshakeTime);
  if (!first.ok() || !first->has_value()) {
    agent_log("refused " + name + ": no hello (" +
              (first.ok() ? std::string("closed") : first.status().message()) + ")");
    return;
  }
  PeerHello hello;
  Status checked = check_hello(**first, &hello);
  if (!checked.ok()) {
    const bool version = checked.kind() == ErrorKind::kFailed;
    agent_log("refused " + name + ": " + checked.message());
    Json refusal = refusal_message(checked.message());
    refusal["code"] = version ? "version_mismatch" : "bad_request";
    refusal["protocol"] = kPeerProtocolVersion;
    refusal["cairn"] = CAIRN_VERSION;
    (void)peer.send(refusal, Clock::now() + kHandshakeTime);
    peer.close(Clock::now() + std::chrono::seconds(1));
    return;
  }
  if (!peer.send(hello_message("agent"), Clock::now() + kHandshakeTime).ok()) return;
  agent_log("connected " + name + " (key id " + tls->key().id + ", cairn " + hello.cairn_version +
            ")");
  std::unique_ptr<RankHost> host;
  int running = 0;  // ranks started on this connection and not yet reported ended
  // Whatever ends the connection ends its ranks too.
  struct KillOnExit {
    std::unique_ptr<RankHost>& host;
    int& running;
    std::atomic<int>& total;
    ~KillOnExit() {
      if (host) host->kill_all();
      total -= running;
    }
  } kill_on_exit{host, running, ranks_running};
  // The ranks' control channels, relayed over this connection (control_relay.h).
  auto control = ControlRelay::for_agent(
      info.dir.empty() ? info.dir : info.dir / "control",
      [&name](const std::string& line) { agent_log("control channel of " + name + ": " + line); });
  // Sends the ranks' output and exits; false when the connection broke.
  auto relay = [&]() {
    if (!host) return true;
    for (RankHost::Event& event : host->poll()) {
      Json message;
      if (event.ended) {
        // Its last control messages go before its exit, as a local rank's would.
        if (Status drained = control->drain_rank(peer, event.rank); !drained.ok()) {
          agent_log("dropped " + name + ": " + drained.message());
          return false;
        }
        control->rank_ended(event.rank);
        --running;
        --ranks_running;
        agent_log("rank " + std::to_string(event.rank) + " of " + name + " ended (code " +
                  std::to_string(event.code) + ", signal " + std::to_string(event.signal) + ")");
        message = Json{
            {"type", "exit"}, {"rank", event.rank}, {"code", event.code}, {"signal", event.signal}};
      } else {
        message = Json{{"type", "output"}, {"rank", event.rank}, {"data", event.output}};
      }
      Status sent = peer.send(message, Clock::now() + std::chrono::seconds(30));
      if (!sent.ok()) {
        agent_log("dropped " + name + ": " + sent.message());
        return false;
      }
    }
    return true;
  };
  auto idle_until = Clock::now() + kIdleTime;
  auto last_heard = Clock::now();
  const auto silence_limit = coordinator_silence_limit();
  for (;;) {
    if (!relay()) return;
    const bool polled = running > 0 && !(host && host->event_driven());
    auto wait_until = polled ? Clock::now() + kRankPollTime : idle_until;
    // With ranks running, the wait also ends when the coordinator's silence passes its limit.
    if (running > 0)
      wait_until = std::min(wait_until, last_heard + silence_limit + std::chrono::milliseconds(1));
    // A rank's end wakes the wait at once (its pidfd), not at the next look.
    auto request =
        control->receive(peer, wait_until, -1, host ? host->exit_fds() : std::vector<int>());
    if (!request.ok() && request.status().message() == "timed out" &&
        (running > 0 || Clock::now() < wait_until)) {
      // Ranks running and the coordinator silent (coordinator_silence.h): it has given us
      // up; end the connection, and with it the ranks, so their slots are free again.
      // Otherwise a rank's descriptor woke the wait (its output, its end), or it is time to
      // look again.
      if (running == 0 || Clock::now() - last_heard <= silence_limit) continue;
      agent_log(
          "dropped " + name + ": nothing heard for " +
          std::to_string(
              std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - last_heard).count()) +
          " s with ranks running");
      return;
    }
    last_heard = Clock::now();
    idle_until = Clock::now() + kIdleTime;
    if (!request.ok()) {
      const std::string& why = request.status().message();
      if (why == "stopping") {
        peer.close(Clock::now() + std::chrono::seconds(1));
        return;
      }
      agent_log("dropped " + name + ": " + why);
      // After a bad frame the stream's boundaries are lost: say why, then close.
      if (request.status().kind() == ErrorKind::kBadInput) {
        Json refusal = refusal_message(why);
        refusal["code"] = "bad_frame";
        (void)peer.send(refusal, Clock::now() + std::chrono::seconds(2));
        peer.close(Clock::now() + std::chrono::seconds(1));
      }
      return;
    }
    if (!request->has_value()) {
      agent_log("disconnected " + name);
      return;
    }
    const Json& message = **request;
    const std::string type = message["type"].get<std::string>();
    Json reply;
    if (type == "status") {
      reply = agent_status_message(info, std::max(0, info.slots_total - ranks_running.load()));
    } else if (type == "launch") {
      auto launch = parse_launch(message);
      if (launch.ok()) use_own_program(*launch);  // builtin:mlp: this agent's cairn
      const int64_t rank = message.value("rank", int64_t{-1});
      Status started = launch.status();
      if (launch.ok() && !hosts) started = Status::BadInput(no_hosts_reason);
      // One rank per slot, over every connection (checked and taken at once).
      if (started.ok()) {
        int in_use = ranks_running.load();
        do {
          if (in_use >= info.slots_total) {
            started = Status::Failed("no free slot (" + std::to_string(info.slots_total) + " of " +
                                     std::to_string(info.slots_total) + " in use)");
            break;
          }
        } while (!ranks_running.compare_exchange_weak(in_use, in_use + 1));
      }
      const bool slot_taken = started.ok();
      if (started.ok() && !host) host = hosts();
      bool listening = false;  // the rank's control socket was made for this launch
      if (started.ok()) listening = (started = control->give_control(*launch)).ok();
      if (started.ok()) started = host->start(*launch);
      if (!started.ok() && listening) control->rank_ended(launch->rank);
      if (!started.ok() && slot_taken) --ranks_running;
      if (started.ok()) {
        ++running;
        agent_log("started rank " + std::to_string(rank) + " of " + name + ": " +
                  launch->argv[0].substr(0, 200) + " in work/" + launch->cwd.substr(0, 200));
        reply = Json{{"type", "launched"}, {"rank", rank}};
      } else {
        agent_log("refused a launch from " + name + ": " + started.message());
        reply = Json{{"type", "error"}, {"rank", rank}, {"reason", started.message()}};
      }
    } else if (type == "probe") {
      reply = probe_reply(message);  // bounded (route_probe.h)
    } else if (type == "heartbeat") {
      // The coordinator's liveness check of this agent (remote_launcher.h): answered at once.
      reply = Json{{"type", "heartbeat"}};
    } else if (type == "signal") {
      const Json sig = message.value("signal", Json());
      const Json rank = message.value("rank", Json());
      if (host && sig.is_number_integer() && rank.is_number_integer() && sig.get<int64_t>() > 0 &&
          sig.get<int64_t>() < 65)
        host->signal(rank.get<int64_t>(), static_cast<int>(sig.get<int64_t>()));
      continue;  // no reply: the exit, if it comes, says what the signal did
    } else if (AgentCheckpoints::handles(type)) {
      if (!checkpoints->serve(peer, message, name)) return;
      continue;  // the exchange sent its own answers
    } else if (auto handled = requests ? requests(message, peer, name) : std::nullopt) {
      reply = std::move(*handled);
    } else {
      // Bounded: a peer's type is echoed back and logged, never at any length.
      const std::string shown = type.substr(0, 64);
      agent_log("refused a request from " + name + ": unknown type '" + shown + "'");
      reply = Json{{"type", "error"}, {"reason", "unknown request type '" + shown + "'"}};
    }
    Status sent = peer.send(reply, Clock::now() + std::chrono::seconds(30));
    if (!sent.ok()) {
      agent_log("dropped " + name + ": " + sent.message());
      return;
    }
  }
}

Result<int> AgentServer::serve(int signal_fd) {
  Impl& s = *impl_;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return Status::Io("pipe: " + errno_text());
  s.stop_read.reset(fds[0]);
  s.stop_write.reset(fds[1]);
  int stopped_by = 0;
  while (stopped_by == 0) {
    pollfd p[2] = {{s.listener.get(), POLLIN, 0}, {signal_fd, POLLIN, 0}};
    const int ready = ::poll(p, 2, 1000);
    if (ready < 0 && errno != EINTR) return Status::Io("poll: " + errno_text());
    s.reap(false);
    if (ready <= 0) continue;
    if (p[1].revents & POLLIN) {
      char sig = 0;
      while (::read(signal_fd, &sig, 1) == 1)
        if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP) stopped_by = sig;
    }
    if (stopped_by) break;
    if (!(p[0].revents & POLLIN)) continue;
    for (;;) {
      UniqueFd fd(::accept4(s.listener.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
      if (!fd) {
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ECONNABORTED)
          agent_log("cannot accept a connection: " + errno_text());
        break;
      }
      // Small frames (a relayed control line, an ack) must not wait for the peer's delayed
      // ACK (Nagle): up to 40 ms a round trip on Linux.
      const int one = 1;
      ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      const std::string name = remote_name(fd.get());
      if (static_cast<int>(s.workers.size()) >= kMaxAgentConnections) {
        agent_log("refused " + name + ": already " + std::to_string(kMaxAgentConnections) +
                  " connections");
        continue;
      }
      Impl::Worker& worker = s.workers.emplace_back();
      worker.thread = std::thread([&s, &worker, fd = std::move(fd), name]() mutable {
        s.serve_connection(std::move(fd), name);
        worker.done.store(true);
      });
    }
  }
  s.listener.reset();
  const char byte = 1;
  (void)!::write(s.stop_write.get(), &byte, 1);
  s.reap(true);
  return stopped_by;
}

}  // namespace cairn
