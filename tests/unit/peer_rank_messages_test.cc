#include <doctest/doctest.h>

#include "peer/rank_messages.h"

#include <filesystem>

#include "common/utf8.h"
#include "peer/frame.h"

namespace cairn {
namespace {

TEST_CASE("rank messages: a launch round-trips; every field is checked") {
  RemoteLaunch launch{3, {"/usr/bin/python3", "train.py", "--lr=0.1"}, {{"A", "1"}}, "7/7.3"};
  auto parsed = parse_launch(launch_message(launch));
  REQUIRE(parsed.ok());
  CHECK(parsed->rank == 3);
  CHECK(parsed->argv == launch.argv);
  CHECK(parsed->env == launch.env);
  CHECK(parsed->cwd == "7/7.3");
  CHECK(parsed->output_at == -1);  // not said
  launch.output_at = 1234;
  CHECK(parse_launch(launch_message(launch))->output_at == 1234);

  auto refused = [&](const char* field, const Json& value) {
    Json message = launch_message(launch);
    message[field] = value;
    auto got = parse_launch(message);
    REQUIRE_FALSE(got.ok());
    CHECK(got.status().kind() == ErrorKind::kBadInput);
    CHECK(got.status().message().rfind("bad launch: ", 0) == 0);
    return got.status().message();
  };
  refused("rank", -1);
  refused("rank", "3");
  refused("argv", Json::array());
  refused("argv", Json::array({"a", 1}));
  refused("argv", Json::array({std::string("a\0b", 3)}));
  refused("env", Json{{"A=B", "1"}});
  refused("env", Json{{"A", 1}});
  refused("env", Json::array());
  refused("output_at", -1);
  refused("output_at", "12");
  for (const char* cwd : {"", "/tmp", "..", "../x", "a/../../x", "a/../.."})
    CHECK(refused("cwd", cwd).find("is not a relative path below") != std::string::npos);
  CHECK(parse_launch(launch_message(RemoteLaunch{0, {"x"}, {}, "a/../b"})).ok());
  CHECK(parse_launch(launch_message(RemoteLaunch{0, {"x"}, {}, "..weights"})).ok());
  Json many = launch_message(launch);
  many["argv"] = Json::array();
  for (size_t i = 0; i <= kMaxLaunchArgs; ++i) many["argv"].push_back("a");
  CHECK_FALSE(parse_launch(many).ok());
}

TEST_CASE("rank messages: program cairn names the agent's own binary, nothing else") {
  RemoteLaunch launch{0, {"/coordinator/only/cairn", "__builtin-mlp"}, {}, "w"};
  CHECK_FALSE(launch_message(launch).contains("program"));
  launch.self_program = true;
  Json message = launch_message(launch);
  CHECK(message["program"] == "cairn");
  auto parsed = parse_launch(message);
  REQUIRE(parsed.ok());
  CHECK(parsed->self_program);
  use_own_program(*parsed);
  std::error_code ec;
  CHECK(std::filesystem::equivalent(parsed->argv[0], "/proc/self/exe", ec));
  CHECK(parsed->argv[0] != "/proc/self/exe");  // this binary exists: named by its path
  CHECK(parsed->argv[1] == "__builtin-mlp");
  // Without the field, argv[0] is the coordinator's and stays as sent.
  RemoteLaunch plain{0, {"python3", "train.py"}, {}, "w"};
  use_own_program(plain);
  CHECK(plain.argv[0] == "python3");
  for (Json bad : {Json("python3"), Json(1), Json(true), Json("")}) {
    message["program"] = bad;
    CHECK_FALSE(parse_launch(message).ok());
  }
}

TEST_CASE("utf8: well-formed text only") {
  CHECK(is_utf8(""));
  CHECK(is_utf8("plain ascii\n"));
  CHECK(is_utf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"));  // é € 😀
  CHECK(is_utf8("\xF4\x8F\xBF\xBF"));                           // U+10FFFF
  CHECK_FALSE(is_utf8("\xFF"));
  CHECK_FALSE(is_utf8("caf\xE9"));           // Latin-1
  CHECK_FALSE(is_utf8("\xC3"));              // cut short
  CHECK_FALSE(is_utf8("\xE2\x82"));          // cut short
  CHECK_FALSE(is_utf8("\x80"));              // a lone continuation byte
  CHECK_FALSE(is_utf8("\xC0\xAF"));          // overlong '/'
  CHECK_FALSE(is_utf8("\xE0\x80\xAF"));      // overlong
  CHECK_FALSE(is_utf8("\xED\xA0\x80"));      // a surrogate
  CHECK_FALSE(is_utf8("\xF4\x90\x80\x80"));  // above U+10FFFF
  CHECK_FALSE(is_utf8("\xF0\x9F\x98"));      // an emoji split between two pieces
}

TEST_CASE("rank messages: output arrives byte for byte, through a frame") {
  const std::string pieces[] = {"epoch 1 loss 0.5\n",
                                "caf\xC3\xA9 \xF0\x9F\x98\x80\n",
                                std::string("\0\x01\xFF\xFE", 4),
                                "caf\xE9\n",
                                "\xF0\x9F",
                                "\x98\x80 the emoji's end\n"};
  for (const std::string& bytes : pieces) {
    Json message = output_message(4, bytes);
    CHECK(message["rank"] == 4);
    CHECK(message.contains("data") == is_utf8(bytes));
    // As the peer sends and reads it: an encoded frame would replace bytes that are not UTF-8.
    auto frame = encode_frame(message);
    REQUIRE(frame.ok());
    FrameDecoder decoder;
    decoder.feed(*frame);
    auto decoded = decoder.next();
    REQUIRE(decoded.ok());
    REQUIRE(decoded->has_value());
    auto back = output_bytes(**decoded);
    REQUIRE(back.ok());
    CHECK(*back == bytes);
  }
  for (Json bad : {Json{{"type", "output"}, {"rank", 1}},
                   Json{{"type", "output"}, {"rank", 1}, {"data", "a"}, {"bytes", "YQ=="}},
                   Json{{"type", "output"}, {"rank", 1}, {"data", 3}},
                   Json{{"type", "output"}, {"rank", 1}, {"bytes", "not base64!"}},
                   Json{{"type", "output"}, {"rank", 1}, {"bytes", 3}}}) {
    auto refused = output_bytes(bad);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.status().message().find("bad output frame") == 0);
  }
}

}  // namespace
}  // namespace cairn
