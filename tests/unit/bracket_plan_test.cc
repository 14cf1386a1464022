// How Hyperband and ASHA lay out brackets and rungs: SPEC §3's numbers, rounding of
// lengths and counts, caps, and the plans too large to run.
#include "engine/search/bracket_plan.h"

#include <doctest/doctest.h>

namespace cairn {
namespace {

SearcherConfig searcher(int64_t max_length, double divisor, int64_t min_length = 1,
                        int max_trials = 0) {
  SearcherConfig config;
  config.name = "hyperband";
  config.metric = "loss";
  config.max_length = max_length;
  config.divisor = divisor;
  config.min_length = min_length;
  config.max_trials = max_trials;
  return config;
}

SearcherConfig asha(int64_t max_length, int max_rungs, int max_trials, const std::string& mode) {
  SearcherConfig config = searcher(max_length, 3, 1, max_trials);
  config.name = "asha";
  config.max_rungs = max_rungs;
  config.mode = mode;
  return config;
}

// "N@L …" for each bracket.
std::vector<std::string> rungs_of(const std::vector<BracketPlan>& plan) {
  std::vector<std::string> out;
  for (const BracketPlan& bracket : plan) {
    std::string text;
    for (const RungPlan& rung : bracket.rungs)
      text += (text.empty() ? "" : " ") + std::to_string(rung.trials) + "@" +
              std::to_string(rung.length);
    out.push_back(text);
  }
  return out;
}

std::vector<BracketPlan> hyperband_ok(const SearcherConfig& config) {
  auto plan = hyperband_plan(config);
  REQUIRE_MESSAGE(plan.ok(), plan.status().message());
  return *plan;
}

}  // namespace

TEST_CASE("floor_log is exact at powers, where floating point is not") {
  CHECK(floor_log(81, 3) == 4);
  CHECK(floor_log(80.999, 3) == 3);
  CHECK(floor_log(243, 3) == 5);
  CHECK(floor_log(1000, 10) == 3);
  CHECK(floor_log(1e15, 10) == 15);
  CHECK(floor_log(8, 2) == 3);
  CHECK(floor_log(1, 3) == 0);
  CHECK(floor_log(2.9, 3) == 0);
}

TEST_CASE("split_trials: floor shares, the remainder to the first, nobody left empty") {
  CHECK(split_trials(16, {3, 1.5}) == std::vector<int64_t>{11, 5});
  CHECK(split_trials(16, {3, 1.5, 1}) == std::vector<int64_t>{10, 4, 2});
  CHECK(split_trials(4, {100, 1, 1}) == std::vector<int64_t>{2, 1, 1});
  CHECK(split_trials(2, {1, 1, 1}) == std::vector<int64_t>{1, 1, 0});
  CHECK(split_trials(7, {1}) == std::vector<int64_t>{7});
}

TEST_CASE("hyperband R=81 eta=3 is SPEC §3's iteration") {
  const auto plan = hyperband_ok(searcher(81, 3));
  CHECK(rungs_of(plan) == std::vector<std::string>{"81@1 27@3 9@9 3@27 1@81", "34@3 11@9 3@27 1@81",
                                                   "15@9 5@27 1@81", "8@27 2@81", "5@81"});
  int64_t trials = 0;
  for (const BracketPlan& bracket : plan) trials += bracket.trials;
  CHECK(trials == 143);
}

TEST_CASE("hyperband lengths round down, and min_length sets the first rung") {
  // R=100: s_max = 4 (81 <= 100 < 243); 100/81 = 1.23 -> 1, 100/27 = 3.7 -> 3, …
  CHECK(rungs_of(hyperband_ok(searcher(100, 3))).front() == "81@1 27@3 9@11 3@33 1@100");
  CHECK(rungs_of(hyperband_ok(searcher(81, 3, 9))) ==
        std::vector<std::string>{"9@9 3@27 1@81", "5@27 1@81", "3@81"});
  // A fractional divisor: s_max = ⌊log_2.5 50⌋ = 4; n = ⌈39.0625⌉ = 40.
  CHECK(rungs_of(hyperband_ok(searcher(50, 2.5))).front() == "40@1 16@3 6@8 2@20 1@50");
  CHECK(rungs_of(hyperband_ok(searcher(1, 3))) == std::vector<std::string>{"1@1"});
}

TEST_CASE("hyperband rungs always lengthen, end at max_length and hold at least one trial") {
  for (int64_t max_length : {1, 2, 4, 10, 81, 100, 1000}) {
    for (double divisor : {1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 10.0}) {
      for (int64_t min_length : {int64_t{1}, int64_t{3}}) {
        if (min_length > max_length) continue;
        auto plan = hyperband_plan(searcher(max_length, divisor, min_length));
        if (!plan.ok()) continue;  // too many trials: covered below
        for (const BracketPlan& bracket : *plan) {
          CAPTURE(max_length);
          CAPTURE(divisor);
          REQUIRE_FALSE(bracket.rungs.empty());
          CHECK(bracket.rungs.front().length >= min_length);
          CHECK(bracket.rungs.front().trials == bracket.trials);
          CHECK(bracket.rungs.back().length == max_length);
          for (size_t i = 1; i < bracket.rungs.size(); ++i) {
            CHECK(bracket.rungs[i].length > bracket.rungs[i - 1].length);
            CHECK(bracket.rungs[i].trials <= bracket.rungs[i - 1].trials);
            CHECK(bracket.rungs[i].trials >= 1);
          }
        }
      }
    }
  }
}

TEST_CASE("hyperband max_trials scales every bracket down") {
  const auto plan = hyperband_ok(searcher(81, 3, 1, 50));
  CHECK(rungs_of(plan) == std::vector<std::string>{"31@1 10@3 3@9 1@27 1@81", "11@3 3@9 1@27 1@81",
                                                   "5@9 1@27 1@81", "2@27 1@81", "1@81"});
  // A cap above the iteration's 143 trials changes nothing.
  CHECK(rungs_of(hyperband_ok(searcher(81, 3, 1, 500))) == rungs_of(hyperband_ok(searcher(81, 3))));
}

TEST_CASE("hyperband plans too large to run are refused, naming the key to change") {
  auto brackets = hyperband_plan(searcher(1000, 1.01));
  REQUIRE_FALSE(brackets.ok());
  CHECK(brackets.status().kind() == ErrorKind::kBadInput);
  CHECK(brackets.status().message().rfind("searcher.divisor: ", 0) == 0);
  auto trials = hyperband_plan(searcher(1'000'000, 2));
  REQUIRE_FALSE(trials.ok());
  CHECK(trials.status().message().rfind("searcher.max_trials: ", 0) == 0);
  auto capped = hyperband_plan(searcher(1'000'000, 2, 1, 100));
  REQUIRE(capped.ok());
  int64_t total = 0;
  for (const BracketPlan& bracket : *capped) total += bracket.trials;
  CHECK(total == 100);
}

TEST_CASE("asha brackets per mode, and max_trials split as Determined's adaptive ASHA") {
  CHECK(rungs_of(asha_plan(asha(9, 3, 16, "aggressive"))) ==
        std::vector<std::string>{"16@1 5@3 1@9"});
  CHECK(rungs_of(asha_plan(asha(9, 3, 16, "standard"))) ==
        std::vector<std::string>{"11@1 3@3 1@9", "5@3 1@9"});
  CHECK(rungs_of(asha_plan(asha(9, 3, 16, "conservative"))) ==
        std::vector<std::string>{"10@1 3@3 1@9", "4@3 1@9", "2@9"});
  // Five rungs: standard runs the brackets of 5, 4 and 3 rungs, weighted 81/5 : 27/4 : 9/3
  // (624.3 : 260.1 : 115.6 of 1000, rounded down; the one left over goes to the first).
  CHECK(rungs_of(asha_plan(asha(81, 5, 1000, "standard"))) ==
        std::vector<std::string>{"625@1 208@3 69@9 23@27 7@81", "260@3 86@9 28@27 9@81",
                                 "115@9 38@27 12@81"});
}

TEST_CASE("asha rung lengths: rounded down, at least 1, no repeats, no empty top rung") {
  // max_length 9 has only three distinct rungs whatever max_rungs says.
  CHECK(rungs_of(asha_plan(asha(9, 5, 100, "aggressive"))) ==
        std::vector<std::string>{"100@1 33@3 11@9"});
  CHECK(rungs_of(asha_plan(asha(100, 5, 1000, "aggressive"))) ==
        std::vector<std::string>{"1000@1 333@3 111@11 37@33 12@100"});
  // 16 trials cannot fill more than 3 rungs at η = 3 (3^3 > 16): the top three are kept.
  CHECK(rungs_of(asha_plan(asha(81, 5, 16, "aggressive"))) ==
        std::vector<std::string>{"16@9 5@27 1@81"});
  // A divisor close to 1: every length from 1 to 10 once.
  SearcherConfig close = asha(10, 1000, 100'000, "aggressive");
  close.divisor = 1.01;
  const auto plan = asha_plan(close);
  REQUIRE(plan.size() == 1);
  REQUIRE(plan[0].rungs.size() == 10);
  for (int64_t i = 0; i < 10; ++i) CHECK(plan[0].rungs[i].length == i + 1);
  // A single trial: one rung, straight to max_length.
  CHECK(rungs_of(asha_plan(asha(81, 5, 1, "conservative"))) == std::vector<std::string>{"1@81"});
}

}  // namespace cairn

namespace cairn {

TEST_CASE("asha bracket_rungs (Determined's) name the brackets instead of mode") {
  SearcherConfig config = asha(9, 3, 16, "standard");
  config.bracket_rungs = {3, 1};
  // Weighted η^(j-1)/j as mode's brackets are: 3 : 1.
  CHECK(rungs_of(asha_plan(config)) == std::vector<std::string>{"12@1 4@3 1@9", "4@9"});
  // A bracket cannot have more rungs than the ladder (max_trials 2 allows one rung only).
  config.max_trials = 2;
  config.bracket_rungs = {3};
  CHECK(rungs_of(asha_plan(config)) == std::vector<std::string>{"2@9"});
}

}  // namespace cairn
