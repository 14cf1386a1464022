// A peer client for the end-to-end tests (tests/e2e/test_peers.py) that does what cairn
// never does: it authenticates with a real key, then misbehaves — a hello of another
// protocol version, an oversized or malformed frame, an unknown request — so the tests can
// show that the agent refuses each with one line and keeps serving. Python's ssl module
// (3.11) has no TLS 1.3 external PSK, hence C++ on the same library cairn uses.
//
//   peer_test_client HOST:PORT KEY_FILE|none MODE
//   peer_test_client --serve-hello|--serve-refusal PROTOCOL KEY_FILE   (a fake agent)
// MODE: status | protocol=N | oversized | malformed | deep | untyped | unknown | silent |
//       run CWD PROGRAM ARGS... | run-term CWD PROGRAM ARGS... | request JSON |
//       code-pack TREE PACK_FILE (sends the file as a code pack for TREE, prints the answer,
//       then asks for the status to show the connection is still served)
//       | fetch-want FETCH_JSON WANT_JSON (sends a checkpoint_fetch, prints the manifest, answers
//       it with WANT_JSON, a checkpoint_want cairn would not send, and prints the next reply)
// Prints the agent's reply as one JSON line, "closed" when it closed the connection, or
// "error: …"; exits 0 when it got that far, 1 when it could not connect.
#include <signal.h>
#include <sys/socket.h>

#include <chrono>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>

#include "common/file_util.h"
#include "peer/chunk_stream.h"
#include "peer/key_location.h"
#include "peer/peer_address.h"
#include "peer/peer_connection.h"
#include "peer/peer_protocol.h"
#include "peer/rank_messages.h"

using namespace cairn;

namespace {

std::string header(uint32_t n) {
  return {static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8),
          static_cast<char>(n)};
}

void print_reply(PeerConnection& peer, Deadline deadline) {
  auto reply = peer.receive(deadline);
  if (!reply.ok())
    std::cout << "error: " << reply.status().message() << "\n";
  else if (!reply->has_value())
    std::cout << "closed\n";
  else
    std::cout << (*reply)->dump() << "\n";
}

}  // namespace

// A fake agent for one connection: listens on 127.0.0.1 (port printed on stdout), completes
// the handshake, reads the hello and answers either with a hello of `protocol` (a newer
// agent) or, when `refuse`, with a version_mismatch refusal naming `protocol`.
int serve(const std::string& key_file, int64_t protocol, bool refuse) {
  auto key = find_cluster_key(key_file);
  if (!key.ok()) return 2;
  auto tls = TlsContext::make(TlsContext::Side::kServer, *key);
  auto listener = listen_on(PeerAddress{"127.0.0.1", 0});
  if (!tls.ok() || !listener.ok()) return 2;
  std::cout << local_port(listener->get()) << std::endl;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    UniqueFd fd(::accept4(listener->get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (fd) {
      auto peer = PeerConnection::accept(std::move(fd), *tls, deadline);
      if (!peer.ok()) return 1;
      (void)(*peer)->receive(deadline);
      Json reply = refuse ? refusal_message("no") : hello_message("agent");
      if (refuse) reply["code"] = "version_mismatch";
      reply["protocol"] = protocol;
      reply["cairn"] = "9.9.9";
      (void)(*peer)->send(reply, deadline);
      (*peer)->close(deadline);
      return 0;
    }
    if (std::chrono::steady_clock::now() > deadline) return 1;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

int main(int argc, char** argv) {
  if (argc == 4 && std::strncmp(argv[1], "--serve-", 8) == 0) {
    ::signal(SIGPIPE, SIG_IGN);
    const bool refuse = std::strcmp(argv[1], "--serve-refusal") == 0;
    return serve(argv[3], std::stoll(argv[2]), refuse);
  }
  if (argc < 4 || (argc > 4 && std::strcmp(argv[3], "run") != 0 &&
                   std::strcmp(argv[3], "run-term") != 0 && std::strcmp(argv[3], "request") != 0 &&
                   !(argc == 6 && (std::strcmp(argv[3], "code-pack") == 0 ||
                                   std::strcmp(argv[3], "fetch-want") == 0)))) {
    std::cerr << "usage: peer_test_client HOST:PORT KEY_FILE MODE\n";
    return 2;
  }
  ::signal(SIGPIPE, SIG_IGN);
  auto address = parse_peer_address(argv[1]);
  // KEY_FILE "none": no key, as a side without a key file uses.
  auto key = std::strcmp(argv[2], "none") == 0 ? Result<ClusterKey>(no_cluster_key())
                                               : find_cluster_key(argv[2]);
  if (!address.ok() || !key.ok()) {
    std::cerr << "bad address or key\n";
    return 2;
  }
  auto tls = TlsContext::make(TlsContext::Side::kClient, *key);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  PeerFailure failure;
  auto connection = PeerConnection::connect(*address, *tls, deadline, &failure);
  if (!connection.ok()) {
    std::cout << "error: " << connection.status().message() << "\n";
    return 1;
  }
  PeerConnection& peer = **connection;
  const std::string mode = argv[3];
  if (mode == "silent") {
    // Says nothing after the handshake; the agent must give up on its own.
    print_reply(peer, deadline);
    return 0;
  }
  Json hello = hello_message("coordinator");
  if (mode.rfind("protocol=", 0) == 0) hello["protocol"] = std::stoll(mode.substr(9));
  (void)peer.send(hello, deadline);
  print_reply(peer, deadline);
  if (mode.rfind("protocol=", 0) == 0) return 0;
  if (mode == "run" || mode == "run-term") {
    // run CWD PROGRAM ARGS...: launch rank 7, print every frame up to its exit; run-term
    // sends SIGTERM once it is launched.
    RemoteLaunch launch;
    launch.rank = 7;
    launch.cwd = argc > 4 ? argv[4] : "";
    for (int i = 5; i < argc; ++i) launch.argv.push_back(argv[i]);
    launch.env = {{"PATH", "/usr/bin:/bin"}, {"GREETING", "hello from the agent"}};
    (void)peer.send(launch_message(launch), deadline);
    for (;;) {
      auto reply = peer.receive(deadline);
      if (!reply.ok() || !reply->has_value()) {
        std::cout << (reply.ok() ? "closed" : "error: " + reply.status().message()) << "\n";
        return 0;
      }
      std::cout << (*reply)->dump() << std::endl;
      const std::string type = (**reply)["type"];
      if (type == "launched" && mode == "run-term")
        (void)peer.send(Json{{"type", "signal"}, {"rank", 7}, {"signal", SIGTERM}}, deadline);
      if (type == "exit" || type == "error") return 0;
    }
  }
  if (mode == "code-pack") {
    auto pack = read_file(argv[5]);
    if (!pack.ok()) {
      std::cerr << pack.status().message() << "\n";
      return 2;
    }
    (void)peer.send(Json{{"type", "code_pack"}, {"tree", argv[4]}, {"bytes", pack->size()}},
                    deadline);
    (void)send_chunks(peer, *pack, deadline);
    print_reply(peer, deadline);
    (void)peer.send(Json{{"type", "status"}}, deadline);
    print_reply(peer, deadline);
    return 0;
  }
  if (mode == "fetch-want") {
    auto fetch = Json::parse(argv[4], nullptr, false);
    auto want = Json::parse(argv[5], nullptr, false);
    if (!fetch.is_object() || !want.is_object()) {
      std::cerr << "fetch-want: not JSON objects\n";
      return 2;
    }
    (void)peer.send(fetch, deadline);
    print_reply(peer, deadline);  // the manifest (or a refusal)
    (void)peer.send(want, deadline);
    print_reply(peer, deadline);  // a refusal, or the first chunk's header
    return 0;
  }
  if (mode == "status") {
    (void)peer.send(Json{{"type", "status"}}, deadline);
  } else if (mode == "oversized") {
    // The header announces 64 MiB; only the header is sent.
    (void)peer.send_bytes(header(64u << 20), deadline);
  } else if (mode == "malformed") {
    (void)peer.send_bytes(header(9) + "{not json", deadline);
  } else if (mode == "deep") {
    const std::string body = std::string(5000, '[') + std::string(5000, ']');
    (void)peer.send_bytes(header(static_cast<uint32_t>(body.size())) + body, deadline);
  } else if (mode == "untyped") {
    (void)peer.send_bytes(header(7) + "{\"a\":1}", deadline);
  } else if (mode == "control") {
    // Control frames an agent must refuse, one log line each, then a status request that
    // must still be answered (docs/peers.md "The control channel through the agent").
    for (const Json& frame : {Json{{"type", "control_open"}, {"stream", 1}, {"rank", 0}},
                              Json{{"type", "control_data"}, {"stream", 99}, {"data", "aGVsbG8K"}},
                              Json{{"type", "control_data"}, {"stream", 1}, {"data", 7}},
                              Json{{"type", "control_close"}, {"stream", 5}},
                              Json{{"type", "control_ack"}, {"stream", 1}, {"bytes", "x"}}})
      (void)peer.send(frame, deadline);
    (void)peer.send(Json{{"type", "status"}}, deadline);
  } else if (mode == "unknown") {
    (void)peer.send(Json{{"type", "launch-the-missiles"}}, deadline);
  } else if (mode == "request" && argc > 4) {
    // request JSON: any request as cairn would frame it (checkpoint requests that cairn
    // itself never sends: paths outside, bad manifests, unknown attempts).
    auto request = Json::parse(argv[4], nullptr, false);
    if (request.is_discarded() || !request.is_object()) {
      std::cerr << "request: not a JSON object\n";
      return 2;
    }
    (void)peer.send(request, deadline);
    print_reply(peer, deadline);
    return 0;
  } else {
    std::cerr << "unknown mode " << mode << "\n";
    return 2;
  }
  print_reply(peer, deadline);
  // After a refusal the agent closes the connection.
  if (mode != "status" && mode != "unknown" && mode != "control") print_reply(peer, deadline);
  return 0;
}
