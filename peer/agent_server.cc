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
#include "peer/agent_sessions.h"
#include "peer/control_relay.h"
#include "peer/keyless_guard.h"
#include "peer/peer_address.h"
#include "peer/peer_connection.h"
#include "peer/peer_protocol.h"
#include "peer/random_id.h"
#include "peer/rank_messages.h"
#include "peer/route_probe.h"
#include "peer/session_adoption.h"

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
              {"protocol", kPeerProtocolVersion},
              {"agent", info.id}};
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
  // Sessions kept for coordinators that come back (agent_sessions.h).
  std::unique_ptr<AgentSessions> sessions = std::make_unique<AgentSessions>(ranks_running);

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
  // Without random bytes the id is empty: the agent still serves, and is only not told
  // apart from itself at another address.
  if (impl_->info.id.empty()) impl_->info.id = random_hex_id(8, "an agent id").value_or("");
  impl_->checkpoints = std::make_unique<AgentCheckpoints>(
      impl_->info.keep_checkpoints ? impl_->info.dir : std::filesystem::path());
}

AgentServer::~AgentServer() = default;

void AgentServer::set_request_handler(AgentRequestHandler handler) {
  impl_->requests = std::move(handler);
}

void AgentServer::Impl::serve_connection(UniqueFd fd, const std::string& name) {
  const int stop = stop_read.get();
  // Without a key, only this agent's own user (keyless_guard.h): asked while the other end
  // is surely there, before the handshake.
  const std::string other_user = keyless_coordinator_refusal(*tls, fd.get());
  auto connection = PeerConnection::accept(std::move(fd), tls, Clock::now() + kHandshakeTime, stop);
  if (!connection.ok()) {
    if (connection.status().message() != "TLS handshake: stopping")
      agent_log("refused " + name + ": " + connection.status().message());
    return;
  }
  PeerConnection& peer = **connection;
  if (!other_user.empty()) return refuse_other_user(peer, name, other_user);
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
  // What runs for this connection: ended with it, or kept for a coordinator that comes back
  // (agent_sessions.h).
  auto session = std::make_shared<AgentSession>();
  session->control = ControlRelay::for_agent(
      info.dir.empty() ? info.dir : info.dir / "control",
      [name](const std::string& line) { agent_log("control channel of " + name + ": " + line); });
  bool end_session = false;  // a goodbye, the agent's stop or a bad frame: no reattach
  struct EndOrKeep {
    AgentSessions& sessions;
    std::shared_ptr<AgentSession>& session;
    bool& end;
    const std::string& name;
    ~EndOrKeep() {
      // Its coordinator's checkpoint transfers let go with it (agent_session_transfers.cc).
      sessions.release_transfers(*session);
      if (end)
        sessions.end(session);
      else
        sessions.detach(session, name);
    }
  } end_or_keep{*sessions, session, end_session, name};
  // Sends the ranks' output and exits; false when the connection broke. Every event is
  // sent even then: a failed send is kept in the session's journal, for a resume.
  auto relay = [&]() {
    // A session being adopted is not read until its adopter says which ranks it takes.
    if (!session->host || session->adoption.paused) return true;
    bool ok = true;
    auto failed = [&](const Status& why) {
      if (ok) agent_log("dropped " + name + ": " + why.message());
      ok = false;
    };
    for (RankHost::Event& event : session->host->poll()) {
      Json message;
      if (event.ended) {
        // Its last control messages go before its exit, as a local rank's would.
        if (ok) {
          if (Status drained = session->control->drain_rank(peer, event.rank); !drained.ok())
            failed(drained);
        }
        session->control->rank_ended(event.rank);
        note_rank_ended(*session, event.rank);
        --session->running;
        --ranks_running;
        agent_log("rank " + std::to_string(event.rank) + " of " + name + " ended (code " +
                  std::to_string(event.code) + ", signal " + std::to_string(event.signal) + ")");
        message = Json{
            {"type", "exit"}, {"rank", event.rank}, {"code", event.code}, {"signal", event.signal}};
      } else {
        message = output_message(event.rank, event.output);
      }
      Status sent = peer.send(message, Clock::now() + std::chrono::seconds(ok ? 30 : 0));
      if (!event.ended) note_output(*session, event.rank, event.output);  // for an adoption
      if (!sent.ok()) failed(sent);
    }
    return ok;
  };
  auto idle_until = Clock::now() + kIdleTime;
  // When a session's connection last received a frame (its journal counts them, control
  // frames included), to notice a link that went silent (agent_sessions.h link_window).
  int64_t heard_count = -1;
  auto heard_at = Clock::now();
  for (;;) {
    if (!relay()) return;
    // Ranks' output and ends wake the wait (event-driven hosts); others are looked at.
    const bool polled = session->running > 0 && !(session->host && session->host->event_driven());
    auto wait_until = polled ? Clock::now() + kRankPollTime : idle_until;
    if (!session->id.empty() && session->link_window.count() > 0) {
      const auto now = Clock::now();
      if (session->journal.received_count() != heard_count) {
        heard_count = session->journal.received_count();
        heard_at = now;
      }
      const auto silent_at = heard_at + std::max<std::chrono::steady_clock::duration>(
                                            2 * session->link_window, std::chrono::seconds(5));
      if (now >= silent_at) {
        agent_log("dropped " + name + ": nothing heard for " +
                  std::to_string(
                      std::chrono::duration_cast<std::chrono::seconds>(now - heard_at).count()) +
                  " s (its coordinator sends a heartbeat every second)");
        return;
      }
      wait_until = std::min(wait_until, silent_at);
    }
    // A rank's end wakes the wait at once (its pidfd), not at the next look.
    auto request = session->control->receive(
        peer, wait_until, session->wake_read ? session->wake_read.get() : -1,
        session->host && !session->adoption.paused ? session->host->exit_fds()
                                                   : std::vector<int>());
    if (session->release) {
      // A new connection of the coordinator claims the session: this one is dead.
      agent_log("dropped " + name + ": a new connection resumes its session");
      return;
    }
    if (!request.ok() && request.status().message() == "timed out" &&
        (session->running > 0 || Clock::now() < idle_until))
      continue;
    idle_until = Clock::now() + kIdleTime;
    if (!request.ok()) {
      const std::string& why = request.status().message();
      if (why == "stopping") {
        end_session = true;
        // One line per event: what the stop ends here (end_or_keep kills the ranks).
        agent_log("closed " + name + ": the agent stops" +
                  (session->running > 0
                       ? "; its " + std::to_string(session->running) + " running rank" +
                             (session->running == 1 ? " is" : "s are") + " killed"
                       : ""));
        // Not a link that dropped: the coordinator counts the ranks lost at once.
        (void)peer.send(Json{{"type", "goodbye"}}, Clock::now() + std::chrono::seconds(1));
        peer.close(Clock::now() + std::chrono::seconds(1));
        return;
      }
      agent_log("dropped " + name + ": " + why);
      // After a bad frame the stream's boundaries are lost: say why, then close.
      if (request.status().kind() == ErrorKind::kBadInput) {
        end_session = true;
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
      if (launch.ok()) use_own_program(*launch);        // builtin:mlp: this agent's cairn
      if (launch.ok()) launch->owner = session->owner;  // its orphans' directory
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
      if (started.ok() && !session->host) session->host = hosts();
      bool listening = false;  // the relay expects the rank's control connections
      if (started.ok()) listening = (started = session->control->give_control(*launch)).ok();
      if (started.ok()) started = session->host->start(*launch);
      if (started.ok())
        session->control->rank_started(launch->rank, session->host->pid(launch->rank));
      if (!started.ok() && listening) session->control->rank_ended(launch->rank);
      if (!started.ok() && slot_taken) --ranks_running;
      if (started.ok()) {
        ++session->running;
        note_launch(*session, *launch);
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
      // What this end has received, so the coordinator stops keeping it (session_journal.h).
      if (!session->id.empty()) reply["received"] = session->journal.received_count();
    } else if (type == "signal") {
      const Json sig = message.value("signal", Json());
      const Json rank = message.value("rank", Json());
      if (session->host && sig.is_number_integer() && rank.is_number_integer() &&
          sig.get<int64_t>() > 0 && sig.get<int64_t>() < 65)
        session->host->signal(rank.get<int64_t>(), static_cast<int>(sig.get<int64_t>()));
      continue;  // no reply: the exit, if it comes, says what the signal did
    } else if (type == "goodbye") {
      // The coordinator is done with this connection: its ranks end with it.
      end_session = true;
      peer.close(Clock::now() + std::chrono::seconds(1));
      return;
    } else if (is_adoption_request(type)) {
      if (!serve_adoption_request(*sessions, peer, session, message, name)) return;
      heard_count = -1;
      continue;  // it answered (adopt_ranks: the streams' frames follow)
    } else if (is_session_request(type)) {
      if (!serve_session_request(*sessions, peer, session, message, name)) return;
      // A claim by a new connection ends this one's waits at once, sends included.
      if (session->wake_read) peer.set_release(session->wake_read.get(), &session->release);
      heard_count = -1;  // a resumed session's frames are counted from its journal's count
      continue;          // it answered
    } else if (AgentCheckpoints::handles(type)) {
      // A transfer's own connection is let go when the session it names loses its connection
      // (a link gone silent), not only at the wire's 60 s timeouts.
      std::unique_ptr<LinkWatch::Registration> watched;
      if (session->id.empty() && message.value("session", Json()).is_string())
        watched = sessions->watch_transfer(message["session"].get<std::string>(), peer);
      const bool served = checkpoints->serve(peer, message, name);
      if (watched) peer.set_release(-1, nullptr);
      if (!served) return;
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
    s.sessions->expire(Clock::now());
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
  s.sessions->end_all();  // what waited for a coordinator ends with the agent
  return stopped_by;
}

}  // namespace cairn
