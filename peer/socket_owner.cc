#include "peer/socket_owner.h"

#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/file_util.h"

namespace cairn {

namespace {

// Both ends of a connection, as this end sees them; IPv4 ones in IPv6 sockets unmapped.
struct Ends {
  int family = AF_UNSPEC;
  uint8_t local[16] = {}, remote[16] = {};   // 4 bytes used for AF_INET
  uint16_t local_port = 0, remote_port = 0;  // host order
};

void take(const sockaddr_storage& ss, int* family, uint8_t* address, uint16_t* port) {
  if (ss.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(ss);
    *family = AF_INET;
    std::memcpy(address, &in.sin_addr, 4);
    *port = ntohs(in.sin_port);
  } else if (ss.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(ss);
    *port = ntohs(in6.sin6_port);
    if (IN6_IS_ADDR_V4MAPPED(&in6.sin6_addr)) {
      *family = AF_INET;
      std::memcpy(address, in6.sin6_addr.s6_addr + 12, 4);
    } else {
      *family = AF_INET6;
      std::memcpy(address, in6.sin6_addr.s6_addr, 16);
    }
  }
}

Result<Ends> ends_of(int fd) {
  sockaddr_storage local{}, remote{};
  socklen_t local_length = sizeof local, remote_length = sizeof remote;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_length) != 0 ||
      ::getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &remote_length) != 0)
    return Status::Io("not a connected socket: " + errno_text());
  Ends e;
  int remote_family = AF_UNSPEC;
  take(local, &e.family, e.local, &e.local_port);
  take(remote, &remote_family, e.remote, &e.remote_port);
  if (e.family == AF_UNSPEC || e.family != remote_family)
    return Status::Io("not a TCP/IP connection");
  return e;
}

// A full socket at the other end, alive: not TIME_WAIT (whose owner reads 0), not a
// listener or a half-open one.
bool live_state(int state) {
  switch (state) {
    case TCP_ESTABLISHED:
    case TCP_FIN_WAIT1:
    case TCP_FIN_WAIT2:
    case TCP_CLOSE_WAIT:
    case TCP_CLOSING:
    case TCP_LAST_ACK:
      return true;
    default:
      return false;
  }
}

Status not_found(const Ends&) {
  return Status::NotFound("no live socket on this machine is the other end of the connection");
}

}  // namespace

Result<uid_t> connection_peer_uid_sock_diag(int fd) {
  auto ends = ends_of(fd);
  if (!ends.ok()) return ends.status();
  UniqueFd nl(::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
  if (!nl) return Status::Io("sock_diag: " + errno_text());
  struct {
    nlmsghdr header;
    inet_diag_req_v2 request;
  } message{};
  message.header.nlmsg_len = sizeof message;
  message.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  message.header.nlmsg_flags = NLM_F_REQUEST;  // no NLM_F_DUMP: the one socket of the 4-tuple
  message.request.sdiag_family = static_cast<uint8_t>(ends->family);
  message.request.sdiag_protocol = IPPROTO_TCP;
  message.request.idiag_states = ~0u;
  // The other end's socket: its source is our remote end, its destination our local one.
  inet_diag_sockid& id = message.request.id;
  id.idiag_sport = htons(ends->remote_port);
  id.idiag_dport = htons(ends->local_port);
  const size_t bytes = ends->family == AF_INET ? 4 : 16;
  std::memcpy(id.idiag_src, ends->remote, bytes);
  std::memcpy(id.idiag_dst, ends->local, bytes);
  id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
  id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (::sendto(nl.get(), &message, sizeof message, 0, reinterpret_cast<sockaddr*>(&kernel),
               sizeof kernel) < 0)
    return Status::Io("sock_diag: " + errno_text());
  // One answer (or one error) for an exact lookup; bounded so a silent kernel cannot hang us.
  timeval wait{2, 0};
  ::setsockopt(nl.get(), SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
  alignas(nlmsghdr) char buffer[8192];
  const ssize_t got = ::recv(nl.get(), buffer, sizeof buffer, 0);
  if (got < 0) return Status::Io("sock_diag: " + errno_text());
  int length = static_cast<int>(got);
  for (auto* h = reinterpret_cast<nlmsghdr*>(buffer); NLMSG_OK(h, length);
       h = NLMSG_NEXT(h, length)) {
    if (h->nlmsg_type == NLMSG_ERROR) {
      const auto* error = static_cast<const nlmsgerr*>(NLMSG_DATA(h));
      if (error->error == -ENOENT) return not_found(*ends);
      return Status::Io(std::string("sock_diag: ") + std::strerror(-error->error));
    }
    if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY || h->nlmsg_len < NLMSG_LENGTH(sizeof(inet_diag_msg)))
      continue;
    const auto* found = static_cast<const inet_diag_msg*>(NLMSG_DATA(h));
    // The kernel's lookup falls back to a listener on the port: only the exact end counts.
    if (found->id.idiag_sport != id.idiag_sport || found->id.idiag_dport != id.idiag_dport ||
        !live_state(found->idiag_state))
      return not_found(*ends);
    return static_cast<uid_t>(found->idiag_uid);
  }
  return Status::Io("sock_diag: no answer");
}

Result<uid_t> connection_peer_uid_proc(int fd) {
  auto ends = ends_of(fd);
  if (!ends.ok()) return ends.status();
  // /proc/net/tcp prints each 32-bit word of an address as the host-order integer it is
  // in memory ("0100007F" for 127.0.0.1 here), then the port in hex.
  auto text = [&](const uint8_t* address, uint16_t port) {
    std::string out;
    char word[16];
    for (size_t i = 0; i < (ends->family == AF_INET ? 1u : 4u); ++i) {
      uint32_t value;
      std::memcpy(&value, address + 4 * i, 4);
      std::snprintf(word, sizeof word, "%08X", value);
      out += word;
    }
    std::snprintf(word, sizeof word, ":%04X", port);
    return out + word;
  };
  const std::string want_local = text(ends->remote, ends->remote_port);
  const std::string want_remote = text(ends->local, ends->local_port);
  const char* path = ends->family == AF_INET ? "/proc/net/tcp" : "/proc/net/tcp6";
  std::ifstream in(path);
  if (!in) return Status::Io(std::string("cannot read ") + path);
  std::string row;
  std::getline(in, row);  // the header
  while (std::getline(in, row)) {
    // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid …
    std::istringstream fields(row);
    std::string slot, local, remote, state, queues, timer, retransmits;
    long uid = -1;
    if (!(fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid))
      continue;
    if (local != want_local || remote != want_remote) continue;
    if (!live_state(static_cast<int>(std::strtol(state.c_str(), nullptr, 16)))) continue;
    return static_cast<uid_t>(uid);
  }
  return not_found(*ends);
}

Result<uid_t> connection_peer_uid(int fd) {
  auto found = connection_peer_uid_sock_diag(fd);
  if (found.ok() || found.status().kind() == ErrorKind::kNotFound) return found;
  // No sock_diag here (a kernel without inet_diag, a sandbox that forbids netlink).
  auto listed = connection_peer_uid_proc(fd);
  if (listed.ok() || listed.status().kind() == ErrorKind::kNotFound) return listed;
  return Status::Io(found.status().message() + "; " + listed.status().message());
}

std::string other_user_refusal(int fd, const std::string& other, const std::string& self) {
  const uid_t own = ::geteuid();
  auto uid = connection_peer_uid(fd);
  const std::string fix =
      "a keyless agent serves its own user only (run both as one user, or give both a "
      "cluster key: cairn agent --new-key)";
  if (!uid.ok())
    return "cannot tell which user the " + other + " runs as (" + uid.status().message() +
           "): " + fix;
  if (*uid == own) return "";
  return "the " + other + " runs as uid " + std::to_string(*uid) + ", not as " + self + " uid " +
         std::to_string(own) + ": " + fix;
}

}  // namespace cairn
