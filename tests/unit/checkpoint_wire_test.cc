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

#include "common/file_util.h"
#include "common/sha256.h"
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

}  // namespace
}  // namespace cairn
