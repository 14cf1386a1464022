// socket_owner.h: the user at the other end of a TCP connection on this machine, through
// sock_diag and through /proc/net, for IPv4 and IPv6 loopback, and for another user where
// this process may become one ("[needs second_user]").
#include <arpa/inet.h>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>

#include "cairn_skip.h"
#include "common/file_util.h"
#include "peer/socket_owner.h"

namespace cairn {
namespace {

struct Loopback {
  UniqueFd listener, client, server;
};

// A listening socket on loopback (IPv4 or IPv6) and its address.
bool listen_loopback(int family, UniqueFd* listener, sockaddr_storage* address, socklen_t* length) {
  listener->reset(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!*listener) return false;
  *address = {};
  if (family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(address);
    in->sin_family = AF_INET;
    in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    *length = sizeof *in;
  } else {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(address);
    in6->sin6_family = AF_INET6;
    in6->sin6_addr = in6addr_loopback;
    *length = sizeof *in6;
  }
  if (::bind(listener->get(), reinterpret_cast<sockaddr*>(address), *length) != 0 ||
      ::listen(listener->get(), 4) != 0)
    return false;
  return ::getsockname(listener->get(), reinterpret_cast<sockaddr*>(address), length) == 0;
}

bool connect_loopback(int family, Loopback* c) {
  sockaddr_storage address;
  socklen_t length;
  if (!listen_loopback(family, &c->listener, &address, &length)) return false;
  c->client.reset(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (::connect(c->client.get(), reinterpret_cast<sockaddr*>(&address), length) != 0) return false;
  c->server.reset(::accept4(c->listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  return static_cast<bool>(c->server);
}

void both_ends_are_mine(int family) {
  Loopback c;
  REQUIRE(connect_loopback(family, &c));
  for (int fd : {c.server.get(), c.client.get()}) {
    auto diag = connection_peer_uid_sock_diag(fd);
    auto proc = connection_peer_uid_proc(fd);
    auto either = connection_peer_uid(fd);
    REQUIRE(proc.ok());
    CHECK(*proc == ::geteuid());
    REQUIRE(either.ok());
    CHECK(*either == ::geteuid());
    // sock_diag may be missing (a sandbox); where it answers it agrees.
    if (diag.ok()) CHECK(*diag == ::geteuid());
    CHECK(other_user_refusal(fd, "coordinator", "this agent's").empty());
  }
  // A listening socket has no other end.
  CHECK_FALSE(connection_peer_uid(c.listener.get()).ok());
}

TEST_CASE("socket owner: both ends of a loopback connection are this user's (IPv4)") {
  both_ends_are_mine(AF_INET);
}

TEST_CASE("socket owner: both ends of a loopback connection are this user's [needs ipv6]") {
  UniqueFd probe(::socket(AF_INET6, SOCK_STREAM, 0));
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  if (!probe || ::bind(probe.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    CAIRN_SKIP("needs ipv6: cannot bind [::1]: " << errno_text());
    return;
  }
  both_ends_are_mine(AF_INET6);
}

TEST_CASE("socket owner: an end that is gone is not found, whatever TIME_WAIT shows") {
  Loopback c;
  REQUIRE(connect_loopback(AF_INET, &c));
  // The client closes first, then the server: the client's end lingers in TIME_WAIT,
  // owned by uid 0 in the kernel's tables, and must not be taken for anyone's.
  c.client.reset();
  pollfd p{c.server.get(), POLLIN, 0};
  REQUIRE(::poll(&p, 1, 5000) == 1);
  char byte;
  REQUIRE(::read(c.server.get(), &byte, 1) == 0);
  ::shutdown(c.server.get(), SHUT_WR);
  auto gone = connection_peer_uid(c.server.get());
  // getpeername may already fail once both directions are shut; either way, no owner.
  CHECK_FALSE(gone.ok());
}

TEST_CASE("socket owner: another user's end is told apart [needs second_user]") {
  sockaddr_storage address;
  socklen_t length;
  UniqueFd listener;
  REQUIRE(listen_loopback(AF_INET, &listener, &address, &length));
  int ready[2];
  REQUIRE(::pipe2(ready, O_CLOEXEC) == 0);
  const uid_t other = 65534;  // nobody
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // Only async-signal-safe calls here: become the other user, connect, wait to be told.
    ::close(ready[1]);
    if (::setresgid(other, other, other) != 0 || ::setresuid(other, other, other) != 0) ::_exit(77);
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&address), length) != 0) ::_exit(1);
    char byte;
    (void)!::read(ready[0], &byte, 1);  // until the parent has looked
    ::_exit(0);
  }
  ::close(ready[0]);
  UniqueFd done(ready[1]);
  pollfd p{listener.get(), POLLIN, 0};
  const bool connected = ::poll(&p, 1, 10000) == 1;
  if (!connected) {
    done.reset();
    int status = 0;
    ::waitpid(child, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
      CAIRN_SKIP("needs second_user: cannot become uid 65534 (no CAP_SETUID)");
      return;
    }
    FAIL("the other user's process did not connect");
  }
  UniqueFd server(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  REQUIRE(server);
  auto proc = connection_peer_uid_proc(server.get());
  auto either = connection_peer_uid(server.get());
  auto diag = connection_peer_uid_sock_diag(server.get());
  const std::string refusal = other_user_refusal(server.get(), "coordinator", "this agent's");
  done.reset();
  int status = 0;
  ::waitpid(child, &status, 0);
  CHECK(WIFEXITED(status));
  REQUIRE(proc.ok());
  CHECK(*proc == other);
  REQUIRE(either.ok());
  CHECK(*either == other);
  if (diag.ok()) CHECK(*diag == other);
  CHECK(refusal.find("the coordinator runs as uid 65534, not as this agent's uid " +
                     std::to_string(::geteuid())) == 0);
}

}  // namespace
}  // namespace cairn
