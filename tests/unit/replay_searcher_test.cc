// The searcher behind `cairn reproduce`: one trial with the recorded hyperparameters and
// seed, asked to train to the recorded lengths in order, then closed.
#include "engine/search/replay_searcher.h"

#include <doctest/doctest.h>

namespace cairn {
namespace {

ReplayPlan plan() {
  auto p = replay_plan_from_json(
      Json::parse(R"({"trial": "7.3", "hparams": {"lr": 0.1}, "seed": 17, "lengths": [1, 3, 9]})"));
  REQUIRE(p.ok());
  return *p;
}

TEST_CASE("replay: creates the recorded trial and trains it rung by rung") {
  ReplaySearcher s(plan());
  auto start = s.start();
  REQUIRE(start.size() == 2);
  CHECK(start[0].kind == SearcherAction::Kind::kCreateTrial);
  CHECK(start[0].hparams == Json{{"lr", 0.1}});
  CHECK(start[0].seed == 17);
  CHECK(start[1].kind == SearcherAction::Kind::kTrain);
  CHECK(start[1].length == 1);

  auto next = s.on_validation(1, 1, 0.5);
  REQUIRE(next.size() == 1);
  CHECK(next[0].length == 3);
  CHECK(s.on_validation(1, 2, 0.4).empty());  // a validation between boundaries
  next = s.on_validation(1, 3, 0.3);
  REQUIRE(next.size() == 1);
  CHECK(next[0].length == 9);
  next = s.on_validation(1, 9, 0.2);
  REQUIRE(next.size() == 1);
  CHECK(next[0].kind == SearcherAction::Kind::kClose);
  CHECK(s.on_validation(1, 9, 0.2).empty());
  CHECK_FALSE(s.finished());
  s.on_trial_closed(1);
  CHECK(s.finished());
}

TEST_CASE("replay: a validation past several boundaries skips to the next one beyond it") {
  ReplaySearcher s(plan());
  s.start();
  auto next = s.on_validation(1, 3, 0.3);
  REQUIRE(next.size() == 1);
  CHECK(next[0].length == 9);
}

TEST_CASE("replay: a damaged plan is refused") {
  CHECK_FALSE(
      replay_plan_from_json(Json::parse(R"({"hparams": {}, "seed": 1, "lengths": []})")).ok());
  CHECK_FALSE(
      replay_plan_from_json(Json::parse(R"({"hparams": {}, "seed": 1, "lengths": [3, 1]})")).ok());
  CHECK_FALSE(replay_plan_from_json(Json::parse(R"({"hparams": {}, "lengths": [1]})")).ok());
}

}  // namespace
}  // namespace cairn
