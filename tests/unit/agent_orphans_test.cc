#include <doctest/doctest.h>

#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/coordinator/remote_orphans.h"
#include "peer/agent_orphans.h"
#include "peer/agent_sessions.h"

namespace cairn {
namespace {

using Clock = std::chrono::steady_clock;

// Ranks that end when the test says so; what was killed is counted.
struct FakeHost final : RankHost {
  std::vector<Event>* pending;
  int* killed;
  FakeHost(std::vector<Event>* p, int* k) : pending(p), killed(k) {}
  Status start(const RemoteLaunch&) override { return Status::Ok(); }
  void signal(int64_t, int) override {}
  std::vector<Event> poll() override { return std::exchange(*pending, {}); }
  void kill_all() override { ++*killed; }
};

struct Kept {
  std::vector<RankHost::Event> events;
  int killed = 0;
  std::shared_ptr<AgentSession> session = std::make_shared<AgentSession>();
  Kept(std::atomic<int>& running, int ranks) {
    session->id = "0123456789abcdef";
    session->host = std::make_unique<FakeHost>(&events, &killed);
    session->running = ranks;
    running += ranks;
  }
  void end(int64_t rank) {
    RankHost::Event e;
    e.rank = rank;
    e.ended = true;
    events.push_back(e);
  }
};

TEST_CASE("agent orphans: asked to checkpoint, their slots held until they exit") {
  std::atomic<int> running{0};
  AgentOrphans orphans(running, std::chrono::seconds(60));
  Kept kept(running, 2);
  orphans.adopt(kept.session, "test");
  CHECK(kept.killed == 0);
  CHECK(orphans.running() == 2);
  RankHost::Event output;
  output.rank = 0;
  output.output = "late output";
  kept.events.push_back(output);  // read and dropped: a rank never blocks on its pipe
  kept.end(0);
  orphans.poll(Clock::now());
  CHECK(running.load() == 1);
  CHECK(orphans.running() == 1);
  CHECK(kept.session->host != nullptr);
  kept.end(1);
  orphans.poll(Clock::now());
  CHECK(running.load() == 0);
  CHECK(orphans.running() == 0);
  CHECK(kept.killed == 0);
  CHECK(kept.session->host == nullptr);  // its holds on the trials' directories released
}

TEST_CASE("agent orphans: a rank still running at the bound is killed") {
  std::atomic<int> running{0};
  AgentOrphans orphans(running, std::chrono::seconds(60));
  Kept kept(running, 1);
  orphans.adopt(kept.session, "test");
  orphans.poll(Clock::now() + std::chrono::seconds(59));
  CHECK(kept.killed == 0);
  CHECK(running.load() == 1);
  orphans.poll(Clock::now() + std::chrono::seconds(61));
  CHECK(kept.killed == 1);
  CHECK(running.load() == 0);
  CHECK(orphans.running() == 0);
}

TEST_CASE("agent orphans: the agent's stop kills them; no ranks, nothing kept") {
  std::atomic<int> running{0};
  AgentOrphans orphans(running);
  Kept none(running, 0);
  orphans.adopt(none.session, "test");
  CHECK(orphans.running() == 0);
  CHECK(none.session->host == nullptr);
  Kept kept(running, 1);
  orphans.adopt(kept.session, "test");
  orphans.kill_all();
  CHECK(kept.killed == 1);
  CHECK(running.load() == 0);
}

TEST_CASE("agent sessions: past the window, or let go by a new owner session, ranks are orphaned") {
  std::atomic<int> running{0};
  AgentSessions sessions(running);
  auto opened = [&](Kept& k, const std::string& owner) {
    auto id = sessions.open(k.session, owner, std::chrono::seconds(60));
    REQUIRE(id.ok());
    sessions.detach(k.session, "coordinator");
  };
  Kept windowed(running, 1);
  opened(windowed, "host:/store#1");
  sessions.expire(Clock::now() + std::chrono::seconds(61));
  CHECK(windowed.killed == 0);  // asked to checkpoint, not killed
  CHECK(running.load() == 1);
  windowed.end(0);
  sessions.expire(Clock::now() + std::chrono::seconds(62));
  CHECK(running.load() == 0);

  // Another coordinator of the owner (a `cairn resume`): orphans.
  Kept replaced(running, 1);
  replaced.session->instance = "first";
  opened(replaced, "host:/store#2");
  auto newer = std::make_shared<AgentSession>();
  newer->instance = "resumed";
  REQUIRE(sessions.open(newer, "host:/store#2", std::chrono::seconds(60)).ok());
  CHECK(replaced.killed == 0);
  CHECK(running.load() == 1);

  // The same coordinator reconnecting (it gave their attempts up): ended at once, as are
  // those of a coordinator that does not say which it is.
  for (const std::string& instance : {std::string("same"), std::string()}) {
    Kept given_up(running, 1);
    given_up.session->instance = instance;
    opened(given_up, "host:/store#3");
    auto again = std::make_shared<AgentSession>();
    again->instance = instance;
    REQUIRE(sessions.open(again, "host:/store#3", std::chrono::seconds(60)).ok());
    CHECK(given_up.killed == 1);
    CHECK(running.load() == 1);
  }
  // The agent's stop ends what is left at once.
  sessions.end_all();
  CHECK(replaced.killed == 1);
  CHECK(running.load() == 0);
}

TEST_CASE("orphan requests: the trial and step are checked") {
  std::string trial;
  int64_t step = -1;
  CHECK(parse_orphan_request(Json{{"trial", "3.12"}, {"step", 7}}, true, &trial, &step).ok());
  CHECK(trial == "3.12");
  CHECK(step == 7);
  CHECK(parse_orphan_request(Json{{"trial", "3.12"}}, false, &trial, &step).ok());
  for (const Json& bad :
       {Json{{"trial", ".."}, {"step", 1}}, Json{{"trial", "a/b"}, {"step", 1}},
        Json{{"trial", "/etc"}, {"step", 1}}, Json{{"trial", 3}, {"step", 1}}, Json{{"step", 1}},
        Json{{"trial", "3.1"}}, Json{{"trial", "3.1"}, {"step", -1}},
        Json{{"trial", "3.1"}, {"step", 1.5}}, Json{{"trial", "3.1"}, {"step", "7"}},
        Json{{"trial", "3.1"}, {"step", int64_t{1} << 60}}, Json::array(), Json(7)})
    CHECK(parse_orphan_request(bad, true, &trial, &step).kind() == ErrorKind::kBadInput);
}

TEST_CASE("orphan listings: a hostile or broken answer is refused with one line") {
  auto listing = [](Json steps, Json running = Json(false)) {
    return Json{{"type", "orphan_list"}, {"trial", "1.1"}, {"running", running}, {"steps", steps}};
  };
  auto good = parse_orphan_listing(listing(Json::array({9, 3})), "1.1");
  REQUIRE(good.ok());
  CHECK(!good->running);
  CHECK(good->steps == std::vector<int64_t>{3, 9});
  CHECK(parse_orphan_listing(listing(Json::array(), Json(true)), "1.1")->running);

  auto refused = parse_orphan_listing(Json{{"type", "error"}, {"reason", "no"}}, "1.1");
  CHECK(refused.status().kind() == ErrorKind::kFailed);
  CHECK(refused.status().message() == "refused: no");
  Json too_many = Json::array();
  for (size_t i = 0; i <= kMaxOrphanSteps; ++i) too_many.push_back(i);
  Json other_trial = listing(Json::array());
  other_trial["trial"] = "1.2";
  Json no_running = listing(Json::array());
  no_running.erase("running");
  for (const Json& bad :
       {Json::array(), Json("x"), Json{{"type", "orphan_manifest"}}, other_trial, no_running,
        listing(Json::array(), Json(1)), listing(Json("7")), listing(Json::array({3, 3})),
        listing(Json::array({-1})), listing(Json::array({1.5})), listing(Json::array({"3"})),
        listing(Json::array({int64_t{1} << 60})), listing(too_many)}) {
    auto parsed = parse_orphan_listing(bad, "1.1");
    CHECK(parsed.status().kind() == ErrorKind::kBadInput);
    CHECK(parsed.status().message().find('\n') == std::string::npos);
  }
}

}  // namespace
}  // namespace cairn
