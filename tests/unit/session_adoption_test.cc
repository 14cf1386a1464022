#include "peer/session_adoption.h"

#include <doctest/doctest.h>

#include <atomic>
#include <random>
#include <string>

#include "engine/coordinator/remote_adoption.h"
#include "engine/coordinator/slot_pool.h"
#include "peer/agent_sessions.h"

namespace cairn {
namespace {

std::string replay_of(StreamLines& lines) {
  return lines.replay();
}

TEST_CASE("stream lines: a replay is the hello and the requests nobody answered") {
  StreamLines lines;
  lines.from_rank(R"({"type":"hello","protocol":1,"trial":"1.1"})"
                  "\n");
  lines.from_rank(R"({"type":"next_operation","seq":1})"
                  "\n");
  size_t swallowed = 0;
  CHECK(lines
            .to_rank(R"({"type":"welcome","protocol":1})"
                     "\n",
                     &swallowed)
            .size() > 0);
  CHECK(swallowed == 0);  // no replay yet: every answer reaches the rank
  lines.to_rank(R"({"type":"operation","re":1,"length":10})"
                "\n",
                &swallowed);
  // Training reports are kept until an ack says the coordinator committed them.
  lines.from_rank(R"({"type":"training","reports":[{"step":1,"metrics":{"seq":7}}]})"
                  "\n");
  lines.from_rank(R"({"type":"validation","seq":2,"step":1,"metrics":{}})"
                  "\n");
  lines.from_rank(R"({"type":"checkpoint_begin","seq":3,"step":1})"
                  "\n");
  lines.from_rank(R"({"type":"checkp)");  // not finished yet
  CHECK(replay_of(lines) == R"({"type":"hello","protocol":1,"trial":"1.1"})"
                            "\n"
                            R"({"type":"training","reports":[{"step":1,"metrics":{"seq":7}}]})"
                            "\n"
                            R"({"type":"validation","seq":2,"step":1,"metrics":{}})"
                            "\n"
                            R"({"type":"checkpoint_begin","seq":3,"step":1})"
                            "\n"
                            R"({"type":"checkp)");
  // The new coordinator's answer to the replayed hello stays on the agent (split over two
  // frames here); what follows it reaches the rank.
  std::string out = lines.to_rank(R"({"type":"wel)", &swallowed);
  CHECK(out.empty());
  CHECK(swallowed == 12);
  out = lines.to_rank(
      "come\"}\n"
      R"({"type":"stop","reason":"pause"})"
      "\n",
      &swallowed);
  CHECK(swallowed == 7);
  CHECK(out == R"({"type":"stop","reason":"pause"})"
               "\n");
  // The validation's ack: it and everything before it are committed.
  lines.to_rank(R"({"type":"ack","re":2})"
                "\n",
                &swallowed);
  CHECK(lines.replay() == R"({"type":"hello","protocol":1,"trial":"1.1"})"
                          "\n"
                          R"({"type":"checkpoint_begin","seq":3,"step":1})"
                          "\n"
                          R"({"type":"checkp)");
  lines.to_rank(R"({"type":"welcome"})"
                "\n",
                &swallowed);  // swallowed: a replay was made
  // A checkpoint_begin answered: sent again marked as answered, with its directory (a gang's
  // other ranks may not have had theirs), in its place before what the rank sent next.
  lines.from_rank(R"(oint_end","seq":4,"step":1,"path":"/d"})"
                  "\n");
  lines.to_rank(R"({"type":"checkpoint_dir","re":3,"path":"/d"})"
                "\n",
                &swallowed);
  CHECK(lines.replay() ==
        R"({"type":"hello","protocol":1,"trial":"1.1"})"
        "\n"
        R"({"type":"answered","request":{"type":"checkpoint_begin","seq":3,"step":1},)"
        R"("answer":{"type":"checkpoint_dir","re":3,"path":"/d"}})"
        "\n"
        R"({"type":"checkpoint_end","seq":4,"step":1,"path":"/d"})"
        "\n");
  lines.to_rank(R"({"type":"welcome"})"
                "\n",
                &swallowed);  // the answer to the replay's hello
  // Its end answered (an error here, not an ack): the round is over for this rank.
  lines.to_rank(R"({"type":"error","re":4,"message":"no"})"
                "\n",
                &swallowed);
  CHECK(lines.replay() == R"({"type":"hello","protocol":1,"trial":"1.1"})"
                          "\n");
}

TEST_CASE("stream lines: the latest answered sync is sent again, marked answered") {
  StreamLines lines;
  size_t swallowed = 0;
  lines.from_rank(R"({"type":"hello","protocol":1})"
                  "\n");
  lines.to_rank(R"({"type":"welcome"})"
                "\n",
                &swallowed);
  lines.from_rank(R"({"type":"sync","seq":1,"step":1})"
                  "\n");
  lines.to_rank(R"({"type":"sync","re":1,"stop":false})"
                "\n",
                &swallowed);
  lines.from_rank(R"({"type":"training","reports":[{"step":2,"metrics":{}}]})"
                  "\n"
                  R"({"type":"sync","seq":2,"step":2,"stop":"interrupt"})"
                  "\n");
  // Unanswered: sent as it is, after the answered one (the older answered sync went when
  // the newer one was answered).
  CHECK(lines.replay() == R"({"type":"hello","protocol":1})"
                          "\n"
                          R"({"type":"answered","request":{"type":"sync","seq":1,"step":1},)"
                          R"("answer":{"type":"sync","re":1,"stop":false}})"
                          "\n"
                          R"({"type":"training","reports":[{"step":2,"metrics":{}}]})"
                          "\n"
                          R"({"type":"sync","seq":2,"step":2,"stop":"interrupt"})"
                          "\n");
  lines.to_rank(R"({"type":"welcome"})"
                "\n",
                &swallowed);  // the replay's hello answer
  lines.to_rank(R"({"type":"sync","re":2,"stop":true,"reason":"interrupt"})"
                "\n",
                &swallowed);
  CHECK(lines.replay() == R"({"type":"hello","protocol":1})"
                          "\n"
                          R"({"type":"training","reports":[{"step":2,"metrics":{}}]})"
                          "\n"
                          R"({"type":"answered","request":{"type":"sync","seq":2,"step":2,)"
                          R"("stop":"interrupt"},"answer":{"type":"sync","re":2,"stop":true,)"
                          R"("reason":"interrupt"}})"
                          "\n");
  lines.to_rank(R"({"type":"welcome"})"
                "\n",
                &swallowed);
  // An ack of a later request: the coordinator was alive after it; nothing before goes
  // again, but for the answered sync, which the gang's other ranks may still lack (an ack
  // goes to this rank only).
  lines.from_rank(R"({"type":"validation","seq":3,"step":2,"metrics":{}})"
                  "\n");
  lines.to_rank(R"({"type":"ack","re":3})"
                "\n",
                &swallowed);
  CHECK(lines.replay() == R"({"type":"hello","protocol":1})"
                          "\n"
                          R"({"type":"answered","request":{"type":"sync","seq":2,"step":2,)"
                          R"("stop":"interrupt"},"answer":{"type":"sync","re":2,"stop":true,)"
                          R"("reason":"interrupt"}})"
                          "\n");
  CHECK(lines.kept_bytes() == 0);
  CHECK(lines.answered_count() == 1);
}

TEST_CASE("stream lines: a rank whose hello had no answer gets the new coordinator's") {
  StreamLines lines;
  size_t swallowed = 0;
  lines.from_rank("{\"type\":\"hello\"}\n");
  CHECK(lines.replay() == "{\"type\":\"hello\"}\n");
  CHECK(lines.to_rank("{\"type\":\"welcome\"}\n", &swallowed) == "{\"type\":\"welcome\"}\n");
  CHECK(swallowed == 0);
  // Answered now: a later replay's welcome is the agent's only.
  (void)lines.replay();
  CHECK(lines.to_rank("{\"type\":\"welcome\"}\n", &swallowed).empty());
  CHECK(swallowed > 0);
}

TEST_CASE("stream lines: a rank reporting heavily does not push its answered requests out") {
  StreamLines lines;
  size_t swallowed = 0;
  lines.from_rank("{\"type\":\"hello\"}\n");
  lines.from_rank(R"({"type":"checkpoint_begin","seq":1,"step":4})"
                  "\n");
  lines.to_rank(R"({"type":"checkpoint_dir","re":1,"path":"/d/4"})"
                "\n",
                &swallowed);
  lines.from_rank(R"({"type":"sync","seq":2,"step":5})"
                  "\n");
  lines.to_rank(R"({"type":"sync","re":2,"stop":false})"
                "\n",
                &swallowed);
  // Far more than the byte bound of reports while the round waits: the oldest reports go,
  // the two answered requests stay, in their place before the reports kept.
  const std::string batch = R"({"type":"training","reports":[)" + std::string(1000, ' ') + "]}\n";
  for (int i = 0; i < 1000; ++i) lines.from_rank(batch);
  CHECK(lines.kept_bytes() <= StreamLines::kMaxBytes);
  CHECK(lines.kept_bytes() > StreamLines::kMaxBytes - batch.size());
  CHECK(lines.answered_count() == 2);
  const std::string replay = lines.replay();
  const std::string answered =
      "{\"type\":\"hello\"}\n"
      R"({"type":"answered","request":{"type":"checkpoint_begin","seq":1,"step":4},)"
      R"("answer":{"type":"checkpoint_dir","re":1,"path":"/d/4"}})"
      "\n"
      R"({"type":"answered","request":{"type":"sync","seq":2,"step":5},)"
      R"("answer":{"type":"sync","re":2,"stop":false}})"
      "\n";
  CHECK(replay.starts_with(answered + batch));
  CHECK(replay.size() == answered.size() + lines.kept_bytes());
  lines.to_rank("{\"type\":\"welcome\"}\n", &swallowed);
  // The ack of the round's end: its begin goes with it; the sync stays.
  lines.from_rank(R"({"type":"checkpoint_end","seq":3,"step":4,"path":"/d/4"})"
                  "\n");
  lines.to_rank(R"({"type":"ack","re":3,"checkpoint":"ab"})"
                "\n",
                &swallowed);
  CHECK(lines.kept_bytes() == 0);
  CHECK(lines.answered_count() == 1);
  CHECK(lines.replay() ==
        "{\"type\":\"hello\"}\n"
        R"({"type":"answered","request":{"type":"sync","seq":2,"step":5},)"
        R"("answer":{"type":"sync","re":2,"stop":false}})"
        "\n");
}

TEST_CASE("stream lines: a checkpoint the rank aborted is not told again once acknowledged") {
  StreamLines lines;
  size_t swallowed = 0;
  lines.from_rank("{\"type\":\"hello\"}\n");
  lines.from_rank(R"({"type":"checkpoint_begin","seq":1,"step":4})"
                  "\n");
  lines.to_rank(R"({"type":"checkpoint_dir","re":1,"path":"/d/4"})"
                "\n",
                &swallowed);
  lines.from_rank(R"({"type":"checkpoint_abort","step":4,"path":"/d/4"})"
                  "\n");
  // Not acknowledged yet: the abort is replayed after the answered begin.
  CHECK(lines.replay() ==
        "{\"type\":\"hello\"}\n"
        R"({"type":"answered","request":{"type":"checkpoint_begin","seq":1,)"
        R"("step":4},"answer":{"type":"checkpoint_dir","re":1,"path":"/d/4"}})"
        "\n"
        R"({"type":"checkpoint_abort","step":4,"path":"/d/4"})"
        "\n");
  lines.to_rank("{\"type\":\"welcome\"}\n", &swallowed);
  // A later ack: the coordinator read the abort, the round is over; neither goes again.
  lines.from_rank(R"({"type":"validation","seq":2,"step":4,"metrics":{}})"
                  "\n");
  lines.to_rank(R"({"type":"ack","re":2})"
                "\n",
                &swallowed);
  CHECK(lines.answered_count() == 0);
  CHECK(lines.replay() == "{\"type\":\"hello\"}\n");
}

TEST_CASE("stream lines: the answered requests kept apart have bounds of their own") {
  StreamLines lines;
  size_t swallowed = 0;
  lines.from_rank("{\"type\":\"hello\"}\n");
  // Checkpoints begun and never ended (each aborted, say): the oldest answered go first.
  for (int step = 1; step <= 20; ++step) {
    const std::string seq = std::to_string(step);
    lines.from_rank(R"({"type":"checkpoint_begin","seq":)" + seq + R"(,"step":)" + seq + "}\n");
    lines.to_rank(R"({"type":"checkpoint_dir","re":)" + seq + R"(,"path":"/d"})" + "\n",
                  &swallowed);
    CHECK(lines.answered_count() <= StreamLines::kMaxAnswered);
  }
  CHECK(lines.answered_count() == StreamLines::kMaxAnswered);
  const std::string replay = lines.replay();
  CHECK(replay.find(R"("step":12})") == std::string::npos);
  CHECK(replay.find(R"("step":13})") != std::string::npos);
  CHECK(replay.find(R"("step":20})") != std::string::npos);
  lines.to_rank("{\"type\":\"welcome\"}\n", &swallowed);
  // A request too large to keep apart is answered and dropped, not kept without a bound.
  const std::string padding(StreamLines::kMaxAnsweredBytes, ' ');
  lines.from_rank(R"({"type":"sync","seq":30,"step":30,"x":")" + padding + "\"}\n");
  lines.to_rank(R"({"type":"sync","re":30,"stop":false})"
                "\n",
                &swallowed);
  CHECK(lines.answered_count() == StreamLines::kMaxAnswered);
  CHECK(lines.answered_bytes() <= StreamLines::kMaxAnswered * StreamLines::kMaxAnsweredBytes);
  CHECK(lines.kept_bytes() == 0);
  CHECK(lines.replay().find(padding) == std::string::npos);
}

TEST_CASE("stream lines: a rank's operations are counted, not replayed") {
  StreamLines lines;
  size_t swallowed = 0;
  lines.from_rank("{\"type\":\"hello\"}\n");
  int64_t seq = 0;
  auto ask = [&](const std::string& answer) {
    const std::string s = std::to_string(++seq);
    lines.from_rank(R"({"type":"next_operation","seq":)" + s + "}\n");
    lines.to_rank(R"({"type":"operation","re":)" + s + answer + "}\n", &swallowed);
  };
  ask(R"(,"length":3)");
  CHECK(lines.operations().count == 1);
  CHECK(lines.operations().to_json() == Json::parse(R"({"count":1,"latest":[{"length":3}]})"));
  for (int i = 4; i < 14; ++i) ask(R"(,"length":)" + std::to_string(i));
  ask(R"(,"done":true,"extra":1)");
  CHECK(lines.operations().count == 12);
  REQUIRE(lines.operations().latest.size() == AnsweredOperations::kMaxKept);
  CHECK(lines.operations().latest.front() == Json::parse(R"({"length":7})"));
  CHECK(lines.operations().latest.back() == Json::parse(R"({"done":true})"));
  // Not operations: an error, a negative length, an answer to no next_operation.
  lines.from_rank(R"({"type":"next_operation","seq":20})"
                  "\n");
  lines.to_rank(R"({"type":"error","re":20,"message":"no"})"
                "\n",
                &swallowed);
  ask(R"(,"length":-1)");
  lines.to_rank(R"({"type":"operation","re":99,"length":5})"
                "\n",
                &swallowed);
  CHECK(lines.operations().count == 12);
  // Answered: never sent again; one not answered is.
  lines.from_rank(R"({"type":"next_operation","seq":40})"
                  "\n");
  CHECK(lines.replay() ==
        "{\"type\":\"hello\"}\n"
        R"({"type":"next_operation","seq":40})"
        "\n");
  // Carried over to the rank's next stream, which counts on.
  StreamLines next;
  next.set_operations(lines.operations());
  next.from_rank(R"({"type":"next_operation","seq":1})"
                 "\n");
  next.to_rank(R"({"type":"operation","re":1,"done":true})"
               "\n",
               &swallowed);
  CHECK(next.operations().count == 13);
}

TEST_CASE("stream lines: malformed lines are kept as lines, and the bound holds") {
  StreamLines lines;
  lines.from_rank("not json\n{\"type\":\"hello\"}\n");
  CHECK(lines.said_hello());
  const std::string batch = R"({"type":"training","reports":[)" + std::string(1000, ' ') + "]}\n";
  for (int i = 0; i < 1000; ++i) lines.from_rank(batch);
  CHECK(lines.kept_bytes() <= StreamLines::kMaxBytes);
  CHECK(lines.replay().starts_with("{\"type\":\"hello\"}\n"));
  size_t swallowed = 0;
  lines.to_rank(R"({"type":"ack","re":"x"})"
                "\n{[\n",
                &swallowed);  // ignored
  CHECK(lines.kept_bytes() > 0);
}

TEST_CASE("stream lines: any mix of requests and answers keeps a bounded, well-formed replay") {
  // Seeded, so a failure repeats: requests of every kind the replay cares about, answers
  // to them, to nothing and to the wrong kind, acks, in any order and cut anywhere.
  std::mt19937 random(17);
  auto pick = [&](int n) { return static_cast<int>(random() % static_cast<unsigned>(n)); };
  for (int round = 0; round < 200; ++round) {
    StreamLines lines;
    lines.from_rank("{\"type\":\"hello\",\"protocol\":1}\n");
    int64_t seq = 0;
    for (int i = 0; i < 300; ++i) {
      size_t swallowed = 0;
      const std::string step = std::to_string(pick(8));
      const std::string re = std::to_string(seq - pick(4));
      switch (pick(11)) {
        case 0:
          lines.from_rank(R"({"type":"sync","seq":)" + std::to_string(++seq) + R"(,"step":)" +
                          step + "}\n");
          break;
        case 1:
          lines.from_rank(R"({"type":"checkpoint_begin","seq":)" + std::to_string(++seq) +
                          R"(,"step":)" + step + "}\n");
          break;
        case 2:
          lines.from_rank(R"({"type":"checkpoint_end","seq":)" + std::to_string(++seq) +
                          R"(,"step":)" + step + R"(,"path":"/d"})" + "\n");
          break;
        case 3:
          lines.from_rank(R"({"type":"training","reports":[]})"
                          "\n");
          break;
        case 4:
          lines.to_rank(R"({"type":"sync","re":)" + re + R"(,"stop":false})" + "\n", &swallowed);
          break;
        case 5:
          lines.to_rank(R"({"type":"checkpoint_dir","re":)" + re + R"(,"path":"/d"})" + "\n",
                        &swallowed);
          break;
        case 6:
          lines.to_rank(R"({"type":"error","re":)" + re + R"(,"message":"no"})" + "\n", &swallowed);
          break;
        case 7:
          lines.to_rank(R"({"type":"ack","re":)" + re + "}\n", &swallowed);
          break;
        case 8:
          lines.from_rank(R"({"type":"next_operation","seq":)" + std::to_string(++seq) + "}\n");
          break;
        case 9:
          lines.to_rank(R"({"type":"operation","re":)" + re + R"(,"length":)" + step + "}\n",
                        &swallowed);
          break;
        default:
          (void)lines.replay();  // the next line from the coordinator is then swallowed
          break;
      }
      REQUIRE(lines.kept_bytes() <= StreamLines::kMaxBytes);  // and never wrapped below 0
      REQUIRE(lines.answered_count() <= StreamLines::kMaxAnswered);
      REQUIRE(lines.answered_bytes() <= StreamLines::kMaxAnswered * StreamLines::kMaxAnsweredBytes);
      REQUIRE(lines.operations().latest.size() <= AnsweredOperations::kMaxKept);
      REQUIRE(lines.operations().latest.size() <= static_cast<size_t>(lines.operations().count));
    }
    const std::string replay = lines.replay();
    size_t start = 0;
    for (size_t nl; (nl = replay.find('\n', start)) != std::string::npos; start = nl + 1) {
      const Json m = Json::parse(replay.substr(start, nl - start), nullptr, false);
      REQUIRE(m.is_object());
      if (m.value("type", "") == "answered") {
        REQUIRE(m["request"].is_object());
        REQUIRE(m["answer"].is_object());
      }
    }
    CHECK(start == replay.size());  // every line ended
  }
}

TEST_CASE("stream lines: a line that never ends is not kept beyond the line bound") {
  StreamLines endless;
  const std::string mib(1 << 20, 'x');
  for (int i = 0; i < 20; ++i) endless.from_rank(mib);
  endless.from_rank("x\n{\"type\":\"hello\"}\n");
  CHECK(endless.replay() == "{\"type\":\"hello\"}\n");
}

TEST_CASE("agent sessions: a resume claims the owner's newest detached session") {
  std::atomic<int> running{0};
  AgentSessions sessions(running);
  auto old = std::make_shared<AgentSession>();
  auto newer = std::make_shared<AgentSession>();
  REQUIRE(sessions.open(old, "host:/store#1", std::chrono::seconds(60)).ok());
  sessions.detach(old, "x");
  // A session of the owner opened meanwhile (ended, or kept) never holds the old one.
  auto other = std::make_shared<AgentSession>();
  REQUIRE(sessions.open(other, "host:/store#2", std::chrono::seconds(60)).ok());
  sessions.detach(other, "y");
  auto none = sessions.claim_owner("host:/store#3");
  REQUIRE(none.ok());
  CHECK(!*none);
  auto claimed = sessions.claim_owner("host:/store#1");
  REQUIRE(claimed.ok());
  CHECK(claimed->get() == old.get());
  CHECK(old->attached);
  CHECK(sessions.detached() == 1);  // store#2's stays
  // Attached (its coordinator went without the agent noticing): asked to let go, not ended.
  auto busy = sessions.claim_owner("host:/store#1");
  CHECK(busy.status().kind() == ErrorKind::kFailed);
  CHECK(old->release.load());
  CHECK(!old->end_on_release);
  sessions.detach(old, "x");
  CHECK(sessions.claim_owner("host:/store#1")->get() == old.get());
}

TEST_CASE("kept ranks: malformed entries of a session_adopted answer are left out") {
  const Json answer = Json::parse(R"({"type":"session_adopted","ranks":[
      {"rank":2,"trial":"1.1","attempt":1,"trial_rank":0,"pid":42,"running":true},
      {"rank":"3","trial":"1.1","attempt":1,"trial_rank":0,"running":true},
      {"rank":4,"trial":"1.2","attempt":2,"trial_rank":1,"running":false},
      7]})");
  const std::vector<KeptRank> kept = parse_kept_ranks(answer);
  REQUIRE(kept.size() == 2);
  CHECK(kept[0].id == 2);
  CHECK(kept[0].pid == 42);
  CHECK(kept[0].running);
  CHECK(kept[1].trial == "1.2");
  CHECK(kept[1].rank == 1);
  CHECK(!kept[1].running);
  CHECK(parse_kept_ranks(Json::parse(R"({"ranks":5})")).empty());
}

TEST_CASE("kept ranks: what each rank was told of its operations, checked") {
  const Json answer = Json::parse(R"({"type":"session_adopted","ranks":[
      {"rank":2,"trial":"1.1","attempt":1,"trial_rank":0,"running":true,
       "operations":{"count":3,"latest":[{"length":5},{"done":true,"x":1}]}},
      {"rank":3,"trial":"1.1","attempt":1,"trial_rank":1,"running":true},
      {"rank":4,"trial":"1.1","attempt":1,"trial_rank":1,"running":true,
       "operations":{"count":1,"latest":[{"length":5},{"length":6}]}},
      {"rank":5,"trial":"1.1","attempt":1,"trial_rank":1,"running":true,
       "operations":{"count":1,"latest":[{"length":-5}]}},
      {"rank":6,"trial":"1.1","attempt":1,"trial_rank":1,"running":true,
       "operations":{"count":-1,"latest":[]}},
      {"rank":7,"trial":"1.1","attempt":1,"trial_rank":1,"running":true,"operations":[]}]})");
  const std::vector<KeptRank> kept = parse_kept_ranks(answer);
  REQUIRE(kept.size() == 2);  // the malformed accounts are left out with their ranks
  REQUIRE(kept[0].operations);
  CHECK(kept[0].operations->count == 3);
  CHECK(kept[0].operations->latest ==
        std::vector<Json>{Json::parse(R"({"length":5})"), Json::parse(R"({"done":true})")});
  CHECK(!kept[1].operations);  // an agent that predates it
  Json many = Json::parse(R"({"operations":{"count":1000,"latest":[]}})");
  for (int i = 0; i < 65; ++i) many["operations"]["latest"].push_back({{"length", i}});
  CHECK(!parse_kept_operations(many).ok());
  many["operations"]["latest"].erase(0);
  CHECK(parse_kept_operations(many).ok());
}

TEST_CASE("gang operations: a rank not yet answered gets what the others got") {
  auto told = [](int64_t count, std::vector<std::string> latest) {
    KeptOperations k;
    k.count = count;
    for (const std::string& op : latest) k.latest.push_back(Json::parse(op));
    return std::optional<KeptOperations>(k);
  };
  // Rank 0 had its 4th operation (length 30), rank 1 not yet: rank 1's 4th is rank 0's, and
  // rank 0's next request is the 5th, not the 4th again.
  auto rebuilt = rebuild_gang_operations(
      {told(4, {R"({"length":10})", R"({"length":30})"}), told(3, {R"({"length":10})"})});
  REQUIRE(rebuilt.ok());
  REQUIRE(rebuilt->has_value());
  CHECK((*rebuilt)->operations == std::vector<Json>{Json::parse(R"({"length":30})")});
  CHECK((*rebuilt)->asked == std::vector<size_t>{1, 0});
  // Every rank answered alike: nothing owed, numbered on from here.
  rebuilt = rebuild_gang_operations({told(2, {R"({"done":true})"}), told(2, {R"({"done":true})"})});
  REQUIRE(rebuilt.ok());
  CHECK((*rebuilt)->operations.empty());
  CHECK((*rebuilt)->asked == std::vector<size_t>{0, 0});
  // Two behind (an operation of no steps let the first rank ask on at once).
  rebuilt = rebuild_gang_operations({told(0, {}), told(2, {R"({"length":4})", R"({"done":true})"}),
                                     told(1, {R"({"length":4})"})});
  REQUIRE(rebuilt.ok());
  CHECK((*rebuilt)->operations ==
        std::vector<Json>{Json::parse(R"({"length":4})"), Json::parse(R"({"done":true})")});
  CHECK((*rebuilt)->asked == std::vector<size_t>{0, 2, 1});
  // Nothing answered yet, or an agent that predates it: numbered from 0, as before.
  rebuilt = rebuild_gang_operations({told(0, {}), told(0, {})});
  REQUIRE(rebuilt.ok());
  CHECK(!rebuilt->has_value());
  rebuilt = rebuild_gang_operations({told(1, {R"({"length":4})"}), std::nullopt});
  REQUIRE(rebuilt.ok());
  CHECK(!rebuilt->has_value());
  // Accounts that cannot be one sequence: refused in one line.
  auto refused =
      rebuild_gang_operations({told(1, {R"({"length":4})"}), told(1, {R"({"length":5})"})});
  REQUIRE(!refused.ok());
  CHECK(refused.status().message() ==
        "rank 0 and rank 1 were told different operations as their operation 1 (length 4, "
        "length 5)");
  refused = rebuild_gang_operations({told(1000000, {R"({"length":4})"}), told(0, {})});
  REQUIRE(!refused.ok());
  CHECK(refused.status().message().find('\n') == std::string::npos);
  refused =
      rebuild_gang_operations({told(10, {R"({"length":4})", R"({"length":5})"}), told(7, {})});
  REQUIRE(!refused.ok());
}

TEST_CASE("kept output: an adoption gets what its file lacks, once") {
  KeptOutput out(100);  // the rank's first byte lands at 100 in the coordinator's file
  out.sent("aaaa", 1);
  out.sent("bbbb", 2);
  out.sent("cccc", 4);
  out.acknowledged(2);  // frames 1 and 2 are in the file
  CHECK(out.kept_from() == 108);
  CHECK(out.kept_bytes() == 4);
  out.sent("dddd", 5);
  // The dead coordinator wrote frame 4's bytes and half of nothing else: its file ends at 112.
  uint64_t lost = 99;
  CHECK(out.replay_from(112, &lost) == "dddd");
  CHECK(lost == 0);
  CHECK(out.kept_bytes() == 0);
  // Numbered on from the new coordinator's file end.
  out.sent("eeee", 1);
  CHECK(out.kept_from() == 112);
  CHECK(out.replay_from(114) == "ee");  // part of a piece was written
  CHECK(out.replay_from(114).empty());  // nothing kept: nothing twice
  out.sent("ffff", 1);
  CHECK(out.replay_from(200).empty());  // a file past everything sent: nothing to add
  CHECK(out.kept_from() == 200);
}

TEST_CASE("kept output: bytes bounded out are said lost in one line, not a silent gap") {
  KeptOutput out(0, 10);
  out.sent("0123456", 1);
  out.sent("789abcd", 2);  // 14 bytes sent, 10 kept: "0123" dropped
  CHECK(out.kept_bytes() == 10);
  CHECK(out.kept_from() == 4);
  out.acknowledged(0);  // nothing acknowledged: nothing more goes
  CHECK(out.kept_bytes() == 10);
  const std::string note = "cairn: 4 bytes of output were lost while cairn was away\n";
  uint64_t lost = 99;
  const std::string replay = out.replay_from(0, &lost);
  CHECK(replay == note + "456789abcd");
  CHECK(lost == 4);
  // What is sent again is numbered from the file's end, the note included.
  CHECK(out.kept_bytes() == 0);
  out.sent(replay.substr(0, 8), 1);  // as the adoption sends it (bound 10: all kept)
  out.sent(replay.substr(8), 2);     // over the bound: the oldest go
  CHECK(out.kept_from() == replay.size() - 10);
  out.sent("x", 3);
  out.acknowledged(2);
  CHECK(out.kept_from() == replay.size());
  CHECK(out.replay_from(replay.size()) == "x");
}

TEST_CASE("agent sessions: output is kept per rank until the coordinator has it") {
  AgentSession session;
  session.id = "s";
  RemoteLaunch launch{2, {"x"}, {{"CAIRN_TRIAL_ID", "1.1"}, {"RANK", "0"}}, "w"};
  launch.output_at = 50;
  note_launch(session, launch);
  note_launch(session, RemoteLaunch{3, {"x"}, {}, "w"});  // said nothing: nothing kept
  session.journal.sent(Json::object(), "f1");
  note_output(session, 2, "hello\n");
  note_output(session, 3, "other\n");
  CHECK(session.adoption.outputs.count(3) == 0);
  session.journal.sent(Json::object(), "f2");
  note_output(session, 2, "world\n");
  session.journal.acknowledge(1);
  session.journal.sent(Json::object(), "f3");
  note_output(session, 2, "!\n");  // "hello\n" is in the file now
  KeptOutput& kept = session.adoption.outputs.at(2);
  CHECK(kept.kept_from() == 56);
  CHECK(kept.replay_from(56) == "world\n!\n");
  note_rank_ended(session, 2);
  CHECK(session.adoption.outputs.empty());
}

TEST_CASE("slot pool: take holds exactly the slots asked, or nothing") {
  SlotPool pool(std::vector<int>{0, 2, 1});
  CHECK(pool.take(1, {{1, 1}, {2, 0}}));
  CHECK(pool.free(1) == 1);
  CHECK(pool.free(2) == 0);
  CHECK(!pool.take(2, {{1, 0}, {2, 0}}));  // one is held: nothing taken
  CHECK(pool.free(1) == 1);
  CHECK(!pool.take(2, {{1, 0}, {1, 0}}));  // the same slot twice
  CHECK(!pool.take(2, {{1, 5}}));          // no such slot
  pool.set_available(1, false);
  CHECK(!pool.take(2, {{1, 0}}));
  pool.set_available(1, true);
  pool.release(1);
  CHECK(pool.free() == 3);
}

}  // namespace
}  // namespace cairn
