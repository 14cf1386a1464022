// One connection to cairn: newline-delimited JSON both ways (docs/protocol.md).
//
// The trial's thread sends requests and reads answers; a small flusher thread sends a
// training batch that has waited too long. `write_mutex_` covers the batch and every
// write to the socket, so lines never interleave and messages leave in call order.
// Training reports cairn has not acknowledged are kept for an orphan checkpoint
// (unacked_reports.hpp).
#pragma once

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include <nlohmann/json.hpp>

#include "cairn/detail/metrics_json.hpp"
#include "cairn/detail/unacked_reports.hpp"
#include "cairn/detail/unique_fd.hpp"

namespace cairn::sdk_detail {

// A batch is sent when it holds this many reports or bytes, or when its first report
// has waited this long: large enough to amortise the syscall, small enough to look live.
struct BatchLimits {
  size_t reports = 1000;
  size_t bytes = 64 * 1024;
  std::chrono::milliseconds age{200};
  // Unacknowledged training reports kept beyond this: the oldest are dropped.
  size_t unacked_reports = 1'000'000;
};

inline std::string string_field(const nlohmann::json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

inline void warn(const std::string& message) {
  std::fprintf(stderr, "cairn: warning: %s\n", message.c_str());
}

inline UniqueFd connect_unix(const std::string& path, std::string* error) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof address.sun_path) {
    *error = "socket path too long";
    return {};
  }
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid() ||
      ::connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    *error = std::strerror(errno);
    return {};
  }
  return fd;
}

inline UniqueFd connect_tcp(const std::string& host_port, std::string* error) {
  auto colon = host_port.rfind(':');
  if (colon == std::string::npos) {
    *error = "expected tcp:HOST:PORT";
    return {};
  }
  std::string host = host_port.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  int status = ::getaddrinfo(host.c_str(), host_port.c_str() + colon + 1, &hints, &found);
  if (status != 0) {
    *error = ::gai_strerror(status);
    return {};
  }
  UniqueFd fd;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    fd.reset(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (fd.valid() && ::connect(fd.get(), a->ai_addr, a->ai_addrlen) == 0) break;
    *error = std::strerror(errno);
    fd.reset();
  }
  ::freeaddrinfo(found);
  if (fd.valid()) {
    int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  return fd;
}

// `address` is CAIRN_CONTROL: unix:PATH or tcp:HOST:PORT.
inline UniqueFd connect_control(const std::string& address, std::string* error) {
  std::string reason;
  UniqueFd fd;
  if (address.rfind("unix:", 0) == 0) {
    fd = connect_unix(address.substr(5), &reason);
  } else if (address.rfind("tcp:", 0) == 0) {
    fd = connect_tcp(address.substr(4), &reason);
  } else {
    reason = "expected unix:PATH or tcp:HOST:PORT";
  }
  if (!fd.valid()) *error = "cannot reach cairn at CAIRN_CONTROL=" + address + ": " + reason;
  return fd;
}

class ControlChannel {
 public:
  // `agree_on_stop`: the trial has several ranks, which must stop at the same step, so
  // a stop takes effect only through the answer to `sync`, never straight from `stop`.
  // `keep_unacked`: keep the training reports cairn has not acknowledged (rank 0).
  ControlChannel(UniqueFd fd, bool agree_on_stop, bool keep_unacked, BatchLimits limits = {})
      : fd_(std::move(fd)), agree_on_stop_(agree_on_stop), limits_(limits) {
    if (keep_unacked) unacked_.emplace(limits_.unacked_reports);
    flusher_ = std::thread([this] { flush_when_old(); });
  }
  ControlChannel(const ControlChannel&) = delete;
  ControlChannel& operator=(const ControlChannel&) = delete;

  // Sends what is still buffered, then closes the connection.
  ~ControlChannel() {
    {
      std::lock_guard lock(write_mutex_);
      write_batch_locked();
      stopping_ = true;
    }
    batch_cv_.notify_all();
    flusher_.join();
  }

  // REQUIRES: the first call on a new channel.
  bool handshake(const nlohmann::json& hello, std::chrono::milliseconds timeout,
                 std::string* error) {
    send(hello);
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!welcome_.is_object()) {
      if (!fatal_error_.empty()) {
        *error = "cairn refused the trial: " + fatal_error_;
        return false;
      }
      if (closed()) {
        *error = "cairn closed the control channel during the handshake";
        return false;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        *error = "cairn did not answer the handshake";
        return false;
      }
      receive(static_cast<int>(left.count()));
    }
    return true;
  }

  const nlohmann::json& welcome() const { return welcome_; }
  bool closed() const { return closed_.load(); }
  // Whether stops come from `sync` answers (a multi-rank trial, with a cairn that knows it).
  bool agrees_on_stop() const { return agree_on_stop_; }

  // What cairn asked for (stop, or agreed by sync), or "shutdown" once it is gone.
  std::optional<std::string> stop_reason() const {
    if (stop_reason_) return stop_reason_;
    if (closed()) return std::string("shutdown");
    return std::nullopt;
  }

  // Once cairn is gone the report is only kept (when reports are kept).
  void add_training_report(int64_t step, const std::map<std::string, double>& metrics) {
    std::lock_guard lock(write_mutex_);
    if (closed() && !unacked_) return;
    if (batch_.empty()) {
      batch_started_ = std::chrono::steady_clock::now();
      batch_cv_.notify_one();
    }
    batch_.add(step, metrics);
    if (batch_.reports() >= limits_.reports || batch_.bytes() >= limits_.bytes) {
      write_batch_locked();
    }
  }

  // The training reports cairn has not acknowledged, with step <= max_step, one JSON
  // object per line in the order they were made; *complete is false when some were
  // dropped for memory. Empty unless the channel keeps them.
  std::string unacked_report_lines(int64_t max_step, bool* complete) {
    std::lock_guard lock(write_mutex_);
    std::string lines;
    *complete = !unacked_ || unacked_->complete();
    if (!unacked_) return lines;
    unacked_->append_lines(lines, max_step);
    append_report_lines(lines, batch_, max_step);
    return lines;
  }

  void flush() {
    std::lock_guard lock(write_mutex_);
    write_batch_locked();
  }

  // Sends one message, after the training reports buffered before it.
  void send(const nlohmann::json& message) { send_line(to_line(message)); }

  // Sends a request and waits for its answer; nullopt when cairn is gone, or when
  // `interrupt` returns true while waiting.
  std::optional<nlohmann::json> request(nlohmann::json message,
                                        const std::function<bool()>& interrupt = nullptr) {
    if (closed()) return std::nullopt;
    int64_t seq = next_seq_++;
    message["seq"] = seq;
    uint64_t sent_before = send_line(to_line(message));
    while (answers_.find(seq) == answers_.end()) {
      if (closed() || (interrupt && interrupt())) return std::nullopt;
      receive(interrupt ? 250 : -1);
    }
    auto answer = std::move(answers_[seq]);
    answers_.erase(seq);
    if (string_field(answer, "type") == "ack") {  // what came before the request is stored
      std::lock_guard lock(write_mutex_);
      if (unacked_) unacked_->acknowledge(sent_before);
    }
    return answer;
  }

  // Agrees with the other ranks, through cairn, on whether to stop at `step`.
  void sync(int64_t step, const std::optional<std::string>& local_stop) {
    nlohmann::json message = {{"type", "sync"}, {"step", step}};
    if (local_stop) message["stop"] = *local_stop;
    auto answer = request(std::move(message));
    if (!answer) return;
    if (string_field(*answer, "type") == "error") {  // a cairn without `sync`: act on `stop`
      agree_on_stop_ = false;
      if (!stop_reason_) stop_reason_ = cairn_stop_;
      return;
    }
    if (stop_reason_) return;
    auto stop = answer->find("stop");
    if (stop != answer->end() && stop->is_boolean() && stop->get<bool>()) {
      std::string reason = string_field(*answer, "reason");
      stop_reason_ = reason.empty() ? "stop" : reason;
    }
  }

  // Reads whatever cairn has sent, without blocking.
  void poll() {
    if (!closed()) receive(0);
  }

 private:
  // Writes the buffered batch, then `line`; returns the unacked-reports mark between them.
  uint64_t send_line(std::string_view line) {
    std::lock_guard lock(write_mutex_);
    write_batch_locked();
    write_locked(line);
    return unacked_ ? unacked_->mark() : 0;
  }

  void write_locked(std::string_view data) {
    while (!data.empty() && !closed()) {
      ssize_t sent = ::send(fd_.get(), data.data(), data.size(), MSG_NOSIGNAL);
      if (sent < 0 && errno == EINTR) continue;
      if (sent <= 0) {
        mark_closed();
        return;
      }
      data.remove_prefix(static_cast<size_t>(sent));
    }
  }

  void mark_closed() {
    if (!closed_.exchange(true) && welcomed_) {
      warn("the control channel closed (cairn is gone); stopping at the next checkpoint");
    }
  }

  void write_batch_locked() {
    if (batch_.empty()) return;
    if (!closed()) batch_.write_line([this](std::string_view line) { write_locked(line); });
    if (unacked_) {
      unacked_->add(std::exchange(batch_, unacked_->recycled()));
    } else {
      batch_.clear();
    }
  }

  void flush_when_old() {
    std::unique_lock lock(write_mutex_);
    while (!stopping_) {
      if (batch_.empty()) {
        batch_cv_.wait(lock);
        continue;
      }
      auto due = batch_started_ + limits_.age;
      if (std::chrono::steady_clock::now() >= due) {
        write_batch_locked();
      } else {
        batch_cv_.wait_until(lock, due);
      }
    }
  }

  void receive(int timeout_ms) {
    pollfd readable{fd_.get(), POLLIN, 0};
    if (::poll(&readable, 1, timeout_ms) <= 0) return;  // nothing yet, or EINTR
    char chunk[1 << 16];
    ssize_t got = ::recv(fd_.get(), chunk, sizeof chunk, MSG_DONTWAIT);
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (got <= 0) {
      mark_closed();
      return;
    }
    inbox_.append(chunk, static_cast<size_t>(got));
    size_t start = 0;
    for (size_t end; (end = inbox_.find('\n', start)) != std::string::npos; start = end + 1) {
      dispatch(std::string_view(inbox_).substr(start, end - start));
    }
    inbox_.erase(0, start);
  }

  void dispatch(std::string_view line) {
    auto message = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!message.is_object()) return;
    std::string type = string_field(message, "type");
    auto re = message.find("re");
    if (re != message.end() && re->is_number_integer()) {
      int64_t seq = re->get<int64_t>();  // before the move below empties `message`
      answers_[seq] = std::move(message);
    } else if (type == "welcome") {
      welcome_ = std::move(message);
      welcomed_ = true;
    } else if (type == "stop") {
      std::string reason = string_field(message, "reason");
      if (reason.empty()) reason = "stop";
      if (agree_on_stop_) {
        if (!cairn_stop_) cairn_stop_ = reason;
      } else if (!stop_reason_) {
        stop_reason_ = reason;
      }
    } else if (type == "error") {
      fatal_error_ = string_field(message, "message");
      if (fatal_error_.empty()) fatal_error_ = "unknown error";
      if (welcome_.is_object()) warn("cairn: " + fatal_error_);
    }
    // Other types are ignored: a newer cairn may send more.
  }

  UniqueFd fd_;
  bool agree_on_stop_;  // the trial's thread only, like everything below the mutex
  const BatchLimits limits_;
  std::atomic<bool> closed_{false};
  std::atomic<bool> welcomed_{false};  // read by the flusher thread too

  std::mutex write_mutex_;  // the batch, unacked_ and every write to fd_
  std::condition_variable batch_cv_;
  TrainingBatch batch_;
  std::optional<UnackedReports> unacked_;
  std::chrono::steady_clock::time_point batch_started_;
  bool stopping_ = false;
  std::thread flusher_;

  // The trial's thread only.
  std::string inbox_;
  std::map<int64_t, nlohmann::json> answers_;
  int64_t next_seq_ = 1;
  nlohmann::json welcome_;
  std::string fatal_error_;
  std::optional<std::string> stop_reason_;
  std::optional<std::string> cairn_stop_;  // a `stop` waiting for the ranks to agree
};

}  // namespace cairn::sdk_detail
