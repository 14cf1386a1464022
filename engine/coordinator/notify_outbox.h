// The coordinator's side of its notifications (docs/config.md "notify"): which events ride
// which commit, and best_improved's pace, both kept in the experiment's store so that neither
// depends on the process that drives it.
//
// At least once with no window: stage() prepares an event on the Notifier (a pending file,
// notifier.h) and puts its marker, schema::notify_key(id), into the round's batch, the one
// that also stores the state change the event reports (the trial's ERROR, the experiment's
// end). committed() releases the round's events once that batch is durable. A kill in
// between leaves a pending event whose marker is committed or not, with its state change:
// the next `resume` delivers it exactly when it is.
//
// best_improved: at most one per kBestInterval, across processes. The best value notified
// (or waiting), when the last one was staged (wall clock) and the one waiting for its slot
// are schema::kNotifyBest, written into the same batch as the event they decide, so a resume
// neither sends again a best already sent nor forgets the pace.
//
// Thread-safety: the coordinator's thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "engine/config/config.h"
#include "engine/coordinator/notifier.h"
#include "store/experiment_db.h"

namespace cairn {

// best_improved's stored pace (schema::kNotifyBest).
struct BestNoticeState {
  std::optional<double> best;  // the best value notified or waiting; none before the first
  int64_t last_sent_ms = 0;    // Unix milliseconds the last one was staged; 0: never
  Json waiting;                // the payload waiting for its slot; null when none

  Json to_json() const;
  // A record no cairn wrote reads as a fresh state.
  static BestNoticeState from_json(const Json& record);
};

enum class BestDecision {
  kIgnore,   // not better than the best already notified or waiting
  kSendNow,  // better, and the slot is free
  kWait,     // better, but one left less than an interval ago: it replaces the one waiting
};

// What a trial's new best `value` means for the experiment's best_improved (pure).
BestDecision decide_best(const BestNoticeState& state, double value, bool smaller_is_better,
                         int64_t now_ms, int64_t interval_ms);

class NotifyOutbox {
 public:
  static constexpr std::chrono::milliseconds kBestInterval{60000};

  // `db`: where kNotifyBest is read, the first time best_improved needs it. All three
  // outlive this object; `notifier` may be null (no notification is configured).
  NotifyOutbox(Notifier* notifier, const ExperimentConfig* config, const ExperimentDb* db);

  bool wants(NotifyEvent event) const;
  // Prepares `payload` and writes its marker into `batch`, to be released by committed().
  void stage(NotifyEvent event, Json payload, StoreBatch& batch);
  // Not tied to a commit (notifier.h's notify()).
  void send_now(NotifyEvent event, Json payload);
  // A trial's best got to `value`: staged, kept waiting for its slot, or ignored.
  void best(Json payload, double value, StoreBatch& batch);
  // Every round: stages the best_improved waiting for its slot once the slot is free.
  void tick(StoreBatch& batch);
  // The run ends: the best_improved waiting is dropped (the end names the best).
  void drop_waiting(StoreBatch& batch);
  // The batch holding the staged markers is durable / could not be written.
  void committed();
  void commit_failed();

 private:
  BestNoticeState& best_state();
  void save_best(StoreBatch& batch);
  int64_t best_interval_ms() const;

  Notifier* notifier_;
  const ExperimentConfig* config_;
  const ExperimentDb* db_;
  std::vector<std::string> staged_;  // delivery ids whose markers are in the round's batch
  std::optional<BestNoticeState> best_;
};

}  // namespace cairn
