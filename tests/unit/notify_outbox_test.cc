// The coordinator's notification outbox (engine/coordinator/notify_outbox.h) with a recording
// Notifier and a real experiment database: markers ride the batch, events are released only
// after the commit, and best_improved's best and pace are read back from the store by a new
// outbox, as a resume reads them.
#include "engine/coordinator/notify_outbox.h"

#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "store/schema.h"
#include "test_dir.h"

namespace cairn {
namespace {

class RecordingNotifier : public Notifier {
 public:
  std::string prepare(NotifyEvent, Json payload) override {
    const std::string id = "d" + std::to_string(++n_);
    payload["delivery_id"] = id;
    prepared.push_back(payload);
    return id;
  }
  void release(const std::vector<std::string>& ids) override {
    released.insert(released.end(), ids.begin(), ids.end());
  }
  void discard(const std::vector<std::string>& ids) override {
    discarded.insert(discarded.end(), ids.begin(), ids.end());
  }
  void notify(NotifyEvent, Json payload) override { sent_now.push_back(payload); }

  std::vector<Json> prepared, sent_now;
  std::vector<std::string> released, discarded;

 private:
  int n_ = 0;
};

ExperimentConfig config_on(std::vector<NotifyEvent> on) {
  ExperimentConfig config;
  config.searcher.metric = "loss";
  config.searcher.smaller_is_better = true;
  config.notify.webhooks = {"http://127.0.0.1:9/hook"};
  config.notify.on = std::move(on);
  return config;
}

Json best_payload(const std::string& trial, double value) {
  return Json{{"event", "best_improved"}, {"best", {{"trial", trial}, {"value", value}}}};
}

std::unique_ptr<ExperimentDb> open_db(const testing::TestDir& dir) {
  std::filesystem::create_directories(dir / "exp");
  std::filesystem::create_directories(dir / "tmp");
  auto db = ExperimentDb::open(dir / "exp", ExperimentDb::Mode::kWrite, dir / "tmp");
  REQUIRE_MESSAGE(db.ok(), db.status().message());
  return std::move(*db);
}

}  // namespace

TEST_CASE("notify outbox: an event's marker rides the batch, the event waits for the commit") {
  testing::TestDir dir;
  auto db = open_db(dir);
  RecordingNotifier notifier;
  const ExperimentConfig config = config_on({NotifyEvent::kEnd, NotifyEvent::kTrialError});
  NotifyOutbox outbox(&notifier, &config, db.get());
  StoreBatch batch;
  outbox.stage(NotifyEvent::kTrialError, Json{{"event", "trial_error"}}, batch);
  CHECK(notifier.prepared.size() == 1);
  CHECK(notifier.released.empty());
  CHECK(batch.count() == 1);
  REQUIRE(db->commit(batch, true).ok());
  outbox.committed();
  CHECK(notifier.released == std::vector<std::string>{"d1"});
  auto marker = db->get(schema::notify_key("d1"));
  REQUIRE(marker.ok());
  CHECK(marker->has_value());
  // A failed commit forgets what it would have reported.
  outbox.stage(NotifyEvent::kEnd, Json{{"event", "experiment_end"}}, batch);
  outbox.commit_failed();
  CHECK(notifier.discarded == std::vector<std::string>{"d2"});
  outbox.committed();  // nothing staged any more
  CHECK(notifier.released.size() == 1);
}

TEST_CASE("notify outbox: an event not asked for is neither prepared nor marked") {
  RecordingNotifier notifier;
  const ExperimentConfig config = config_on({NotifyEvent::kEnd});
  NotifyOutbox outbox(&notifier, &config, nullptr);
  CHECK_FALSE(outbox.wants(NotifyEvent::kTrialError));
  CHECK_FALSE(outbox.wants(NotifyEvent::kBestImproved));
  StoreBatch batch;
  outbox.best(best_payload("1.1", 0.5), 0.5, batch);
  outbox.tick(batch);
  CHECK(notifier.prepared.empty());
  CHECK(batch.empty());
  NotifyOutbox none(nullptr, &config, nullptr);
  CHECK_FALSE(none.wants(NotifyEvent::kEnd));
}

TEST_CASE("best_improved: only a better value, at most one per interval, the latest waiting") {
  BestNoticeState state;
  const int64_t minute = 60000;
  CHECK(decide_best(state, 0.5, true, 1000, minute) == BestDecision::kSendNow);
  state.best = 0.5;
  state.last_sent_ms = 1000;
  CHECK(decide_best(state, 0.6, true, 2000, minute) == BestDecision::kIgnore);
  CHECK(decide_best(state, 0.5, true, 99000, minute) == BestDecision::kIgnore);
  CHECK(decide_best(state, 0.4, true, 2000, minute) == BestDecision::kWait);
  CHECK(decide_best(state, 0.4, true, 61000, minute) == BestDecision::kSendNow);
  CHECK(decide_best(state, 0.6, false, 2000, minute) == BestDecision::kWait);  // larger wins
  // A clock set back does not hold the slot for ever.
  CHECK(decide_best(state, 0.4, true, 500, minute) == BestDecision::kSendNow);
  // The stored form reads back; a record no cairn wrote reads as a fresh state.
  state.waiting = best_payload("1.2", 0.4);
  const BestNoticeState back = BestNoticeState::from_json(state.to_json());
  CHECK(back.best == 0.5);
  CHECK(back.last_sent_ms == 1000);
  CHECK(back.waiting == state.waiting);
  CHECK_FALSE(BestNoticeState::from_json(Json("nonsense")).best.has_value());
}

TEST_CASE("best_improved: a new outbox on the same store keeps the best and the pace") {
  testing::TestDir dir;
  auto db = open_db(dir);
  RecordingNotifier notifier;
  const ExperimentConfig config = config_on({NotifyEvent::kBestImproved});
  {
    NotifyOutbox outbox(&notifier, &config, db.get());
    StoreBatch batch;
    outbox.best(best_payload("1.1", 0.5), 0.5, batch);  // the first best: now
    outbox.best(best_payload("1.2", 0.4), 0.4, batch);  // within the minute: waits
    REQUIRE(db->commit(batch, true).ok());
    outbox.committed();
    CHECK(notifier.released.size() == 1);
    CHECK(notifier.prepared.at(0)["best"]["trial"] == "1.1");
  }
  // What a resume's outbox sees: 0.45 is no news (0.4 is waiting), 0.3 waits too, and the
  // tick does not send before the slot.
  NotifyOutbox resumed(&notifier, &config, db.get());
  StoreBatch batch;
  resumed.best(best_payload("1.1", 0.45), 0.45, batch);
  CHECK(batch.empty());
  resumed.best(best_payload("1.3", 0.3), 0.3, batch);
  resumed.tick(batch);
  REQUIRE(db->commit(batch, true).ok());
  resumed.committed();
  CHECK(notifier.prepared.size() == 1);
  auto stored = db->get_json(schema::kNotifyBest);
  REQUIRE(stored.ok());
  REQUIRE(stored->has_value());
  CHECK((**stored)["best"] == 0.3);
  CHECK((**stored)["waiting"]["best"]["trial"] == "1.3");
  // At the experiment's end the waiting one is dropped, in the store too.
  resumed.drop_waiting(batch);
  REQUIRE(db->commit(batch, true).ok());
  stored = db->get_json(schema::kNotifyBest);
  CHECK((**stored)["waiting"].is_null());
}

TEST_CASE("best_improved: the one waiting goes when its slot comes") {
  setenv("CAIRN_TEST_BEST_INTERVAL_MS", "1", 1);
  RecordingNotifier notifier;
  const ExperimentConfig config = config_on({NotifyEvent::kBestImproved});
  NotifyOutbox outbox(&notifier, &config, nullptr);
  StoreBatch batch;
  outbox.best(best_payload("1.1", 0.5), 0.5, batch);
  // Within the same millisecond the slot may be taken; a later tick sends the waiting one.
  outbox.best(best_payload("1.2", 0.4), 0.4, batch);
  for (int i = 0; i < 1000 && notifier.prepared.size() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    outbox.tick(batch);
  }
  unsetenv("CAIRN_TEST_BEST_INTERVAL_MS");
  REQUIRE(notifier.prepared.size() == 2);
  CHECK(notifier.prepared[1]["best"]["trial"] == "1.2");
}

}  // namespace cairn
