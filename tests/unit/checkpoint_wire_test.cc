// Content on the wire (peer/checkpoint_wire.h, peer/content_sink.h): what send_content
// writes, receive_content takes back byte for byte — small contents hashed on the receiving
// thread, large ones on a thread of their own, an empty one as one empty chunk — and what a
// hostile sender may put on the wire instead is refused: content that does not hash to its
// digest, a chunk header naming another digest or offset, a chunk larger than the bound or
// than what is left, a connection that ends inside a chunk. Over a real TLS connection on
// loopback.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>
#include <utility>
#include <vector>

#include "common/file_util.h"
#include "common/sha256.h"
#include "peer/checkpoint_want.h"
#include "peer/checkpoint_wire.h"
#include "peer/cluster_key.h"
#include "peer/content_sink.h"
#include "peer/frame.h"
#include "peer/peer_address.h"
#include "peer/peer_connection.h"
#include "tests/unit/test_dir.h"
#include "tests/unit/tls_pair.h"

namespace cairn {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using testing::TestDir;

const ClusterKey kKey{std::string(32, 'w'), cluster_key_id(std::string(32, 'w'))};

// Two ends of an authenticated connection in this process.
struct Pair {
  Pair() { ::signal(SIGPIPE, SIG_IGN); }  // a sender whose receiver went first gets EPIPE instead
  testing::TlsPair tls{kKey};
  std::unique_ptr<PeerConnection>& sender = tls.accepted;
  std::unique_ptr<PeerConnection>& receiver = tls.connected;
};

std::string content(size_t n, char seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed + i * 13 + i / 4093);
  return s;
}

// Sends `bytes` with send_content from a file, on a thread, while this thread receives it
// into `out` as `digest`.
Status round_trip(const TestDir& dir, const std::string& bytes, const std::string& digest,
                  const fs::path& out, uint64_t* received) {
  Pair pair;
  const fs::path in = dir.path() / "in.bin";
  REQUIRE(write_file_atomic(in, bytes).ok());
  UniqueFd in_fd(::open(in.c_str(), O_RDONLY | O_CLOEXEC));
  REQUIRE(in_fd);
  uint64_t sent = 0;
  Status send_status;
  std::thread sending(
      [&] { send_status = send_content(*pair.sender, in_fd.get(), digest, bytes.size(), &sent); });
  UniqueFd out_fd(::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  REQUIRE(out_fd);
  Status got =
      receive_content(*pair.receiver, digest, bytes.size(), out_fd.get(), /*sync=*/true, received);
  if (!got.ok()) pair.receiver.reset();  // a sender blocked on a full socket sees it close
  sending.join();
  if (got.ok()) {
    CHECK(send_status.ok());
    CHECK(sent == bytes.size());
  }
  return got;
}

// A chunk's header frame as send_content writes it.
std::string chunk_header(const std::string& digest, Json offset, Json bytes) {
  auto frame = encode_frame(
      Json{{"type", "checkpoint_chunk"}, {"sha256", digest}, {"offset", offset}, {"bytes", bytes}});
  REQUIRE(frame.ok());
  return *frame;
}

// Receives `size` bytes of `digest` from whatever `wire` is, sent raw; returns the error.
Status receive_raw_wire(const std::string& wire, const std::string& digest, uint64_t size,
                        const TestDir& dir, bool close_after = false) {
  Pair pair;
  std::thread sending([&] {
    (void)pair.sender->send_bytes(wire, Clock::now() + std::chrono::seconds(10));
    if (close_after) pair.sender->close(Clock::now() + std::chrono::seconds(1));
  });
  const fs::path out = dir.path() / "out.bin";
  UniqueFd out_fd(::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  REQUIRE(out_fd);
  uint64_t counted = 0;
  Status got = receive_content(*pair.receiver, digest, size, out_fd.get(), false, &counted);
  pair.receiver.reset();  // unblocks a sender whose bytes were not all read
  sending.join();
  return got;
}

TEST_CASE("checkpoint wire: contents of every size arrive byte for byte, verified") {
  TestDir dir;
  // Empty (one empty chunk); below one piece (hashed on the receiving thread); a few pieces;
  // many pieces over several chunks with a ragged end (hashed on a thread of its own).
  for (size_t n : {size_t{0}, size_t{1000}, ContentSink::kPieceBytes * 3 + 5,
                   kChunkBytes * 3 + ContentSink::kPieceBytes + 77}) {
    CAPTURE(n);
    const std::string bytes = content(n, 'a');
    const fs::path out = dir.path() / "out.bin";
    uint64_t received = 0;
    Status got = round_trip(dir, bytes, sha256_hex(bytes), out, &received);
    REQUIRE(got.ok());
    CHECK(received == n);
    auto back = read_file(out);
    REQUIRE(back.ok());
    CHECK(*back == bytes);
  }
}

TEST_CASE("checkpoint wire: content that does not hash to its digest is refused") {
  TestDir dir;
  for (size_t n : {size_t{1000}, kChunkBytes * 2 + 3}) {
    CAPTURE(n);
    const std::string bytes = content(n, 'b');
    std::string other = bytes;
    other[n / 2] ^= 1;  // one bit: the sender claims the digest of other bytes
    uint64_t received = 0;
    Status got = round_trip(dir, bytes, sha256_hex(other), dir.path() / "out.bin", &received);
    REQUIRE_FALSE(got.ok());
    CHECK(got.kind() == ErrorKind::kBadInput);
    CHECK(got.message().find("does not hash to it") != std::string::npos);
  }
}

TEST_CASE("checkpoint wire: a chunk header is checked before its bytes are read") {
  TestDir dir;
  const std::string bytes = content(3000, 'c');
  const std::string digest = sha256_hex(bytes);
  auto refused = [&](const std::string& wire, uint64_t size) {
    Status got = receive_raw_wire(wire, digest, size, dir);
    REQUIRE_FALSE(got.ok());
    return got;
  };
  // Another digest, another offset, a count that is not a number.
  Status other = refused(chunk_header(std::string(64, 'e'), 0, 3000) + bytes, 3000);
  CHECK(other.kind() == ErrorKind::kBadInput);
  CHECK(other.message().find("expected the chunk of") != std::string::npos);
  CHECK(refused(chunk_header(digest, 5, 3000) + bytes, 3000).kind() == ErrorKind::kBadInput);
  CHECK(refused(chunk_header(digest, 0, "3000") + bytes, 3000).kind() == ErrorKind::kBadInput);
  // More than the content's size, more than the bound, nothing for a non-empty content: the
  // bytes that follow are never read (the sender's 5 MiB would not even fit the buffers).
  Status longer = refused(chunk_header(digest, 0, 3001) + bytes + "x", 3000);
  CHECK(longer.message().find("wrong size") != std::string::npos);
  Status huge = refused(chunk_header(digest, 0, uint64_t{5} << 20), uint64_t{10} << 20);
  CHECK(huge.message().find("wrong size (5242880 bytes)") != std::string::npos);
  CHECK(refused(chunk_header(digest, 0, 0), 3000).message().find("wrong size") !=
        std::string::npos);
  // The sender's error frame: its reason.
  auto error = encode_frame(Json{{"type", "error"}, {"reason", "file vanished"}});
  REQUIRE(error.ok());
  Status failed = refused(*error, 3000);
  CHECK(failed.kind() == ErrorKind::kFailed);
  CHECK(failed.message() == "file vanished");
}

TEST_CASE("checkpoint wire: a connection that ends inside a chunk is an error, not a hang") {
  TestDir dir;
  const std::string bytes = content(kChunkBytes * 2, 'd');  // large: the hashing thread runs
  const std::string digest = sha256_hex(bytes);
  const std::string wire =
      chunk_header(digest, 0, kChunkBytes) + bytes.substr(0, kChunkBytes / 2 + 17);
  const auto started = Clock::now();
  Status got = receive_raw_wire(wire, digest, bytes.size(), dir, /*close_after=*/true);
  REQUIRE_FALSE(got.ok());
  CHECK(got.message().find("closed") != std::string::npos);
  CHECK(Clock::now() - started < std::chrono::seconds(10));
}

// Sends `bytes` from byte `from` on while this thread receives it into `out`, which holds
// `kept` bytes already (the first `kept` of `prefix`).
Status resume_trip(const TestDir& dir, const std::string& bytes, const std::string& prefix,
                   uint64_t kept, uint64_t from, const fs::path& out, uint64_t* received,
                   uint64_t* sent) {
  Pair pair;
  const fs::path in = dir.path() / "in.bin";
  REQUIRE(write_file_atomic(in, bytes).ok());
  REQUIRE(write_file_atomic(out, prefix.substr(0, kept)).ok());
  UniqueFd in_fd(::open(in.c_str(), O_RDONLY | O_CLOEXEC));
  REQUIRE(in_fd);
  const std::string digest = sha256_hex(bytes);
  Status send_status;
  std::thread sending([&] {
    send_status = send_content(*pair.sender, in_fd.get(), digest, bytes.size(), sent, from);
  });
  UniqueFd out_fd(::open(out.c_str(), O_RDWR | O_CLOEXEC));
  REQUIRE(out_fd);
  Status got =
      receive_content(*pair.receiver, digest, bytes.size(), out_fd.get(), true, received, kept);
  if (!got.ok()) pair.receiver.reset();
  sending.join();
  return got;
}

TEST_CASE("checkpoint wire: a content cut in the middle goes on from the bytes kept") {
  TestDir dir;
  const fs::path out = dir.path() / "out.bin";
  // Small (hashed on the receiving thread) and large (its own thread), cut inside a piece,
  // at a chunk's end, one byte short of the end, and at the end itself (one empty chunk).
  const size_t large = kChunkBytes * 3 + ContentSink::kPieceBytes + 77;
  for (auto [n, kept] : std::vector<std::pair<size_t, size_t>>{
           {1000, 400}, {large, 12345}, {large, kChunkBytes}, {large, large - 1}, {large, large}}) {
    CAPTURE(n);
    CAPTURE(kept);
    const std::string bytes = content(n, 'k');
    uint64_t received = 0, sent = 0;
    REQUIRE(resume_trip(dir, bytes, bytes, kept, kept, out, &received, &sent).ok());
    // Only the rest crossed the wire; the file holds the whole content.
    CHECK(received == n - kept);
    CHECK(sent == n - kept);
    auto back = read_file(out);
    REQUIRE(back.ok());
    CHECK(*back == bytes);
  }
}

TEST_CASE("checkpoint wire: a sender that predates resuming sends it whole, which is taken") {
  TestDir dir;
  const fs::path out = dir.path() / "out.bin";
  const std::string bytes = content(kChunkBytes * 2 + 99, 'o');
  // It ignores the offset asked: its first chunk is at 0. The bytes kept are dropped.
  uint64_t received = 0, sent = 0;
  const std::string junk(5000, 'j');
  REQUIRE(resume_trip(dir, bytes, junk, junk.size(), 0, out, &received, &sent).ok());
  CHECK(received == bytes.size());
  auto back = read_file(out);
  REQUIRE(back.ok());
  CHECK(*back == bytes);
}

TEST_CASE("checkpoint wire: bytes kept that are not the content's prefix are never kept") {
  TestDir dir;
  const fs::path out = dir.path() / "out.bin";
  for (size_t n : {size_t{3000}, kChunkBytes * 2 + 5}) {
    CAPTURE(n);
    const std::string bytes = content(n, 'p');
    std::string prefix = bytes.substr(0, 1000);
    prefix[10] ^= 1;  // one bit wrong in what an earlier try left
    uint64_t received = 0, sent = 0;
    Status got =
        resume_trip(dir, bytes, prefix, prefix.size(), prefix.size(), out, &received, &sent);
    REQUIRE_FALSE(got.ok());
    CHECK(got.kind() == ErrorKind::kBadInput);
    CHECK(got.message().find("does not hash to it") != std::string::npos);
  }
}

TEST_CASE("checkpoint wire: a resumed content's first chunk must start where it was asked") {
  TestDir dir;
  const std::string bytes = content(3000, 'r');
  const std::string digest = sha256_hex(bytes);
  Pair pair;
  std::thread sending([&] {
    (void)pair.sender->send_bytes(chunk_header(digest, 1500, 1500) + bytes.substr(1500),
                                  Clock::now() + std::chrono::seconds(10));
  });
  const fs::path out = dir.path() / "out.bin";
  REQUIRE(write_file_atomic(out, bytes.substr(0, 1000)).ok());
  UniqueFd out_fd(::open(out.c_str(), O_RDWR | O_CLOEXEC));
  uint64_t counted = 0;
  Status got =
      receive_content(*pair.receiver, digest, bytes.size(), out_fd.get(), false, &counted, 1000);
  pair.receiver.reset();
  sending.join();
  REQUIRE_FALSE(got.ok());
  CHECK(got.kind() == ErrorKind::kBadInput);
  CHECK(got.message().find("at offset 1000, got one at 1500") != std::string::npos);
}

TEST_CASE("checkpoint wire: the sender never goes past the content for an offset") {
  TestDir dir;
  Pair pair;
  const fs::path in = dir.path() / "in.bin";
  REQUIRE(write_file_atomic(in, "abc").ok());
  UniqueFd in_fd(::open(in.c_str(), O_RDONLY | O_CLOEXEC));
  uint64_t sent = 0;
  Status refused = send_content(*pair.sender, in_fd.get(), sha256_hex("abc"), 3, &sent, 4);
  CHECK(refused.kind() == ErrorKind::kBadInput);
  CHECK(sent == 0);
}

TEST_CASE("checkpoint want: offsets are checked against the manifest before anything is read") {
  WireManifest manifest;
  const std::string a(64, 'a'), b(64, 'b'), c(64, 'c');
  manifest.files = {{"a", 100, 0644, a}, {"b", 5000, 0644, b}, {"c", 0, 0644, c}};
  auto parsed = [&](const Json& m) { return parse_checkpoint_want(m, manifest); };
  // What this side writes parses back to the same.
  auto round = parsed(checkpoint_want_message({{b, 4000}, {a, 0}, {c, 0}}));
  REQUIRE(round.ok());
  REQUIRE(round->size() == 3);
  CHECK((*round)[0].file->sha256 == b);
  CHECK((*round)[0].from == 4000);
  CHECK((*round)[1].from == 0);
  // No offsets at all: an older receiver, every content whole.
  auto old = parsed(Json{{"type", "checkpoint_want"}, {"digests", {a, b}}});
  REQUIRE(old.ok());
  CHECK(((*old)[0].from == 0 && (*old)[1].from == 0));
  // At the end is allowed (nothing more to send); beyond, not a number, negative, a content
  // not asked for, a digest twice: each refused with one line.
  auto want = [](const std::string& digest, const std::string& key, Json offset) {
    Json offsets = Json::object();
    offsets[key] = std::move(offset);
    Json m{{"type", "checkpoint_want"}, {"digests", Json::array({digest})}};
    m["offsets"] = std::move(offsets);
    return m;
  };
  CHECK(parsed(want(b, b, 5000)).ok());
  auto refused = [&](const Json& m) {
    auto r = parsed(m);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().kind() == ErrorKind::kBadInput);
    CHECK(r.status().message().find('\n') == std::string::npos);
    return r.status().message();
  };
  CHECK(refused(want(b, b, 5001)) ==
        "checkpoint_want asks for bbbbbbbbbbbb from an offset beyond its 5000 bytes");
  CHECK(refused(want(b, b, "1")).find("beyond") != std::string::npos);
  CHECK(refused(want(b, b, -1)).find("beyond") != std::string::npos);
  CHECK(refused(want(b, b, 1.5)).find("beyond") != std::string::npos);
  CHECK(refused(want(b, a, 1)).find("does not ask for") != std::string::npos);
  Json listed = want(b, b, 1);
  listed["offsets"] = Json::array();
  CHECK(refused(listed).find("not an object") != std::string::npos);
  refused(Json{{"type", "checkpoint_want"}, {"digests", {b, b}}});
  refused(Json{{"type", "checkpoint_want"}, {"digests", {std::string(64, 'd')}}});
  refused(Json{{"type", "checkpoint_sent"}});
}

}  // namespace
}  // namespace cairn
