#include "engine/coordinator/control_channel.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <cstring>

namespace cairn {
namespace fs = std::filesystem;

bool ControlConnection::read_available() {
  char buf[65536];
  for (;;) {
    ssize_t n = ::recv(fd_.get(), buf, sizeof buf, 0);
    if (n > 0) {
      receive(std::string_view(buf, static_cast<size_t>(n)));
      continue;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

void ControlConnection::receive(std::string_view data) {
  if (dropping_) {
    const size_t nl = data.find('\n');
    if (nl == std::string_view::npos) return;
    dropping_ = false;
    data.remove_prefix(nl + 1);
  }
  in_.append(data);
  if (const size_t nl = data.rfind('\n'); nl != std::string_view::npos)
    line_start_ = in_.size() - (data.size() - nl - 1);
  if (in_.size() - line_start_ > kMaxLineBytes) {
    in_.resize(line_start_);
    dropping_ = true;
    ++overlong_lines_;
  }
}

std::vector<std::string> ControlConnection::take_lines() {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t nl = in_.find('\n', start);
    if (nl == std::string::npos) break;
    if (nl > start) out.emplace_back(in_, start, nl - start);
    start = nl + 1;
  }
  in_.erase(0, start);
  line_start_ = 0;  // what is left has no newline
  return out;
}

void ControlConnection::send(const Json& message) {
  out_ += message.dump(-1, ' ', false, Json::error_handler_t::replace);
  out_ += '\n';
}

bool ControlConnection::flush() {
  while (!out_.empty()) {
    ssize_t n = ::send(fd_.get(), out_.data(), out_.size(), MSG_NOSIGNAL);
    if (n > 0) {
      out_.erase(0, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    return false;
  }
  return true;
}

Result<ControlListener> ControlListener::listen(const fs::path& dir, const std::string& name) {
  ControlListener l;
  fs::path path = dir / name;
  sockaddr_un addr{};
  if (path.string().size() >= sizeof(addr.sun_path)) {
    char tmpl[] = "/tmp/cairn-XXXXXX";
    if (!::mkdtemp(tmpl)) return Status::Io("mkdtemp: " + errno_text());
    l.owned_dir_ = tmpl;
    path = l.owned_dir_ / "control.sock";
  }
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  fs::remove(path, ec);
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return Status::Io("socket: " + errno_text());
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    return Status::Io("cannot bind the control socket " + path.string() + ": " + errno_text());
  if (::listen(fd.get(), 128) != 0) return Status::Io("listen: " + errno_text());
  l.fd_ = std::move(fd);
  l.path_ = path;
  return l;
}

ControlListener::~ControlListener() {
  std::error_code ec;
  if (!fd_) return;
  fs::remove(path_, ec);
  if (!owned_dir_.empty()) fs::remove_all(owned_dir_, ec);
}

std::vector<UniqueFd> ControlListener::accept_all() {
  std::vector<UniqueFd> out;
  for (;;) {
    int c = ::accept4(fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (c < 0) {
      if (errno == EINTR) continue;
      break;
    }
    out.emplace_back(c);
  }
  return out;
}

}  // namespace cairn
