#include "peer/peer_connection.h"

#include <openssl/err.h>
#include <poll.h>

#include <unistd.h>

#include <cerrno>

#include "peer/frame.h"

namespace cairn {

namespace {

using Clock = std::chrono::steady_clock;

int millis_left(Deadline deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return left > 1000000 ? 1000000 : static_cast<int>(left);
}

// Whether OpenSSL's queue holds an alert the other end sent (reason codes 1000 + alert).
bool alert_received() {
  const unsigned long e = ERR_peek_error();
  return e != 0 && ERR_GET_LIB(e) == ERR_LIB_SSL && ERR_GET_REASON(e) >= SSL_AD_REASON_OFFSET;
}

}  // namespace

const char* peer_failure_name(PeerFailure failure) {
  switch (failure) {
    case PeerFailure::kNone:
      return "ok";
    case PeerFailure::kUnreachable:
      return "unreachable";
    case PeerFailure::kKeyMismatch:
      return "key_mismatch";
    case PeerFailure::kVersionMismatch:
      return "version_mismatch";
    case PeerFailure::kBroken:
      return "broken";
  }
  return "broken";
}

PeerConnection::~PeerConnection() = default;

Status PeerConnection::wait(bool write, Deadline deadline) {
  const bool releasable = release_fd_ >= 0 && released_ != nullptr;
  for (;;) {
    pollfd p[3] = {{fd_.get(), static_cast<short>(write ? POLLOUT : POLLIN), 0},
                   {stop_fd_, POLLIN, 0},
                   {releasable ? release_fd_ : -1, POLLIN, 0}};
    const int ms = millis_left(deadline);
    if (ms == 0) return Status::Failed("timed out");
    // A negative descriptor is ignored by poll().
    const int ready = ::poll(p, 3, ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return Status::Failed("poll: " + errno_text());
    if (ready == 0) return Status::Failed("timed out");
    if (stop_fd_ >= 0 && (p[1].revents & POLLIN)) return Status::Failed("stopping");
    if (releasable && (p[2].revents & POLLIN)) {
      // The flag is set before the byte is written (agent_sessions.cc), so a byte seen with
      // the flag clear is left over from a release already done: read it and wait on.
      if (released_->load())
        return Status::Failed(
            std::string("released: ") +
            (release_reason_ ? release_reason_ : "a new connection resumes its session"));
      char drain[64];
      while (::read(release_fd_, drain, sizeof drain) > 0) {
      }
      if (!(p[0].revents & (p[0].events | POLLERR | POLLHUP))) continue;
    }
    return Status::Ok();  // readable, writable, or an error the next call reports
  }
}

Status PeerConnection::handshake(Deadline deadline) {
  ERR_clear_error();
  for (;;) {
    const int rc = SSL_do_handshake(tls_->ssl());
    if (rc == 1) break;
    const int error = SSL_get_error(tls_->ssl(), rc);
    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
      Status waited = wait(error == SSL_ERROR_WANT_WRITE, deadline);
      if (!waited.ok()) return Status::Failed("TLS handshake: " + waited.message());
      continue;
    }
    if (error == SSL_ERROR_SYSCALL && ERR_peek_error() == 0)
      return Status::Io(errno == 0 ? "closed during the TLS handshake"
                                   : "TLS handshake: " + errno_text());
    const bool alert = alert_received();
    std::string why = take_openssl_errors("TLS handshake failed");
    return alert ? Status::Corrupt(why) : Status::Failed(why);
  }
  if (!tls_->used_cluster_key()) return Status::Failed("the handshake did not use the cluster key");
  return Status::Ok();
}

Result<std::unique_ptr<PeerConnection>> PeerConnection::connect(const PeerAddress& address,
                                                                std::shared_ptr<TlsContext> client,
                                                                Deadline deadline,
                                                                PeerFailure* failure,
                                                                const PeerRelease* release) {
  auto set = [&](PeerFailure f) {
    if (failure) *failure = f;
  };
  set(PeerFailure::kNone);
  auto fd = connect_to(address, deadline);
  if (!fd.ok()) {
    set(PeerFailure::kUnreachable);
    return fd.status();
  }
  const std::string key_id = client->key().id;
  auto tls = TlsSession::make(std::move(client), fd->get());
  if (!tls.ok()) {
    set(PeerFailure::kBroken);
    return tls.status();
  }
  std::unique_ptr<PeerConnection> connection(
      new PeerConnection(std::move(*fd), std::move(*tls), address.text()));
  if (release) connection->set_release(release->wake_fd, release->released, release->reason);
  Status shaken = connection->handshake(deadline);
  if (!shaken.ok()) {
    // The agent ends a handshake whose key it does not hold with an alert (or, seen from
    // here, by closing): either way our key is not its key.
    const bool refused = shaken.kind() == ErrorKind::kCorrupt || shaken.kind() == ErrorKind::kIo;
    if (shaken.message().find("timed out") != std::string::npos) {
      set(PeerFailure::kUnreachable);
      return Status::Failed(address.text() + ": " + shaken.message() +
                            " (it accepts connections but does not answer)");
    }
    set(refused ? PeerFailure::kKeyMismatch : PeerFailure::kBroken);
    if (refused)
      return Status::Failed(address.text() + " refused our cluster key (key id " + key_id +
                            (key_id == "none" ? ": no key file" : "") +
                            "): it holds another key, or none (" + shaken.message() + ")");
    return Status::Failed(address.text() + ": " + shaken.message());
  }
  return connection;
}

Result<std::unique_ptr<PeerConnection>> PeerConnection::accept(UniqueFd fd,
                                                               std::shared_ptr<TlsContext> server,
                                                               Deadline deadline, int stop_fd) {
  const std::string name = remote_name(fd.get());
  const std::string our_id = server->key().id;
  auto tls = TlsSession::make(std::move(server), fd.get());
  if (!tls.ok()) return tls.status();
  std::unique_ptr<PeerConnection> connection(
      new PeerConnection(std::move(fd), std::move(*tls), name));
  connection->stop_fd_ = stop_fd;
  Status shaken = connection->handshake(deadline);
  if (shaken.ok()) return connection;
  const std::string& offered = connection->tls_->offered_key_id();
  if (!offered.empty() && offered != our_id)
    return Status::Failed("key id " + offered + (offered == "none" ? " (no key file)" : "") +
                          ", this agent's is " + our_id);
  if (offered.empty() && shaken.message().find("timed out") == std::string::npos &&
      shaken.kind() != ErrorKind::kIo)
    return Status::Failed(
        "no cluster key offered (not a cairn peer, or not TLS 1.3: " + shaken.message() + ")");
  return Status::Failed(shaken.message());
}

Status PeerConnection::send(const Json& message, Deadline deadline) {
  auto frame = encode_frame(message);
  if (!frame.ok()) return frame.status();
  Status sent = send_bytes(*frame, deadline);
  // Kept even when the send failed: the peer may have it or not, which a resume settles.
  if (journal_ && !is_session_frame_type(message.value("type", std::string())))
    journal_->sent(message, std::move(*frame));
  return sent;
}

Status PeerConnection::send_bytes(std::string_view bytes, Deadline deadline) {
  ERR_clear_error();
  while (!bytes.empty()) {
    size_t written = 0;
    const int rc = SSL_write_ex(tls_->ssl(), bytes.data(), bytes.size(), &written);
    if (rc == 1) {
      bytes.remove_prefix(written);
      continue;
    }
    const int error = SSL_get_error(tls_->ssl(), rc);
    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
      Status waited = wait(error == SSL_ERROR_WANT_WRITE, deadline);
      if (!waited.ok()) return Status::Failed("sending to " + peer_name_ + ": " + waited.message());
      continue;
    }
    if (error == SSL_ERROR_SYSCALL && ERR_peek_error() == 0)
      return Status::Io("sending to " + peer_name_ + ": " +
                        (errno == 0 ? std::string("connection closed") : errno_text()));
    return Status::Io("sending to " + peer_name_ + ": " + take_openssl_errors("TLS error"));
  }
  return Status::Ok();
}

Result<std::optional<Json>> PeerConnection::receive(Deadline deadline) {
  ERR_clear_error();
  char buffer[16384];
  for (;;) {
    auto message = decoder_.next();
    if (message.ok() && message->has_value() && journal_ &&
        !is_session_frame_type((**message).value("type", std::string())))
      journal_->received(**message);
    if (!message.ok() || message->has_value()) return message;
    size_t got = 0;
    const int rc = SSL_read_ex(tls_->ssl(), buffer, sizeof buffer, &got);
    if (rc == 1) {
      decoder_.feed(std::string_view(buffer, got));
      continue;
    }
    const int error = SSL_get_error(tls_->ssl(), rc);
    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
      Status waited = wait(error == SSL_ERROR_WANT_WRITE, deadline);
      if (!waited.ok()) return waited;
      continue;
    }
    if (error == SSL_ERROR_ZERO_RETURN) {
      if (decoder_.buffered() == 0) return std::optional<Json>();
      return Status::Io("connection closed inside a frame");
    }
    if (error == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) {
      if (decoder_.buffered() == 0 && errno == 0) return std::optional<Json>();
      return Status::Io(errno == 0 ? std::string("connection closed without TLS close_notify")
                                   : errno_text());
    }
    // A peer that ends without close_notify between frames has simply gone.
    const unsigned long e = ERR_peek_error();
    if (ERR_GET_LIB(e) == ERR_LIB_SSL && ERR_GET_REASON(e) == SSL_R_UNEXPECTED_EOF_WHILE_READING &&
        decoder_.buffered() == 0) {
      ERR_clear_error();
      return std::optional<Json>();
    }
    return Status::Io(take_openssl_errors("TLS error"));
  }
}

Status PeerConnection::receive_raw(char* out, size_t n, Deadline deadline) {
  ERR_clear_error();
  size_t have = decoder_.take_raw(out, n);  // what came with the announcing frame
  while (have < n) {
    size_t got = 0;
    const int rc = SSL_read_ex(tls_->ssl(), out + have, n - have, &got);
    if (rc == 1) {
      have += got;
      continue;
    }
    const int error = SSL_get_error(tls_->ssl(), rc);
    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
      Status waited = wait(error == SSL_ERROR_WANT_WRITE, deadline);
      if (!waited.ok()) return waited;
      continue;
    }
    if (error == SSL_ERROR_ZERO_RETURN || (error == SSL_ERROR_SYSCALL && ERR_peek_error() == 0))
      return Status::Io("connection closed inside raw data");
    return Status::Io(take_openssl_errors("TLS error"));
  }
  return Status::Ok();
}

void PeerConnection::close(Deadline deadline) {
  ERR_clear_error();
  for (int round = 0; round < 4; ++round) {
    const int rc = SSL_shutdown(tls_->ssl());
    if (rc != 0 && rc != -1) return;
    if (rc == 0) return;  // our close_notify is out; not waiting for theirs
    const int error = SSL_get_error(tls_->ssl(), rc);
    if (error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE) break;
    if (!wait(error == SSL_ERROR_WANT_WRITE, deadline).ok()) break;
  }
  ERR_clear_error();
}

}  // namespace cairn
