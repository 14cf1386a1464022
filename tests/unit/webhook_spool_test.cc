// The webhook sender's spool (cli/webhook_sender.h): prepared events are kept as .pending
// before their commit, and what an earlier cairn left is delivered or dropped by the markers
// its store holds. The receiver here refuses connections: nothing is ever delivered, so every
// file the test expects stays where it is.
#include "cli/webhook_sender.h"

#include <doctest/doctest.h>

#include "common/file_util.h"
#include "test_dir.h"

namespace cairn::cli {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> names(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) out.push_back(entry.path().filename());
  std::sort(out.begin(), out.end());
  return out;
}

WebhookTiming quick() {
  WebhookTiming t;
  t.connect_timeout = std::chrono::milliseconds(200);
  t.request_timeout = std::chrono::milliseconds(200);
  t.first_backoff = std::chrono::milliseconds(1);
  return t;
}

const char* kRefused = "http://127.0.0.1:1/hook";

}  // namespace

TEST_CASE("webhook spool: a pending event is delivered only if its marker was committed") {
  testing::TestDir dir;
  const fs::path spool = dir / "notify";
  fs::create_directories(spool);
  REQUIRE(write_file_atomic(spool / "aa.pending", R"({"event":"trial_error","delivery_id":"aa"})")
              .ok());
  REQUIRE(write_file_atomic(spool / "bb.pending", R"({"event":"trial_error","delivery_id":"bb"})")
              .ok());
  REQUIRE(write_file_atomic(spool / "cc.json", R"({"event":"experiment_end","delivery_id":"cc"})")
              .ok());
  CHECK(has_pending_webhooks(spool));
  {
    WebhookSender sender({kRefused}, "", spool, {"aa"}, quick());
    // bb's commit never happened: gone at once; aa and cc wait for a receiver.
    CHECK(names(spool) == std::vector<std::string>{"aa.pending", "cc.json"});
    sender.drain(std::chrono::milliseconds(0));
  }
  CHECK(names(spool) == std::vector<std::string>{"aa.pending", "cc.json"});
}

TEST_CASE("webhook spool: prepare keeps, discard forgets, notify keeps as deliverable") {
  testing::TestDir dir;
  const fs::path spool = dir / "notify";
  WebhookSender sender({kRefused}, "", spool, {}, quick());
  const std::string kept = sender.prepare(NotifyEvent::kTrialError, Json{{"event", "trial_error"}});
  const std::string dropped = sender.prepare(NotifyEvent::kEnd, Json{{"event", "experiment_end"}});
  REQUIRE(kept.size() == 32);
  CHECK(names(spool) == [&] {
    std::vector<std::string> want{kept + ".pending", dropped + ".pending"};
    std::sort(want.begin(), want.end());
    return want;
  }());
  auto text = read_file(spool / (kept + ".pending"));
  REQUIRE(text.ok());
  CHECK(Json::parse(*text)["delivery_id"] == kept);
  sender.discard({dropped});
  CHECK(names(spool) == std::vector<std::string>{kept + ".pending"});
  sender.notify(NotifyEvent::kEnd, Json{{"event", "experiment_end"}});
  CHECK(names(spool).size() == 2);
  sender.drain(std::chrono::milliseconds(0));
  // Neither was delivered (the receiver refuses): both stay for the next resume.
  CHECK(names(spool).size() == 2);
}

}  // namespace cairn::cli
