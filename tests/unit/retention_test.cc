#include "store/retention.h"

#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <optional>

#include "store/schema.h"
#include "store/store_location.h"
#include "test_dir.h"

namespace cairn {

namespace {

// A checkpoint of trial `trial` at `steps`, validated with val_loss = `loss` (none: never
// validated).
CheckpointSummary ckpt(const std::string& id, int64_t trial, int64_t steps,
                       std::optional<double> loss) {
  CheckpointSummary c{id, trial, steps, Json::object()};
  if (loss) c.metrics["val_loss"] = *loss;
  return c;
}

// `c`, named latest_checkpoint by its trial's record (registered last).
CheckpointSummary registered_last(CheckpointSummary c) {
  c.registered_last = true;
  return c;
}

RetentionPolicy policy(int latest, int best, int experiment_best, bool smaller = true) {
  return RetentionPolicy{latest, best, experiment_best, "val_loss", smaller};
}

struct Row {
  const char* name;
  RetentionPolicy policy;
  std::vector<CheckpointSummary> checkpoints;
  std::set<std::string> pinned;
  std::set<std::string> keep;
};

// Two trials used by several rows: trial 1 is best at b, trial 2 at d; overall d < e < b.
const std::vector<CheckpointSummary> kTwoTrials = {ckpt("a", 1, 1, 0.3),  ckpt("b", 1, 2, 0.2),
                                                   ckpt("c", 1, 3, 0.25), ckpt("d", 2, 1, 0.1),
                                                   ckpt("e", 2, 2, 0.15), ckpt("f", 2, 3, 0.4)};

const std::vector<Row> kRows = {
    {"the latest is also the best: one checkpoint kept",
     policy(1, 1, 0),
     {ckpt("a", 1, 1, 0.9), ckpt("b", 1, 2, 0.5), ckpt("c", 1, 3, 0.4), ckpt("d", 1, 4, 0.1)},
     {},
     {"d"}},
    {"the best is an older checkpoint: latest and best kept",
     policy(1, 1, 0),
     {ckpt("a", 1, 1, 0.9), ckpt("b", 1, 2, 0.1), ckpt("c", 1, 3, 0.4), ckpt("d", 1, 4, 0.5)},
     {},
     {"b", "d"}},
    {"a trial with no validation at all keeps only its latest",
     policy(1, 1, 0),
     {ckpt("a", 1, 1, {}), ckpt("b", 1, 2, {}), ckpt("c", 1, 3, {})},
     {},
     {"c"}},
    {"no validation and keep_trial_latest 0: nothing is best, nothing kept",
     policy(0, 1, 3),
     {ckpt("a", 1, 1, {}), ckpt("b", 1, 2, {})},
     {},
     {}},
    {"every keep_* 0 keeps nothing",
     policy(0, 0, 0),
     {ckpt("a", 1, 1, 0.2), ckpt("b", 1, 2, 0.1)},
     {},
     {}},
    {"equal metric: the earlier step is the best",
     policy(1, 1, 0),
     {ckpt("a", 1, 1, 0.9), ckpt("b", 1, 2, 0.5), ckpt("c", 1, 3, 0.5), ckpt("d", 1, 4, 0.7)},
     {},
     {"b", "d"}},
    {"equal metric and step: the smaller id is the best",
     policy(1, 1, 0),
     {ckpt("x1", 1, 2, 0.5), ckpt("x0", 1, 2, 0.5), ckpt("z", 1, 3, {})},
     {},
     {"x0", "z"}},
    {"equal steps at the end: the smaller id is the latest",
     policy(1, 0, 0),
     {ckpt("a", 1, 1, {}), ckpt("q", 1, 2, {}), ckpt("p", 1, 2, {})},
     {},
     {"p"}},
    {"equal steps at the end: the one the trial registered last is the latest",
     policy(1, 0, 0),
     {ckpt("a", 1, 1, {}), ckpt("p", 1, 2, {}), registered_last(ckpt("q", 1, 2, {}))},
     {},
     {"q"}},
    {"keep_trial_latest 2 with two saves of the last step keeps both",
     policy(2, 0, 0),
     {ckpt("a", 1, 1, {}), registered_last(ckpt("p", 1, 2, {})), ckpt("q", 1, 2, {})},
     {},
     {"p", "q"}},
    {"the trial's registered-last at a lower step does not outrank more steps",
     policy(1, 0, 0),
     {registered_last(ckpt("a", 1, 1, {})), ckpt("b", 1, 2, {})},
     {},
     {"b"}},
    {"keep_trial_latest 2 keeps the two newest",
     policy(2, 0, 0),
     {ckpt("c", 1, 3, {}), ckpt("a", 1, 1, {}), ckpt("d", 1, 4, {}), ckpt("b", 1, 2, {})},
     {},
     {"c", "d"}},
    {"keep_trial_best 2 with one validated checkpoint keeps it and the latest",
     policy(1, 2, 0),
     {ckpt("a", 1, 1, {}), ckpt("b", 1, 2, 0.3), ckpt("c", 1, 3, {})},
     {},
     {"b", "c"}},
    {"keep_experiment_best 0: each trial's latest only",
     policy(1, 0, 0),
     kTwoTrials,
     {},
     {"c", "f"}},
    {"keep_experiment_best 2: plus the two best of all trials",
     policy(1, 0, 2),
     kTwoTrials,
     {},
     {"c", "d", "e", "f"}},
    {"union of trial latest, trial best and experiment best",
     policy(1, 1, 2),
     kTwoTrials,
     {},
     {"b", "c", "d", "e", "f"}},
    {"larger_is_better picks the highest value",
     policy(1, 1, 0, /*smaller=*/false),
     {ckpt("a", 1, 1, 0.5), ckpt("b", 1, 2, 0.9), ckpt("c", 1, 3, 0.7)},
     {},
     {"b", "c"}},
    {"smaller_is_better on the same checkpoints picks the lowest",
     policy(1, 1, 0),
     {ckpt("a", 1, 1, 0.5), ckpt("b", 1, 2, 0.9), ckpt("c", 1, 3, 0.7)},
     {},
     {"a", "c"}},
    {"a paused trial's resume point is kept whatever the policy",
     policy(0, 0, 0),
     {ckpt("a", 1, 1, 0.5), ckpt("b", 1, 2, 0.9), ckpt("c", 2, 1, 0.1)},
     {"b"},
     {"b"}},
    {"pinned is added to the policy's choice; unknown pinned ids are ignored",
     policy(1, 1, 0),
     {ckpt("a", 1, 1, 0.5), ckpt("b", 1, 2, 0.9), ckpt("c", 1, 3, 0.7)},
     {"b", "gone"},
     {"a", "b", "c"}},
    {"non-finite and missing metrics never count as best",
     policy(0, 1, 1),
     {ckpt("a", 1, 1, std::nan("")), ckpt("b", 1, 2, -HUGE_VAL), ckpt("c", 1, 3, 0.8),
      CheckpointSummary{"d", 1, 4, Json{{"loss", 0.01}}}},
     {},
     {"c"}},
    {"each trial keeps its own latest, trials interleaved",
     policy(1, 0, 0),
     {ckpt("a", 2, 5, {}), ckpt("b", 1, 7, {}), ckpt("c", 2, 6, {}), ckpt("d", 1, 3, {})},
     {},
     {"b", "c"}},
    {"no checkpoints: nothing to decide", policy(1, 1, 1), {}, {"a"}, {}},
};

// A store in `dir` with experiment 1, whose config keeps the given checkpoints (metric
// val_loss), for checkpoints_to_delete to read.
std::unique_ptr<ExperimentDb> experiment_with_policy(const testing::TestDir& dir,
                                                     int keep_trial_latest, int keep_trial_best) {
  auto store = init_store(dir.path());
  REQUIRE(store.ok());
  REQUIRE(*allocate_experiment_id(*store) == 1);
  auto db = ExperimentDb::open(store->experiment(1), ExperimentDb::Mode::kWrite, store->tmp());
  REQUIRE(db.ok());
  StoreBatch batch;
  batch.put_json(
      schema::kExperiment,
      Json{{"id", 1},
           {"config",
            {{"searcher", {{"metric", "val_loss"}}},
             {"checkpoint",
              {{"keep_trial_latest", keep_trial_latest}, {"keep_trial_best", keep_trial_best}}}}}});
  REQUIRE((*db)->commit(batch, true).ok());
  return std::move(*db);
}

}  // namespace

TEST_CASE("retention keeps exactly the union of latest, best, experiment best and pinned") {
  for (const Row& row : kRows) {
    CAPTURE(row.name);
    const RetentionDecision d = decide_retention(row.policy, row.checkpoints, row.pinned);
    CHECK(d.keep == row.keep);
    std::set<std::string> expected_remove;
    for (const auto& c : row.checkpoints)
      if (!row.keep.count(c.id)) expected_remove.insert(c.id);
    CHECK(d.remove == expected_remove);
  }
}

TEST_CASE("the policy comes from the experiment's config, with SPEC defaults") {
  RetentionPolicy defaults = RetentionPolicy::from_config(Json::object());
  CHECK(defaults.keep_trial_latest == 1);
  CHECK(defaults.keep_trial_best == 1);
  CHECK(defaults.keep_experiment_best == 0);
  CHECK(defaults.smaller_is_better);

  Json config = Json::parse(R"({"searcher": {"metric": "acc", "smaller_is_better": false},
                                "checkpoint": {"keep_trial_latest": 3, "keep_experiment_best": 2}})");
  RetentionPolicy p = RetentionPolicy::from_config(config);
  CHECK(p.keep_trial_latest == 3);
  CHECK(p.keep_trial_best == 1);
  CHECK(p.keep_experiment_best == 2);
  CHECK(p.metric == "acc");
  CHECK_FALSE(p.smaller_is_better);
}

TEST_CASE("checkpoints_to_delete reads the policy, pins resumable trials, drops corrupt ones") {
  testing::TestDir dir;
  auto db = experiment_with_policy(dir, /*keep_trial_latest=*/0, /*keep_trial_best=*/1);
  StoreBatch batch;
  // Trial 1 finished; trial 2 is paused and would resume from its step-3 checkpoint.
  batch.put_json(schema::trial_key(1), Json{{"id", "1.1"}, {"index", 1}, {"state", "COMPLETED"}});
  batch.put_json(schema::trial_key(2), Json{{"id", "1.2"},
                                            {"index", 2},
                                            {"state", "PAUSED"},
                                            {"latest_checkpoint", std::string(64, '6')}});
  auto put = [&](char c, int64_t trial, int64_t steps, Json metrics, Json extra = Json::object()) {
    Json r{{"id", std::string(64, c)},
           {"trial_index", trial},
           {"steps_completed", steps},
           {"metrics", std::move(metrics)}};
    r.update(extra);
    batch.put_json(schema::checkpoint_key(std::string(64, c)), r);
  };
  put('1', 1, 1, {{"val_loss", 0.5}});
  put('2', 1, 2, {{"val_loss", 0.2}});
  put('3', 1, 3, {{"val_loss", 0.1}}, {{"corrupt", true}});  // best, but unusable
  put('4', 1, 4, {{"val_loss", 0.9}}, {{"deleted", true}});  // already gone: not a candidate
  put('5', 2, 1, {{"val_loss", 0.3}});
  put('6', 2, 3, Json::object());
  REQUIRE(db->commit(batch, true).ok());

  auto doomed = checkpoints_to_delete(*db);
  REQUIRE(doomed.ok());
  // Kept: '2' (trial 1's best usable), '5' (trial 2's best), '6' (trial 2's resume point).
  CHECK(*doomed == std::vector<std::string>{std::string(64, '1'), std::string(64, '3')});
}

TEST_CASE("a trial that saved its last step twice keeps the save it registered last") {
  // Restore resumes from the trial's latest_checkpoint among equal steps; retention kept the
  // smaller id instead, deleting what the trial (finished, so nothing pinned it) called its
  // latest: TRIAL@latest and a later `cairn resume` of the experiment lost it.
  testing::TestDir dir;
  auto db = experiment_with_policy(dir, /*keep_trial_latest=*/1, /*keep_trial_best=*/0);
  StoreBatch batch;
  const std::string older(64, 'a'), newer(64, 'b');  // the older save has the smaller id
  batch.put_json(
      schema::trial_key(1),
      Json{{"id", "1.1"}, {"index", 1}, {"state", "COMPLETED"}, {"latest_checkpoint", newer}});
  for (const std::string& id : {older, newer})
    batch.put_json(schema::checkpoint_key(id),
                   Json{{"id", id}, {"trial_index", 1}, {"steps_completed", 4}});
  REQUIRE(db->commit(batch, true).ok());

  auto doomed = checkpoints_to_delete(*db);
  REQUIRE(doomed.ok());
  CHECK(*doomed == std::vector<std::string>{older});
}

TEST_CASE("a checkpoint a pbt clone starts from is kept while the clone refers to it") {
  // Trial 1 trained on past the step its clone (trial 2) was made at; with keep_trial_latest
  // 1 and no best kept, only the clone's reference keeps the older checkpoint.
  testing::TestDir dir;
  auto db = experiment_with_policy(dir, /*keep_trial_latest=*/1, /*keep_trial_best=*/0);
  StoreBatch batch;
  const std::string at_2(64, 'a'), at_4(64, 'b'), other(64, 'c');
  batch.put_json(
      schema::trial_key(1),
      Json{{"id", "1.1"}, {"index", 1}, {"state", "COMPLETED"}, {"latest_checkpoint", at_4}});
  batch.put_json(schema::trial_key(2), Json{{"id", "1.2"},
                                            {"index", 2},
                                            {"state", "COMPLETED"},
                                            {"parent", {{"trial", "1.1"}, {"step", 2}}},
                                            {"parent_checkpoint", at_2}});
  batch.put_json(schema::checkpoint_key(at_2),
                 Json{{"id", at_2}, {"trial_index", 1}, {"steps_completed", 2}});
  batch.put_json(schema::checkpoint_key(at_4),
                 Json{{"id", at_4}, {"trial_index", 1}, {"steps_completed", 4}});
  batch.put_json(schema::checkpoint_key(other),
                 Json{{"id", other}, {"trial_index", 1}, {"steps_completed", 3}});
  REQUIRE(db->commit(batch, true).ok());

  auto doomed = checkpoints_to_delete(*db);
  REQUIRE(doomed.ok());
  CHECK(*doomed == std::vector<std::string>{other});
}

}  // namespace cairn
