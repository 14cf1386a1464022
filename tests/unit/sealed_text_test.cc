#include "common/sealed_text.h"

#include <doctest/doctest.h>

#include <string>

#include "common/sha256.h"

namespace cairn {
namespace {

// A body as the caches have them: text lines, and bytes of every value (the known-objects
// record is binary).
std::string sample_body() {
  std::string body = "header 1\nkey\tvalue\n";
  for (int c = 0; c < 256; ++c) body += static_cast<char>(c);
  body += "\nend of the body\n";
  return body;
}

std::string sealed(std::string body) {
  seal(body);
  return body;
}

}  // namespace

TEST_CASE("seal appends the end line; unseal gives the body back") {
  const std::string body = sample_body();
  const std::string file = sealed(body);
  CHECK(file == body + "end " + sha256_hex(body) + "\n");
  const auto back = unseal(file);
  REQUIRE(back.has_value());
  CHECK(*back == body);
  CHECK(back->data() == file.data());  // a view into the file's text, not a copy
}

TEST_CASE("an empty body seals and unseals; an empty or unsealed file does not") {
  const std::string file = sealed("");
  CHECK(file == "end " + sha256_hex("") + "\n");
  const auto back = unseal(file);
  REQUIRE(back.has_value());
  CHECK(back->empty());
  CHECK_FALSE(unseal("").has_value());
  CHECK_FALSE(unseal("end\n").has_value());  // the bare trailer an old record had
  CHECK_FALSE(unseal("header 1\nkey\tvalue\n").has_value());
}

TEST_CASE("a body that itself ends like a sealed file is kept whole") {
  const std::string inner = sealed("a\n");
  const std::string file = sealed(inner);
  CHECK(unseal(file) == std::optional<std::string_view>(inner));
}

// Written without fsync, a sealed file can come back from a crash cut short anywhere, or
// with zeros (blocks never written) or another file's bytes (stale blocks) in the middle,
// its end intact: none of these may unseal.
TEST_CASE("a sealed file cut short or damaged anywhere does not unseal") {
  const std::string file = sealed(sample_body());
  REQUIRE(unseal(file).has_value());

  SUBCASE("cut short") {
    for (size_t n = 0; n < file.size(); ++n) {
      INFO("the first " << n << " bytes");
      CHECK_FALSE(unseal(file.substr(0, n)).has_value());
    }
  }
  SUBCASE("a bit flipped") {
    for (size_t at = 0; at < file.size(); ++at)
      for (int bit = 0; bit < 8; ++bit) {
        INFO("byte " << at << ", bit " << bit);
        std::string damaged = file;
        damaged[at] = static_cast<char>(damaged[at] ^ (1 << bit));
        CHECK_FALSE(unseal(damaged).has_value());
      }
  }
  SUBCASE("a run of zeros in the middle") {
    for (size_t at = 0; at + 8 <= file.size(); ++at) {
      std::string damaged = file;
      damaged.replace(at, 8, std::string(8, '\0'));
      if (damaged == file) continue;  // the body's own zero bytes
      INFO("zeros at " << at);
      CHECK_FALSE(unseal(damaged).has_value());
    }
  }
  SUBCASE("a stale run of another sealed file's bytes") {
    std::string other_body = sample_body();
    other_body[0] = 'H';
    other_body[other_body.size() - 2] = 'Y';
    const std::string other = sealed(other_body);
    REQUIRE(other.size() == file.size());
    size_t differing = 0;
    for (size_t at = 0; at + 16 <= file.size(); ++at) {
      std::string damaged = file;
      damaged.replace(at, 16, other.substr(at, 16));
      if (damaged == file) continue;
      ++differing;
      INFO("stale bytes at " << at);
      CHECK_FALSE(unseal(damaged).has_value());
    }
    CHECK(differing > 64);  // the runs over the end line's check, and over the body's changes
  }
  SUBCASE("bytes after the end line") {
    CHECK_FALSE(unseal(file + "x").has_value());
    CHECK_FALSE(unseal(file + "\n").has_value());
    CHECK_FALSE(unseal(file + file).has_value());
  }
  SUBCASE("the check in upper case") {
    std::string upper = file;
    for (size_t i = upper.size() - 65; i + 1 < upper.size(); ++i)
      upper[i] = static_cast<char>(std::toupper(static_cast<unsigned char>(upper[i])));
    if (upper != file) CHECK_FALSE(unseal(upper).has_value());
  }
}

}  // namespace cairn
