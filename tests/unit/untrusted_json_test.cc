#include <doctest/doctest.h>

#include <string>

#include "common/untrusted_json.h"

namespace cairn {
namespace {

std::string nested(int depth, char open = '[', char close = ']') {
  return std::string(static_cast<size_t>(depth), open) +
         std::string(static_cast<size_t>(depth), close);
}

TEST_CASE("untrusted json: nesting is counted outside strings, up to the bound") {
  CHECK(json_depth_within(nested(64)));
  CHECK_FALSE(json_depth_within(nested(65)));
  CHECK_FALSE(json_depth_within(nested(100000)));
  CHECK(json_depth_within(R"({"a":[{"b":[1,2]}]})", 4));
  CHECK_FALSE(json_depth_within(R"({"a":[{"b":[1,2]}]})", 3));
  // Brackets inside strings, escaped quotes and backslashes do not count.
  CHECK(json_depth_within("{\"a\":\"" + std::string(1000, '[') + "\"}", 1));
  CHECK(json_depth_within(R"({"a":"\"[[[[","b":"\\"})", 1));
  CHECK_FALSE(json_depth_within(R"({"a":"\\",[[]]})", 2));  // the string ended before [[
  // Closing more than was opened earns no room for nesting afterwards.
  CHECK_FALSE(json_depth_within("]]]" + nested(3), 2));
  // Depth, not count: many siblings are fine.
  std::string siblings = "[";
  for (int i = 0; i < 10000; ++i) siblings += "[],";
  siblings += "[]]";
  CHECK(json_depth_within(siblings, 2));
}

TEST_CASE("untrusted json: a value, or one line saying why not") {
  auto ok = parse_untrusted_json(R"({"type":"hello","x":[1,{"y":2}]})");
  REQUIRE(ok.ok());
  CHECK((*ok)["x"][1]["y"] == 2);
  auto deep = parse_untrusted_json("{\"m\":" + nested(100000) + "}");
  REQUIRE_FALSE(deep.ok());
  CHECK(deep.status().kind() == ErrorKind::kBadInput);
  CHECK(deep.status().message() == "nested deeper than 64 levels");
  auto garbage = parse_untrusted_json("{\"a\":");
  REQUIRE_FALSE(garbage.ok());
  CHECK(garbage.status().message() == "not JSON");
  CHECK(parse_untrusted_json("").status().message() == "not JSON");
}

}  // namespace
}  // namespace cairn
