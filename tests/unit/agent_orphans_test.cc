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

TEST_CASE("orphan requests: the owner, trial, attempt and step are checked") {
  OrphanRequest asked;
  const std::string owner = "gpu1:/s#3";
  CHECK(parse_orphan_request(Json{{"owner", owner}, {"trial", "3.12"}, {"attempt", 2}, {"step", 7}},
                             true, &asked)
            .ok());
  CHECK(asked.owner == owner);
  CHECK(asked.trial == "3.12");
  CHECK(asked.attempt == 2);
  CHECK(asked.step == 7);
  CHECK(parse_orphan_request(Json{{"owner", owner}, {"trial", "3.12"}}, false, &asked).ok());
  auto req = [&](Json fields) {
    Json r{{"owner", owner}, {"attempt", 1}};
    for (auto& [k, v] : fields.items()) r[k] = v;
    return r;
  };
  for (const Json& bad :
       {req({{"trial", ".."}, {"step", 1}}), req({{"trial", "a/b"}, {"step", 1}}),
        req({{"trial", "/etc"}, {"step", 1}}), req({{"trial", 3}, {"step", 1}}), req({{"step", 1}}),
        req({{"trial", "3.1"}}), req({{"trial", "3.1"}, {"step", -1}}),
        req({{"trial", "3.1"}, {"step", 1.5}}), req({{"trial", "3.1"}, {"step", "7"}}),
        req({{"trial", "3.1"}, {"step", int64_t{1} << 60}}),
        req({{"trial", "3.1"}, {"step", 1}, {"attempt", -1}}),
        req({{"trial", "3.1"}, {"step", 1}, {"attempt", "2"}}),
        req({{"trial", "3.1"}, {"step", 1}, {"owner", ""}}),
        req({{"trial", "3.1"}, {"step", 1}, {"owner", std::string(5000, 'o')}}),
        Json{{"trial", "3.1"}, {"step", 1}, {"attempt", 1}}, Json::array(), Json(7)})
    CHECK(parse_orphan_request(bad, true, &asked).kind() == ErrorKind::kBadInput);
}

TEST_CASE("orphan listings: a hostile or broken answer is refused with one line") {
  auto listing = [](Json orphans, Json running = Json(false)) {
    return Json{
        {"type", "orphan_list"}, {"trial", "1.1"}, {"running", running}, {"orphans", orphans}};
  };
  auto o = [](Json attempt, Json step) { return Json{{"attempt", attempt}, {"step", step}}; };
  auto good = parse_orphan_listing(listing(Json::array({o(2, 9), o(1, 3), o(2, 3)})), "1.1");
  REQUIRE(good.ok());
  CHECK(!good->running);
  CHECK(good->orphans == std::vector<OrphanStep>{{1, 3}, {2, 3}, {2, 9}});
  CHECK(parse_orphan_listing(listing(Json::array(), Json(true)), "1.1")->running);

  auto refused = parse_orphan_listing(Json{{"type", "error"}, {"reason", "no"}}, "1.1");
  CHECK(refused.status().kind() == ErrorKind::kFailed);
  CHECK(refused.status().message() == "refused: no");
  Json too_many = Json::array();
  for (size_t i = 0; i <= kMaxOrphanSteps; ++i) too_many.push_back(o(1, i));
  Json other_trial = listing(Json::array());
  other_trial["trial"] = "1.2";
  Json no_running = listing(Json::array());
  no_running.erase("running");
  Json old_form = listing(Json::array());
  old_form.erase("orphans");
  old_form["steps"] = Json::array({3});
  for (const Json& bad : {Json::array(), Json("x"), Json{{"type", "orphan_manifest"}}, other_trial,
                          no_running, old_form, listing(Json::array(), Json(1)), listing(Json("7")),
                          listing(Json::array({o(1, 3), o(1, 3)})),
                          listing(Json::array({o(1, -1)})), listing(Json::array({o(-1, 1)})),
                          listing(Json::array({o(1, 1.5)})), listing(Json::array({o(1, "3")})),
                          listing(Json::array({3})), listing(Json::array({Json{{"step", 3}}})),
                          listing(Json::array({o(1, int64_t{1} << 60)})), listing(too_many)}) {
    auto parsed = parse_orphan_listing(bad, "1.1");
    CHECK(parsed.status().kind() == ErrorKind::kBadInput);
    CHECK(parsed.status().message().find('\n') == std::string::npos);
  }
  // The owner's directory: stable, a hash (never the owner's text), one per owner.
  CHECK(orphan_owner_dir("h:/a#1") == orphan_owner_dir("h:/a#1"));
  CHECK(orphan_owner_dir("h:/a#1") != orphan_owner_dir("h:/b#1"));
  CHECK(orphan_owner_dir("h:/a#1").size() == 17);
  CHECK(orphan_attempt_dir(3) == "attempt-3");
}

}  // namespace
}  // namespace cairn
