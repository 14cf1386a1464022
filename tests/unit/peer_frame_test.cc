#include <doctest/doctest.h>

#include <string>

#include "peer/frame.h"
#include "peer/peer_protocol.h"

namespace cairn {
namespace {

std::string header(uint32_t n) {
  return {static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8),
          static_cast<char>(n)};
}

TEST_CASE("peer frames: a message round-trips, fed whole or a byte at a time") {
  const Json message{{"type", "status"}, {"n", 3}, {"text", "é\n"}};
  auto frame = encode_frame(message);
  REQUIRE(frame.ok());
  CHECK(frame->substr(0, 4) == header(static_cast<uint32_t>(frame->size() - 4)));

  FrameDecoder whole;
  whole.feed(*frame + *frame);
  for (int i = 0; i < 2; ++i) {
    auto got = whole.next();
    REQUIRE(got.ok());
    REQUIRE(got->has_value());
    CHECK(**got == message);
  }
  auto none = whole.next();
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());
  CHECK(whole.wanted() == 4);

  FrameDecoder bytes;
  for (size_t i = 0; i + 1 < frame->size(); ++i) {
    bytes.feed(frame->substr(i, 1));
    auto got = bytes.next();
    REQUIRE(got.ok());
    CHECK_FALSE(got->has_value());
    // Until the header is whole only its missing bytes are known to be wanted.
    CHECK(bytes.wanted() == (i < 3 ? 3 - i : frame->size() - i - 1));
  }
  bytes.feed(frame->substr(frame->size() - 1));
  auto got = bytes.next();
  REQUIRE(got.ok());
  REQUIRE(got->has_value());
  CHECK(**got == message);
}

TEST_CASE("peer frames: an oversized frame is refused from its header, before any body") {
  FrameDecoder decoder;
  decoder.feed(header(kMaxFrameBytes + 1));
  CHECK(decoder.wanted() == 0);
  auto got = decoder.next();
  REQUIRE_FALSE(got.ok());
  CHECK(got.status().kind() == ErrorKind::kBadInput);
  CHECK(got.status().message() == "frame of 1048577 bytes is over the bound of 1048576");
  // The stream is unusable from then on, whatever follows.
  decoder.feed(*encode_frame(Json{{"type", "status"}}));
  CHECK_FALSE(decoder.next().ok());

  FrameDecoder largest;
  largest.feed(header(0xffffffffu));
  CHECK_FALSE(largest.next().ok());
}

TEST_CASE("peer frames: bodies that are not a typed JSON object are refused with one line") {
  auto refused = [](const std::string& body) {
    FrameDecoder decoder;
    decoder.feed(header(static_cast<uint32_t>(body.size())) + body);
    auto got = decoder.next();
    REQUIRE_FALSE(got.ok());
    CHECK(got.status().kind() == ErrorKind::kBadInput);
    CHECK(got.status().message().find('\n') == std::string::npos);
    return got.status().message();
  };
  CHECK(refused("{not json") == "malformed frame: not JSON");
  CHECK(refused(std::string(100000, '[') + std::string(100000, ']')).find("nested deeper") !=
        std::string::npos);
  CHECK(refused("[1,2]") == "malformed frame: frame is not a JSON object");
  CHECK(refused(R"({"kind":"status"})") == "malformed frame: frame has no string \"type\"");
  CHECK(refused(R"({"type":7})") == "malformed frame: frame has no string \"type\"");
  CHECK(refused("") == "malformed frame: not JSON");
}

TEST_CASE("peer frames: encoding refuses what a decoder would refuse") {
  CHECK_FALSE(encode_frame(Json::array()).ok());
  CHECK_FALSE(encode_frame(Json{{"n", 1}}).ok());
  auto big = encode_frame(Json{{"type", "x"}, {"pad", std::string(kMaxFrameBytes, 'a')}});
  REQUIRE_FALSE(big.ok());
  CHECK(big.status().message().find("over the frame bound") != std::string::npos);
}

TEST_CASE("peer protocol: a hello of another version is refused naming both versions") {
  CHECK(check_hello(hello_message("coordinator")).ok());
  Json other = hello_message("coordinator");
  other["protocol"] = kPeerProtocolVersion + 1;
  other["cairn"] = "9.9.9";
  PeerHello seen;
  Status refused = check_hello(other, &seen);
  CHECK(refused.kind() == ErrorKind::kFailed);
  CHECK(seen.protocol == kPeerProtocolVersion + 1);
  CHECK(seen.cairn_version == "9.9.9");
  CHECK(refused.message().find("peer protocol version 2 (cairn 9.9.9)") == 0);
  CHECK(check_hello(Json{{"type", "status"}}).kind() == ErrorKind::kBadInput);
  CHECK(check_hello(Json{{"type", "hello"}, {"protocol", "1"}}).kind() == ErrorKind::kBadInput);
}

}  // namespace
}  // namespace cairn
