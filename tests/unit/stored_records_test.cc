#include "store/stored_records.h"

#include <doctest/doctest.h>

namespace cairn::schema {

namespace {

Json good_trial() {
  return Json{{"id", "7.3"},
              {"index", 3},
              {"state", "RUNNING"},
              {"hparams", {{"lr", 0.1}}},
              {"seed", 42},
              {"steps_completed", 10},
              {"restarts", 0},
              {"target_length", 20},
              {"validated_target", 10},
              {"closed", false},
              {"output_offset", 512},
              {"log_seq", 4},
              {"output_offset_rank1", 64},
              {"rank_pids", {100, 101}}};
}

}  // namespace

TEST_CASE("a trial record's fields come back typed") {
  auto head = read_trial_record("trial/00000003", good_trial());
  REQUIRE(head.ok());
  CHECK(head->index == 3);
  CHECK(head->state == TrialState::kRunning);
  CHECK(head->target_length == 20);
  CHECK(head->validated_target == 10);
  CHECK_FALSE(head->closed);
  CHECK(head->latest_checkpoint_steps == -1);
}

TEST_CASE("a trial record with a wrong type is a corrupt store naming the key and field") {
  struct Case {
    const char* field;
    Json value;
    const char* says;
  };
  const Case cases[] = {
      {"index", "3", "field 'index' is not an integer"},
      {"target_length", 2.5, "field 'target_length' is not an integer"},
      {"closed", "no", "field 'closed' is not true or false"},
      {"seed", -1, "field 'seed' is not a non-negative integer"},
      {"hparams", Json::array(), "field 'hparams' is not an object"},
      {"state", "SLEEPING", "has an unknown state 'SLEEPING'"},
      {"output_offset_rank1", "64", "field 'output_offset_rank1' is not a non-negative integer"},
      {"rank_pids", Json::array({100, "x"}), "field 'rank_pids' holds a non-integer"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.field);
    Json record = good_trial();
    record[c.field] = c.value;
    auto head = read_trial_record("trial/00000003", record);
    REQUIRE_FALSE(head.ok());
    CHECK(head.status().kind() == ErrorKind::kCorrupt);
    CHECK(head.status().message().find("store corrupt: trial/00000003 ") == 0);
    CHECK(head.status().message().find(c.says) != std::string::npos);
  }
  Json missing = good_trial();
  missing.erase("state");
  CHECK(read_trial_record("trial/00000003", missing)
            .status()
            .message()
            .find("field 'state' is missing") != std::string::npos);
  CHECK_FALSE(read_trial_record("trial/00000003", Json::array()).ok());
}

TEST_CASE("events are read with their type, and unknown types are kept for skipping") {
  auto ev = read_event("event/0000000000000005",
                       R"({"seq":5,"type":"searcher_validation","trial":2,"length":9})");
  REQUIRE(ev.ok());
  CHECK(ev->seq == 5);
  CHECK(ev->type == EventType::kSearcherValidation);
  CHECK(*ev->integer("trial") == 2);
  auto missing = ev->integer("metric");
  CHECK(missing.status().message() ==
        "store corrupt: event 5 has no integer 'metric' (a searcher_validation event) (`cairn "
        "doctor` checks the store)");

  auto future = read_event("event/0000000000000006", R"({"seq":6,"type":"from_the_future"})");
  REQUIRE(future.ok());
  CHECK_FALSE(future->type);

  CHECK(read_event("event/7", "not json").status().kind() == ErrorKind::kCorrupt);
  CHECK_FALSE(read_event("event/7", R"({"seq":"7","type":"train"})").ok());
  CHECK_FALSE(read_event("event/7", R"({"seq":7,"type":3})").ok());
  for (EventType t :
       {EventType::kTrialCreated, EventType::kCheckpointFailed, EventType::kExperimentResumed})
    CHECK(parse_event_type(event_type_name(t)) == t);
}

}  // namespace cairn::schema

namespace cairn::schema {

TEST_CASE("a trial's typed fields are written where they are read back from") {
  TrialRecordHead head;
  head.index = 12;
  head.state = TrialState::kPaused;
  head.target_length = 27;
  head.validated_target = 9;
  head.closed = true;
  head.latest_checkpoint_steps = 9;
  Json record{{"id", "4.12"}, {"hparams", Json::object()}, {"seed", 7}, {"state", "QUEUED"}};
  write_trial_record(head, record);
  CHECK(record["state"] == "PAUSED");  // replaced, not kept twice
  auto back = read_trial_record("trial/00000012", record);
  REQUIRE(back.ok());
  CHECK(back->index == 12);
  CHECK(back->state == TrialState::kPaused);
  CHECK(back->target_length == 27);
  CHECK(back->validated_target == 9);
  CHECK(back->closed);
  CHECK(back->latest_checkpoint_steps == 9);
}

}  // namespace cairn::schema
