#include "peer/control_relay.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace cairn {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

std::atomic<uint64_t> g_next_relay{1};

// A stream's data is acknowledged once this much of it was written: a quarter window, so
// the writer keeps three quarters while the ack travels, and small messages need no ack.
constexpr size_t kAckEveryBytes = kControlWindowBytes / 4;

// How many ended stream ids are remembered, so late frames for them pass quietly.
constexpr size_t kRememberedClosed = 4096;

int millis_until(Deadline deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return left > 1000000 ? 1000000 : static_cast<int>(left);
}

bool fits_unix_address(const fs::path& path) {
  sockaddr_un addr{};
  return path.string().size() < sizeof(addr.sun_path);
}

Result<UniqueFd> unix_listen(const fs::path& path) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return Status::Io("socket: " + errno_text());
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  std::error_code ec;
  fs::remove(path, ec);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    return Status::Io("cannot bind the control socket " + path.string() + ": " + errno_text());
  if (::listen(fd.get(), 64) != 0) return Status::Io("listen: " + errno_text());
  return fd;
}

// The parent of process `pid` (/proc/PID/stat's fourth field), 0 when it cannot be read.
int64_t parent_process(int64_t pid) {
  auto stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  if (!stat.ok()) return 0;
  const size_t name_end = stat->rfind(')');  // the name in parentheses may hold anything
  if (name_end == std::string::npos || name_end + 4 >= stat->size()) return 0;
  // ") S 1234 …": the state, then the parent.
  return std::strtoll(stat->c_str() + name_end + 4, nullptr, 10);
}

Result<UniqueFd> unix_connect(const std::string& address) {
  if (address.rfind("unix:", 0) != 0)
    return Status::BadInput("control address '" + address.substr(0, 200) + "' is not unix:");
  const std::string path = address.substr(5);
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) return Status::BadInput("control path too long");
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return Status::Io("socket: " + errno_text());
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  // A Unix stream connect completes at once or fails (EAGAIN: the backlog is full).
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    return Status::Io("cannot connect to " + path + ": " + errno_text());
  return fd;
}

}  // namespace

std::unique_ptr<ControlRelay> ControlRelay::for_agent(fs::path socket_dir, Log log) {
  std::unique_ptr<ControlRelay> relay(new ControlRelay());
  relay->agent_ = true;
  relay->socket_dir_ = std::move(socket_dir);
  relay->log_ = std::move(log);
  relay->id_ = g_next_relay++;
  return relay;
}

std::unique_ptr<ControlRelay> ControlRelay::for_coordinator(Target target, Log log) {
  std::unique_ptr<ControlRelay> relay(new ControlRelay());
  relay->target_ = std::move(target);
  relay->log_ = std::move(log);
  relay->id_ = g_next_relay++;
  return relay;
}

ControlRelay::~ControlRelay() {
  close_all();
  std::error_code ec;
  if (!fallback_dir_.empty()) fs::remove_all(fallback_dir_, ec);
}

void ControlRelay::close_all() {
  streams_.clear();
  outgoing_.clear();
  ranks_.clear();
  if (listener_) {
    listener_.reset();
    std::error_code ec;
    fs::remove(listener_path_, ec);
  }
}

Result<std::string> ControlRelay::listen() {
  if (!agent_) return Status::Failed("only an agent listens for ranks");
  if (listener_) return "unix:" + listener_path_.string();
  const std::string name = std::to_string(id_) + ".sock";
  fs::path path = socket_dir_ / name;
  std::error_code ec;
  if (socket_dir_.empty() || !fits_unix_address(path)) {
    if (fallback_dir_.empty()) {
      char tmpl[] = "/tmp/cairn-XXXXXX";
      if (!::mkdtemp(tmpl)) return Status::Io("mkdtemp: " + errno_text());
      fallback_dir_ = tmpl;
    }
    path = fallback_dir_ / name;
  } else {
    fs::create_directories(socket_dir_, ec);
    if (ec) return Status::Io("cannot create " + socket_dir_.string() + ": " + ec.message());
    ::chmod(socket_dir_.c_str(), 0700);  // only this user's processes reach the sockets
  }
  auto fd = unix_listen(path);
  if (!fd.ok()) return fd.status();
  listener_ = std::move(*fd);
  listener_path_ = path;
  return "unix:" + path.string();
}

Status ControlRelay::give_control(RemoteLaunch& launch) {
  bool expected = false;
  for (auto it = launch.paths.begin(); it != launch.paths.end();) {
    if (it->second != "control") {
      ++it;
      continue;
    }
    if (!expected) {
      if (ranks_.count(launch.rank))
        return Status::BadInput("rank " + std::to_string(launch.rank) + " is already running");
      auto address = listen();
      if (!address.ok()) return address.status();
      launch.env[it->first] = *address;
      ranks_[launch.rank] = 0;
      expected = true;
    } else {
      launch.env[it->first] = "unix:" + listener_path_.string();
    }
    it = launch.paths.erase(it);
  }
  return Status::Ok();
}

void ControlRelay::rank_started(int64_t rank, int64_t pid) {
  auto it = ranks_.find(rank);
  if (it != ranks_.end()) it->second = pid;
}

Status ControlRelay::drain_rank(PeerConnection& peer, int64_t rank) {
  // A connection the rank made just before it ended may still wait on the listener.
  if (!paused_) accept_ranks();
  std::vector<int64_t> ids;
  for (const auto& [id, s] : streams_)
    if (s.rank == rank) ids.push_back(id);
  for (int64_t id : ids) {
    // pump reads one chunk at a time; a stream ends at its end of file or its window.
    for (int round = 0; round < 64; ++round) {
      auto s = streams_.find(id);
      if (s == streams_.end() || s->second.closing || s->second.in_flight >= kControlWindowBytes)
        break;
      const size_t before = outgoing_.size();
      if (!pump(id, s->second, POLLIN) || outgoing_.size() == before) break;
    }
  }
  return flush(peer);
}

void ControlRelay::rank_ended(int64_t rank) {
  ranks_.erase(rank);
  ended_operations_.erase(rank);
}

AnsweredOperations ControlRelay::operations_of(int64_t rank) const {
  AnsweredOperations out;
  if (auto it = ended_operations_.find(rank); it != ended_operations_.end()) out = it->second;
  for (const auto& [id, s] : streams_)
    if (s.rank == rank && s.lines.operations().count > out.count) out = s.lines.operations();
  return out;
}

std::optional<int64_t> ControlRelay::rank_of_process(int64_t pid) const {
  auto rank_with_pid = [&](int64_t p) -> std::optional<int64_t> {
    if (p <= 0) return std::nullopt;
    for (const auto& [rank, rank_pid] : ranks_)
      if (rank_pid == p) return rank;
    return std::nullopt;
  };
  if (auto rank = rank_with_pid(pid)) return rank;  // the rank itself: no system call
  // Each rank leads its own process group (trial_process.h): its children stay in it.
  if (auto rank = rank_with_pid(::getpgid(static_cast<pid_t>(pid)))) return rank;
  // A descendant that left the group (setsid): its ancestors, while they live.
  int64_t p = pid;
  for (int depth = 0; depth < 64; ++depth) {
    p = parent_process(p);
    if (p <= 1) break;
    if (auto rank = rank_with_pid(p)) return rank;
  }
  return std::nullopt;
}

void ControlRelay::accept_ranks() {
  if (!listener_) return;
  for (;;) {
    UniqueFd c(::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!c) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // EAGAIN: none left (or the listener failed: the next poll says so again)
    }
    ucred cred{};
    socklen_t length = sizeof cred;
    if (::getsockopt(c.get(), SOL_SOCKET, SO_PEERCRED, &cred, &length) != 0) {
      log_("refused a control connection: its process is unknown (" + errno_text() + ")");
      continue;
    }
    // The socket's directory is this user's alone; checked again, as a rank's identity is.
    if (cred.uid != ::geteuid()) {
      log_("refused a control connection from process " + std::to_string(cred.pid) +
           ": another user's (uid " + std::to_string(cred.uid) + ")");
      continue;
    }
    auto rank = rank_of_process(cred.pid);
    if (!rank) {
      log_("refused a control connection from process " + std::to_string(cred.pid) +
           ": not a rank running on this connection, nor started by one");
      continue;
    }
    const int64_t id = next_stream_++;
    Stream& s = streams_[id];
    s.fd = std::move(c);
    s.rank = *rank;
    if (auto ended = ended_operations_.find(*rank); ended != ended_operations_.end())
      s.lines.set_operations(ended->second);  // a rank connecting again counts on
    outgoing_.push_back(control_open_message(id, *rank));
  }
}

bool ControlRelay::was_open(int64_t id) const {
  if (closed_.count(id)) return true;
  // Stream ids the agent gave grow from 1: one below the next was open once (its end may
  // have been forgotten when many streams ended since).
  return agent_ && id < next_stream_;
}

void ControlRelay::end_stream(int64_t id, bool tell_peer) {
  auto it = streams_.find(id);
  if (it == streams_.end()) return;
  if (agent_ && ranks_.count(it->second.rank)) {
    const AnsweredOperations& ops = it->second.lines.operations();
    AnsweredOperations& kept = ended_operations_[it->second.rank];
    if (ops.count > kept.count) kept = ops;
  }
  streams_.erase(it);
  closed_.insert(id);
  while (closed_.size() > kRememberedClosed) closed_.erase(closed_.begin());
  if (tell_peer) outgoing_.push_back(control_close_message(id));
}

bool ControlRelay::write_out(int64_t id, Stream& s) {
  size_t written = 0;
  while (written < s.out.size()) {
    const ssize_t n =
        ::send(s.fd.get(), s.out.data() + written, s.out.size() - written, MSG_NOSIGNAL);
    if (n > 0) {
      written += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    end_stream(id, /*tell_peer=*/!s.closing);  // its reader is gone
    return false;
  }
  if (written > 0) {
    s.out.erase(0, written);
    credit(id, s, written);
  }
  if (s.closing && s.out.empty()) {
    end_stream(id, false);
    return false;
  }
  return true;
}

void ControlRelay::credit(int64_t id, Stream& s, size_t bytes) {
  s.unacked += bytes;
  if (s.unacked < kAckEveryBytes) return;
  outgoing_.push_back(control_ack_message(id, static_cast<int64_t>(s.unacked)));
  s.unacked = 0;
}

bool ControlRelay::pump(int64_t id, Stream& s, short revents) {
  // A hang-up with bytes still to write: the write fails and ends the stream (poll would
  // report the hang-up for ever otherwise).
  if ((revents & (POLLOUT | POLLHUP | POLLERR)) && !s.out.empty() && !write_out(id, s))
    return false;
  if ((revents & (POLLIN | POLLHUP | POLLERR)) && !s.closing && s.in_flight < kControlWindowBytes) {
    std::string buffer(std::min(kControlChunkBytes, kControlWindowBytes - s.in_flight), '\0');
    for (;;) {
      const ssize_t n = ::recv(s.fd.get(), buffer.data(), buffer.size(), 0);
      if (n > 0) {
        buffer.resize(static_cast<size_t>(n));
        if (agent_) s.lines.from_rank(buffer);
        s.in_flight += buffer.size();
        outgoing_.push_back(control_data_message(id, buffer));
        return true;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      end_stream(id, true);  // closed (0) or broken: the other end closes too
      return false;
    }
  }
  return true;
}

void ControlRelay::on_open(const ControlFrame& frame) {
  if (agent_) {
    log_("refused a control_open (stream " + std::to_string(frame.stream) +
         "): only an agent opens streams");
    return;
  }
  if (streams_.count(frame.stream) || closed_.count(frame.stream)) {
    log_("refused a control_open: stream " + std::to_string(frame.stream) + " was opened before");
    return;
  }
  const std::string address = target_ ? target_(frame.rank) : std::string();
  if (address.empty()) {
    log_("refused a control_open (stream " + std::to_string(frame.stream) + "): rank " +
         std::to_string(frame.rank) + " is not running on this connection");
    closed_.insert(frame.stream);
    outgoing_.push_back(control_close_message(frame.stream));
    return;
  }
  auto fd = unix_connect(address);
  if (!fd.ok()) {
    log_("cannot relay the control channel of rank " + std::to_string(frame.rank) + ": " +
         fd.status().message());
    closed_.insert(frame.stream);
    outgoing_.push_back(control_close_message(frame.stream));
    return;
  }
  Stream& s = streams_[frame.stream];
  s.fd = std::move(*fd);
  s.rank = frame.rank;
}

void ControlRelay::handle(const Json& message) {
  auto frame = parse_control_frame(message);
  if (!frame.ok()) {
    log_("refused a frame: " + frame.status().message());
    return;
  }
  if (frame->kind == ControlFrame::Kind::kOpen) return on_open(*frame);
  const std::string sid = std::to_string(frame->stream);
  auto it = streams_.find(frame->stream);
  if (it == streams_.end()) {
    // Frames that cross a close on the wire are expected; an id never opened is not.
    if (!was_open(frame->stream))
      log_("refused a " + message["type"].get<std::string>() + ": stream " + sid +
           " was never opened");
    return;
  }
  Stream& s = it->second;
  switch (frame->kind) {
    case ControlFrame::Kind::kData:
      if (s.closing) return;
      if (s.out.size() + frame->data.size() > kControlWindowBytes) {
        log_("refused control_data for stream " + sid + ": over the window of " +
             std::to_string(kControlWindowBytes) + " bytes; stream closed");
        end_stream(frame->stream, true);
        return;
      }
      if (agent_) {
        // A coordinator that adopted the rank: its answer to the replayed hello stays here.
        size_t swallowed = 0;
        std::string data = s.lines.to_rank(frame->data, &swallowed);
        if (swallowed > 0) credit(frame->stream, s, swallowed);
        s.out += data;
      } else {
        s.out += frame->data;
      }
      (void)write_out(frame->stream, s);  // at once: no wait for the next poll
      return;
    case ControlFrame::Kind::kAck:
      s.in_flight -= std::min(s.in_flight, static_cast<size_t>(frame->bytes));
      return;
    case ControlFrame::Kind::kClose:
      s.closing = true;
      if (s.out.empty()) end_stream(frame->stream, false);
      return;
    case ControlFrame::Kind::kOpen:
      return;
  }
}

Status ControlRelay::flush(PeerConnection& peer) {
  std::vector<Json> sending;
  sending.swap(outgoing_);
  for (size_t i = 0; i < sending.size(); ++i) {
    Status sent = peer.send(sending[i], Clock::now() + std::chrono::seconds(30));
    if (!sent.ok()) {
      // What was not sent waits for the connection that resumes this one (agent_sessions.h).
      outgoing_.insert(outgoing_.begin(), sending.begin() + static_cast<long>(i) + 1,
                       sending.end());
      return sent;
    }
  }
  return Status::Ok();
}

void ControlRelay::forget_peer() {
  outgoing_.clear();
  for (auto& [id, s] : streams_) s.in_flight = s.unacked = 0;
}

void ControlRelay::adopt(const std::set<int64_t>& ranks) {
  std::vector<int64_t> ids;
  for (const auto& [id, s] : streams_) ids.push_back(id);
  for (int64_t id : ids) {
    Stream& s = streams_[id];
    if (!ranks.count(s.rank) || s.closing) {
      end_stream(id, /*tell_peer=*/false);  // the new coordinator never knew it
      continue;
    }
    outgoing_.push_back(control_open_message(id, s.rank));
    const std::string replay = s.lines.replay();
    for (size_t at = 0; at < replay.size(); at += kControlChunkBytes)
      outgoing_.push_back(
          control_data_message(id, std::string_view(replay).substr(at, kControlChunkBytes)));
    s.in_flight = replay.size();
  }
}

Result<std::optional<Json>> ControlRelay::receive(PeerConnection& peer, Deadline deadline,
                                                  int wake_fd, const std::vector<int>& also) {
  std::vector<pollfd> fds;
  std::vector<int64_t> keys;  // the stream of each pollfd from first_stream on
  for (;;) {
    if (Status sent = flush(peer); !sent.ok()) return sent;
    // What OpenSSL holds already (SSL_pending, a frame half-decoded) is invisible to poll():
    // take every complete message before waiting.
    auto message = peer.receive(Clock::now());
    if (message.ok() && message->has_value()) {
      const Json& m = **message;
      if (!is_control_frame_type(m["type"].get_ref<const std::string&>())) return message;
      handle(m);
      continue;
    }
    if (message.ok() || message.status().message() != "timed out") return message;

    fds.clear();
    keys.clear();
    fds.push_back({peer.fd(), POLLIN, 0});
    fds.push_back({peer.stop_fd(), POLLIN, 0});
    fds.push_back({wake_fd, POLLIN, 0});
    // The listener's slot is always there (-1: none, or paused), so the layout is fixed.
    fds.push_back({listener_ && !paused_ ? listener_.get() : -1, POLLIN, 0});
    const size_t first_also = fds.size();
    for (int fd : also) fds.push_back({fd, POLLIN, 0});
    const size_t first_stream = fds.size();
    for (const auto& [id, s] : streams_) {
      if (paused_) break;
      short events = 0;
      if (!s.closing && s.in_flight < kControlWindowBytes) events |= POLLIN;
      if (!s.out.empty()) events |= POLLOUT;
      // A stream waiting for credit is left out, so its hang-up does not spin the loop.
      fds.push_back({events ? s.fd.get() : -1, events, 0});
      keys.push_back(id);
    }
    const int ms = millis_until(deadline);
    if (ms == 0) return Status::Failed("timed out");
    const int ready = ::poll(fds.data(), fds.size(), ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return Status::Failed("poll: " + errno_text());
    if (ready == 0) return Status::Failed("timed out");
    if (fds[1].fd >= 0 && (fds[1].revents & POLLIN)) return Status::Failed("stopping");
    if (fds[3].revents & POLLIN) accept_ranks();
    bool also_ready = false;
    for (size_t i = first_also; i < first_stream; ++i) also_ready |= fds[i].revents != 0;
    for (size_t i = first_stream; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      const int64_t id = keys[i - first_stream];
      auto s = streams_.find(id);
      if (s != streams_.end()) (void)pump(id, s->second, fds[i].revents);
    }
    if (also_ready) {
      if (Status sent = flush(peer); !sent.ok()) return sent;
      return Status::Failed("timed out");
    }
    if (wake_fd >= 0 && (fds[2].revents & POLLIN)) {
      char drain[64];
      while (::read(wake_fd, drain, sizeof drain) > 0) {
      }
      if (Status sent = flush(peer); !sent.ok()) return sent;
      return Status::Failed("timed out");
    }
  }
}

}  // namespace cairn
