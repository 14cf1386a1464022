#include <doctest/doctest.h>

#include <atomic>
#include <string>

#include "peer/agent_sessions.h"
#include "peer/frame.h"
#include "peer/session_journal.h"

namespace cairn {
namespace {

Json frame_json(int n) {
  return Json{{"type", "output"}, {"rank", 2}, {"data", std::to_string(n)}};
}

void send(SessionJournal& journal, int n) {
  const Json m = frame_json(n);
  journal.sent(m, *encode_frame(m));
}

TEST_CASE("session journal: what the peer did not receive is sent again, in order") {
  SessionJournal journal;
  for (int n = 1; n <= 5; ++n) send(journal, n);
  CHECK(journal.sent_count() == 5);
  auto replay = journal.replay_after(3);
  REQUIRE(replay.ok());
  REQUIRE(replay->size() == 2);
  CHECK((*replay)[0] == *encode_frame(frame_json(4)));
  CHECK((*replay)[1] == *encode_frame(frame_json(5)));
  CHECK(journal.replay_after(5)->empty());
  // A peer that claims more than was sent is refused.
  CHECK(journal.replay_after(6).status().kind() == ErrorKind::kBadInput);
  CHECK(!journal.replay_after(-1).ok());
}

TEST_CASE("session journal: a heartbeat's count frees what the peer has") {
  SessionJournal journal;
  for (int n = 1; n <= 4; ++n) send(journal, n);
  const size_t all = journal.kept_bytes();
  journal.received(Json{{"type", "heartbeat"}, {"received", 3}});
  CHECK(journal.received_count() == 1);
  CHECK(journal.kept_bytes() < all);
  CHECK(journal.replay_after(3)->size() == 1);
  // What was freed cannot be sent again.
  CHECK(journal.replay_after(2).status().kind() == ErrorKind::kFailed);
  // A count above what was sent frees everything, no more.
  journal.acknowledge(100);
  CHECK(journal.kept_bytes() == 0);
  CHECK(journal.replay_after(4)->empty());
  send(journal, 5);
  CHECK(journal.replay_after(4)->size() == 1);
}

TEST_CASE("session journal: over its bound the oldest go, and a resume needing them fails") {
  const size_t one = encode_frame(frame_json(1))->size();
  SessionJournal journal(one * 3);
  for (int n = 1; n <= 5; ++n) send(journal, n);
  CHECK(journal.kept_bytes() <= one * 3);
  auto refused = journal.replay_after(0);
  REQUIRE(!refused.ok());
  CHECK(refused.status().message().find("no longer kept") != std::string::npos);
  CHECK(journal.replay_after(2)->size() == 3);  // what is kept still resumes
}

TEST_CASE("session frames are neither counted nor kept") {
  CHECK(is_session_frame_type("session_open"));
  CHECK(is_session_frame_type("session_resumed"));
  CHECK(is_session_frame_type("goodbye"));
  CHECK(!is_session_frame_type("heartbeat"));
  CHECK(!is_session_frame_type("control_data"));
}

TEST_CASE("agent sessions: kept for their window, claimed once, ended by a new owner session") {
  std::atomic<int> running{0};
  AgentSessions sessions(running);
  auto first = std::make_shared<AgentSession>();
  auto id = sessions.open(first, "host:/store#1", std::chrono::seconds(60));
  REQUIRE(id.ok());
  CHECK(id->size() == 32);
  // Attached: a claim asks the holder to let go, and is refused for now.
  auto busy = sessions.claim(*id);
  CHECK(busy.status().kind() == ErrorKind::kFailed);
  CHECK(first->release.load());
  sessions.detach(first, "coordinator");
  CHECK(sessions.detached() == 1);
  auto claimed = sessions.claim(*id);
  REQUIRE(claimed.ok());
  CHECK(claimed->get() == first.get());
  CHECK(!first->release.load());
  CHECK(sessions.claim(*id).status().kind() == ErrorKind::kFailed);  // attached again
  CHECK(sessions.claim("nothing").status().kind() == ErrorKind::kNotFound);

  // Past its window a detached session ends.
  sessions.detach(first, "coordinator");
  sessions.expire(std::chrono::steady_clock::now() + std::chrono::seconds(59));
  CHECK(sessions.detached() == 1);
  sessions.expire(std::chrono::steady_clock::now() + std::chrono::seconds(61));
  CHECK(sessions.detached() == 0);
  CHECK(sessions.claim(*id).status().kind() == ErrorKind::kNotFound);

  // A new session of the same owner ends the detached ones of that owner only.
  auto a = std::make_shared<AgentSession>();
  auto b = std::make_shared<AgentSession>();
  auto a_id = sessions.open(a, "host:/store#1", std::chrono::seconds(60));
  auto b_id = sessions.open(b, "host:/store#2", std::chrono::seconds(60));
  sessions.detach(a, "x");
  sessions.detach(b, "y");
  auto c = std::make_shared<AgentSession>();
  REQUIRE(sessions.open(c, "host:/store#1", std::chrono::seconds(60)).ok());
  CHECK(sessions.claim(*a_id).status().kind() == ErrorKind::kNotFound);
  CHECK(sessions.claim(*b_id).ok());

  // An attached session of the owner (its coordinator gone without this agent noticing)
  // is asked to let go, and then ends instead of being kept.
  auto held = std::make_shared<AgentSession>();
  auto held_id = sessions.open(held, "host:/store#3", std::chrono::seconds(60));
  auto newer = std::make_shared<AgentSession>();
  REQUIRE(sessions.open(newer, "host:/store#3", std::chrono::seconds(60)).ok());
  CHECK(held->release.load());
  sessions.detach(held, "gone");
  CHECK(sessions.claim(*held_id).status().kind() == ErrorKind::kNotFound);

  // Without a window a dropped connection's session ends at once.
  auto none = std::make_shared<AgentSession>();
  auto none_id = sessions.open(none, "o", std::chrono::seconds(0));
  sessions.detach(none, "z");
  CHECK(sessions.claim(*none_id).status().kind() == ErrorKind::kNotFound);
}

}  // namespace
}  // namespace cairn
