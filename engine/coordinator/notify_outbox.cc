#include "engine/coordinator/notify_outbox.h"

#include <unistd.h>

#include <cstdlib>
#include <iostream>

#include "common/metric_order.h"
#include "engine/coordinator/notify_payload.h"
#include "store/schema.h"

namespace cairn {

namespace {

int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Tests only: die as a kill -9 would at one of the points the at-least-once promise covers.
void die_if_asked(const char* variable) {
  if (const char* value = std::getenv(variable); value && *value == '1') ::_exit(137);
}

}  // namespace

Json BestNoticeState::to_json() const {
  Json out = Json::object();
  out["best"] = best ? Json(*best) : Json();
  out["last_sent_ms"] = last_sent_ms;
  out["waiting"] = waiting;
  return out;
}

BestNoticeState BestNoticeState::from_json(const Json& record) {
  BestNoticeState state;
  if (!record.is_object()) return state;
  if (record.contains("best") && record["best"].is_number())
    state.best = record["best"].get<double>();
  if (record.contains("last_sent_ms") && record["last_sent_ms"].is_number_integer())
    state.last_sent_ms = record["last_sent_ms"].get<int64_t>();
  if (record.contains("waiting") && record["waiting"].is_object())
    state.waiting = record["waiting"];
  return state;
}

BestDecision decide_best(const BestNoticeState& state, double value, bool smaller_is_better,
                         int64_t now_ms, int64_t interval_ms) {
  if (state.best && !MetricOrder(smaller_is_better).better(value, *state.best))
    return BestDecision::kIgnore;
  // A clock set back counts as a slot taken now, not as one taken in the future for ever.
  const bool slot_free = state.last_sent_ms == 0 || now_ms >= state.last_sent_ms + interval_ms ||
                         now_ms < state.last_sent_ms;
  return slot_free ? BestDecision::kSendNow : BestDecision::kWait;
}

NotifyOutbox::NotifyOutbox(Notifier* notifier, const ExperimentConfig* config,
                           const ExperimentDb* db)
    : notifier_(notifier), config_(config), db_(db) {}

bool NotifyOutbox::wants(NotifyEvent event) const {
  return notifier_ && config_->notify.wants(event);
}

void NotifyOutbox::stage(NotifyEvent event, Json payload, StoreBatch& batch) {
  if (!notifier_) return;
  const std::string id = notifier_->prepare(event, std::move(payload));
  if (id.empty()) return;  // not kept: said by the notifier
  batch.put_json(schema::notify_key(id), Json{{"event", notify_event_name(event)}});
  staged_.push_back(id);
  // Tests only: the event is pending and its state change not committed.
  die_if_asked("CAIRN_TEST_DIE_BEFORE_NOTIFY_COMMIT");
}

void NotifyOutbox::send_now(NotifyEvent event, Json payload) {
  if (notifier_) notifier_->notify(event, std::move(payload));
}

void NotifyOutbox::committed() {
  if (staged_.empty()) return;
  // Tests only: the change and the marker are durable, nothing is delivered yet.
  die_if_asked("CAIRN_TEST_DIE_AFTER_NOTIFY_COMMIT");
  notifier_->release(staged_);
  staged_.clear();
}

void NotifyOutbox::commit_failed() {
  if (staged_.empty()) return;
  notifier_->discard(staged_);
  staged_.clear();
}

int64_t NotifyOutbox::best_interval_ms() const {
  // Tests shorten it (CAIRN_TEST_BEST_INTERVAL_MS).
  if (const char* text = std::getenv("CAIRN_TEST_BEST_INTERVAL_MS"); text && std::atoll(text) > 0)
    return std::atoll(text);
  return kBestInterval.count();
}

BestNoticeState& NotifyOutbox::best_state() {
  if (!best_) {
    best_.emplace();
    auto stored = db_ ? db_->get_json(schema::kNotifyBest)
                      : Result<std::optional<Json>>(std::optional<Json>());
    if (!stored.ok())
      std::cerr << "cairn: warning: best_improved's stored pace cannot be read ("
                << stored.status().message() << "); counted from now\n";
    else if (stored->has_value())
      *best_ = BestNoticeState::from_json(**stored);
  }
  return *best_;
}

void NotifyOutbox::save_best(StoreBatch& batch) {
  batch.put_json(schema::kNotifyBest, best_->to_json());
}

void NotifyOutbox::best(Json payload, double value, StoreBatch& batch) {
  if (!wants(NotifyEvent::kBestImproved)) return;
  BestNoticeState& state = best_state();
  const int64_t now = unix_ms_now();
  switch (decide_best(state, value, config_->searcher.smaller_is_better, now, best_interval_ms())) {
    case BestDecision::kIgnore:
      return;
    case BestDecision::kSendNow:
      state.best = value;
      state.last_sent_ms = now;
      state.waiting = Json();
      save_best(batch);
      stage(NotifyEvent::kBestImproved, std::move(payload), batch);
      return;
    case BestDecision::kWait:
      state.best = value;
      state.waiting = std::move(payload);  // a newer best replaces one still waiting its turn
      save_best(batch);
      return;
  }
}

void NotifyOutbox::tick(StoreBatch& batch) {
  if (!wants(NotifyEvent::kBestImproved)) return;
  BestNoticeState& state = best_state();
  if (state.waiting.is_null()) return;
  const int64_t now = unix_ms_now();
  const int64_t interval = best_interval_ms();
  if (now < state.last_sent_ms + interval && now >= state.last_sent_ms) return;
  Json payload = std::move(state.waiting);
  state.waiting = Json();
  state.last_sent_ms = now;
  save_best(batch);
  stage(NotifyEvent::kBestImproved, std::move(payload), batch);
}

void NotifyOutbox::drop_waiting(StoreBatch& batch) {
  if (!wants(NotifyEvent::kBestImproved)) return;
  BestNoticeState& state = best_state();
  if (state.waiting.is_null()) return;
  state.waiting = Json();
  save_best(batch);
}

}  // namespace cairn
