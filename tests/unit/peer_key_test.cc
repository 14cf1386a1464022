#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>
#include <thread>

#include "common/file_util.h"
#include "peer/cluster_key.h"
#include "peer/key_location.h"
#include "peer/peer_address.h"
#include "peer/peer_connection.h"
#include "tests/unit/test_dir.h"

namespace cairn {
namespace {

using testing::TestDir;

mode_t mode_of(const std::filesystem::path& file) {
  struct stat st {};
  ::stat(file.c_str(), &st);
  return st.st_mode & 07777;
}

TEST_CASE("cluster key: a new key is 32 random bytes, mode 0600, never overwritten") {
  TestDir dir;
  const auto file = dir / "sub" / "cluster.key";
  auto key = write_new_cluster_key(file);
  REQUIRE(key.ok());
  CHECK(key->bytes.size() == kNewClusterKeyBytes);
  CHECK(key->id.size() == 16);
  CHECK(key->id == cluster_key_id(key->bytes));
  CHECK(key->id.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(mode_of(file) == 0600);
  auto loaded = load_cluster_key(file);
  REQUIRE(loaded.ok());
  CHECK(loaded->bytes == key->bytes);
  auto again = write_new_cluster_key(file);
  REQUIRE_FALSE(again.ok());
  CHECK(again.status().message().find("already exists") != std::string::npos);
  CHECK(load_cluster_key(file)->bytes == key->bytes);
  auto other = write_new_cluster_key(dir / "other.key");
  REQUIRE(other.ok());
  CHECK(other->bytes != key->bytes);
}

TEST_CASE("cluster key: a key others may read, or of the wrong size, is refused with one line") {
  TestDir dir;
  const auto file = dir / "k";
  REQUIRE(write_file_atomic(file, std::string(32, 'x')).ok());
  ::chmod(file.c_str(), 0640);
  auto loose = load_cluster_key(file);
  REQUIRE_FALSE(loose.ok());
  CHECK(loose.status().kind() == ErrorKind::kBadInput);
  CHECK(loose.status().message() == "key file " + file.string() +
                                        " has mode 0640: group and others must have no access "
                                        "(chmod 600 " +
                                        file.string() + ")");
  ::chmod(file.c_str(), 0604);
  CHECK_FALSE(load_cluster_key(file).ok());
  ::chmod(file.c_str(), 0400);
  CHECK(load_cluster_key(file).ok());

  const auto small = dir / "small";
  REQUIRE(write_file_atomic(small, "short").ok());
  ::chmod(small.c_str(), 0600);
  auto short_key = load_cluster_key(small);
  REQUIRE_FALSE(short_key.ok());
  CHECK(short_key.status().message().find("has 5 bytes") != std::string::npos);
  CHECK(load_cluster_key(dir / "missing").status().kind() == ErrorKind::kNotFound);
  CHECK(load_cluster_key(dir.path()).status().message().find("not a regular file") !=
        std::string::npos);
}

TEST_CASE("cluster key: found from the option, then CAIRN_KEY_FILE, then the default file") {
  TestDir dir;
  const std::string old_home = std::getenv("HOME") ? std::getenv("HOME") : "";
  const char* old_xdg = std::getenv("XDG_CONFIG_HOME");
  const std::string saved_xdg = old_xdg ? old_xdg : "";
  ::unsetenv("CAIRN_KEY_FILE");
  ::setenv("XDG_CONFIG_HOME", dir.path().c_str(), 1);
  // No default file: no key.
  auto none = find_cluster_key("");
  REQUIRE(none.ok());
  CHECK(none->none());
  auto fallback = write_new_cluster_key(dir / "cairn" / "cluster.key");
  REQUIRE(fallback.ok());
  std::filesystem::path source;
  CHECK(find_cluster_key("", &source)->id == fallback->id);
  CHECK(source == dir / "cairn" / "cluster.key");
  auto from_env = write_new_cluster_key(dir / "env.key");
  ::setenv("CAIRN_KEY_FILE", (dir / "env.key").c_str(), 1);
  CHECK(find_cluster_key("")->id == from_env->id);
  auto from_option = write_new_cluster_key(dir / "option.key");
  CHECK(find_cluster_key((dir / "option.key").string())->id == from_option->id);
  // An explicit file that is missing is an error, not "no key".
  CHECK(find_cluster_key((dir / "missing").string()).status().kind() == ErrorKind::kNotFound);
  ::setenv("CAIRN_KEY_FILE", (dir / "missing").c_str(), 1);
  CHECK_FALSE(find_cluster_key("").ok());
  ::unsetenv("CAIRN_KEY_FILE");
  if (old_xdg)
    ::setenv("XDG_CONFIG_HOME", saved_xdg.c_str(), 1);
  else
    ::unsetenv("XDG_CONFIG_HOME");
}

TEST_CASE("peer addresses: host:port, host alone, bracketed IPv6; bad ones named") {
  auto a = parse_peer_address("gpu1:7071");
  REQUIRE(a.ok());
  CHECK(a->host == "gpu1");
  CHECK(a->port == 7071);
  CHECK(parse_peer_address("gpu1")->port == kDefaultAgentPort);
  CHECK(parse_peer_address("[::1]:9")->host == "::1");
  CHECK(parse_peer_address("[::1]:9")->text() == "[::1]:9");
  CHECK(parse_peer_address(":7070")->host.empty());
  CHECK(parse_peer_address("a:0")->port == 0);  // listening: any free port
  for (const char* bad : {"", "a:", "a:65536", "a:x", "::1:7070", "[::1", "[::1]x", "a b:1"}) {
    auto parsed = parse_peer_address(bad);
    CHECK_MESSAGE(!parsed.ok(), bad);
    if (!parsed.ok()) CHECK(parsed.status().message().find("bad peer address") == 0);
  }
  auto list = parse_peer_list(" a:1, b ,,[::1]:3");
  REQUIRE(list.ok());
  REQUIRE(list->size() == 3);
  CHECK((*list)[1].text() == "b:7070");
  CHECK_FALSE(parse_peer_list("a:1,b:x").ok());
  CHECK(*is_loopback_host("127.0.0.1"));
  CHECK(*is_loopback_host("::1"));
  CHECK_FALSE(*is_loopback_host("0.0.0.0"));
  CHECK_FALSE(*is_loopback_host(""));
}

// Both ends of a handshake over a socket pair, the server in a thread.
struct Handshake {
  Status client, server;
  PeerFailure failure = PeerFailure::kNone;
};

Handshake handshake(const ClusterKey& client_key, const ClusterKey& server_key) {
  ::signal(SIGPIPE, SIG_IGN);  // as cairn does: an alert to a closed end must not kill us
  int fds[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds) == 0);
  UniqueFd client_fd(fds[0]), server_fd(fds[1]);
  auto client_tls = TlsContext::make(TlsContext::Side::kClient, client_key);
  auto server_tls = TlsContext::make(TlsContext::Side::kServer, server_key);
  REQUIRE(client_tls.ok());
  REQUIRE(server_tls.ok());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  Handshake result;
  std::thread server([&] {
    auto accepted = PeerConnection::accept(std::move(server_fd), *server_tls, deadline);
    if (!accepted.ok()) {
      result.server = accepted.status();
      return;
    }
    auto message = (*accepted)->receive(deadline);
    if (!message.ok())
      result.server = message.status();
    else if (!message->has_value())
      result.server = Status::Failed("closed");
    else
      (void)(*accepted)->send(**message, deadline);  // echo
  });
  auto tls = TlsSession::make(*client_tls, client_fd.get());
  REQUIRE(tls.ok());
  // PeerConnection::connect makes its own socket: drive the handshake over the pair here.
  SSL* ssl = (*tls)->ssl();
  for (;;) {
    const int rc = SSL_do_handshake(ssl);
    if (rc == 1) break;
    const int error = SSL_get_error(ssl, rc);
    if (error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE) {
      result.client = Status::Failed(take_openssl_errors("handshake failed"));
      break;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      result.client = Status::Failed("timed out");
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (result.client.ok() && !(*tls)->used_cluster_key())
    result.client = Status::Failed("no PSK used");
  if (!result.client.ok())
    client_fd.reset();  // the server's read ends
  else
    tls->reset();  // closes without close_notify
  client_fd.reset();
  server.join();
  return result;
}

TEST_CASE("peer TLS: the same key authenticates both ends; another key is refused, named") {
  const ClusterKey a{std::string(32, 'a'), cluster_key_id(std::string(32, 'a'))};
  const ClusterKey b{std::string(32, 'b'), cluster_key_id(std::string(32, 'b'))};
  Handshake same = handshake(a, a);
  CHECK(same.client.ok());

  Handshake other = handshake(b, a);
  CHECK_FALSE(other.client.ok());
  REQUIRE_FALSE(other.server.ok());
  CHECK(other.server.message() == "key id " + b.id + ", this agent's is " + a.id);

  Handshake keyless = handshake(no_cluster_key(), a);
  CHECK_FALSE(keyless.client.ok());
  CHECK(keyless.server.message() == "key id none (no key file), this agent's is " + a.id);

  Handshake none_both = handshake(no_cluster_key(), no_cluster_key());
  CHECK(none_both.client.ok());
}

}  // namespace
}  // namespace cairn
